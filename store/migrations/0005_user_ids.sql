-- Identities are not names: every user gets an immutable id, which memberships (the `members`
-- of Organizations, Clusters and Projects) and access tokens carry. A user deleted and created
-- again under the same name is a new id and starts with nothing.
--
-- `token_epoch`: access tokens carry the epoch they were issued in and are refused once it is
-- raised (a changed password, a disabled account). `disabled_at`: a disabled user can neither
-- log in, refresh nor use a token.

ALTER TABLE users ADD COLUMN id UUID NOT NULL DEFAULT gen_random_uuid();
ALTER TABLE users ADD CONSTRAINT users_id_unique UNIQUE (id);
ALTER TABLE users ADD COLUMN disabled_at TIMESTAMPTZ;
ALTER TABLE users ADD COLUMN token_epoch INTEGER NOT NULL DEFAULT 1;
