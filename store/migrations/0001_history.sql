-- Deployment history, addon revisions and the audit log. Append-only by design: rows are
-- inserted, and only a deployment's outcome (status, message, finished_at) is ever updated.

CREATE TABLE deployments (
    id           UUID PRIMARY KEY,
    -- The App controller derives this from the App's uid and the change it is recording, so that
    -- a controller restarted between writing the row and dispatching does not write it twice.
    intent_key   TEXT NOT NULL,
    org_id       TEXT NOT NULL,
    project_id   TEXT NOT NULL,
    cluster_id   TEXT NOT NULL,
    app_id       TEXT NOT NULL,
    app_name     TEXT NOT NULL,
    revision     TEXT NOT NULL,
    operation    TEXT NOT NULL,
    actor        TEXT NOT NULL,
    spec_before  JSONB,
    spec_after   JSONB NOT NULL,
    rollback_of  UUID REFERENCES deployments (id),
    status       TEXT NOT NULL DEFAULT 'pending',
    message      TEXT NOT NULL DEFAULT '',
    created_at   TIMESTAMPTZ NOT NULL DEFAULT now(),
    finished_at  TIMESTAMPTZ,
    CONSTRAINT deployments_intent_key_unique UNIQUE (intent_key),
    CONSTRAINT deployments_operation_check CHECK (
        operation IN ('create', 'update', 'rollback', 'pause', 'resume', 'redeploy', 'delete')),
    CONSTRAINT deployments_status_check CHECK (
        status IN ('pending', 'succeeded', 'failed', 'superseded'))
);
CREATE INDEX deployments_app_idx ON deployments (org_id, app_id, created_at DESC);

CREATE TABLE addon_revisions (
    addon_id     TEXT NOT NULL,
    revision     INTEGER NOT NULL,
    org_id       TEXT NOT NULL,
    project_id   TEXT NOT NULL,
    definition   TEXT NOT NULL,
    chart        JSONB NOT NULL,
    chart_values JSONB NOT NULL,
    operation    TEXT NOT NULL,
    rollback_to  INTEGER,
    actor        TEXT NOT NULL,
    status       TEXT NOT NULL DEFAULT 'pending',
    message      TEXT NOT NULL DEFAULT '',
    created_at   TIMESTAMPTZ NOT NULL DEFAULT now(),
    PRIMARY KEY (addon_id, revision),
    CONSTRAINT addon_revisions_revision_check CHECK (revision >= 1),
    CONSTRAINT addon_revisions_operation_check CHECK (
        operation IN ('install', 'upgrade', 'values', 'rollback')),
    CONSTRAINT addon_revisions_status_check CHECK (status IN ('pending', 'succeeded', 'failed'))
);
CREATE INDEX addon_revisions_org_idx ON addon_revisions (org_id, addon_id, revision DESC);

CREATE TABLE audit_log (
    id            BIGSERIAL PRIMARY KEY,
    org_id        TEXT NOT NULL,
    actor         TEXT NOT NULL,
    action        TEXT NOT NULL,
    resource_kind TEXT NOT NULL,
    resource_name TEXT NOT NULL,
    details       JSONB NOT NULL DEFAULT '{}'::jsonb,
    at            TIMESTAMPTZ NOT NULL DEFAULT now()
);
CREATE INDEX audit_log_org_idx ON audit_log (org_id, at DESC);
