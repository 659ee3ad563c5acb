-- What the REST facade keeps: users and their password hashes, refresh-token families, failed
-- logins (the rate limit every replica shares) and the event log behind the live stream.

CREATE TABLE users (
    username       TEXT PRIMARY KEY,
    -- argon2id, PHC string format.
    password_hash  TEXT NOT NULL,
    -- Platform administrators create organizations and users and see everything.
    platform_admin BOOLEAN NOT NULL DEFAULT false,
    created_at     TIMESTAMPTZ NOT NULL DEFAULT now(),
    CONSTRAINT users_username_check CHECK (username ~ '^[a-z0-9]([-a-z0-9._@]*[a-z0-9])?$'
                                           AND length(username) <= 253)
);

-- Refresh tokens are opaque random strings; only their SHA-256 is stored. Each login starts a
-- family; a refresh uses one token and issues the next of the same family. A token used twice
-- means it was stolen: the whole family is revoked.
CREATE TABLE refresh_tokens (
    token_hash  BYTEA PRIMARY KEY,
    family_id   UUID NOT NULL,
    username    TEXT NOT NULL REFERENCES users (username) ON DELETE CASCADE,
    created_at  TIMESTAMPTZ NOT NULL DEFAULT now(),
    expires_at  TIMESTAMPTZ NOT NULL,
    used_at     TIMESTAMPTZ,
    revoked_at  TIMESTAMPTZ
);
CREATE INDEX refresh_tokens_family_idx ON refresh_tokens (family_id);

CREATE TABLE login_failures (
    id       BIGSERIAL PRIMARY KEY,
    username TEXT NOT NULL,
    address  TEXT NOT NULL,
    at       TIMESTAMPTZ NOT NULL DEFAULT now()
);
CREATE INDEX login_failures_user_idx ON login_failures (username, at);
CREATE INDEX login_failures_address_idx ON login_failures (address, at);

-- The live stream's log, for clients resuming with Last-Event-ID. Every apiserver replica
-- derives the same events from the same object versions and gives each the same id (from the
-- resourceVersion it was seen in), so a row is stored once whichever replica comes first.
CREATE TABLE events (
    id          BIGINT PRIMARY KEY,
    org_id      TEXT NOT NULL,
    cluster_id  TEXT,
    project_id  TEXT,
    app_id      TEXT,
    kind        TEXT NOT NULL,
    payload     JSONB NOT NULL,
    at          TIMESTAMPTZ NOT NULL DEFAULT now()
);
CREATE INDEX events_org_idx ON events (org_id, id);
CREATE INDEX events_at_idx ON events (at);
