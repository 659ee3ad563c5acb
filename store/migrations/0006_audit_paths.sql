-- Every mutation on every path writes one audit entry: who (the name, and the user's id when the
-- actor is a kubenest user), by which path (`rest`, `kubectl`, `gitops`), and what became of
-- it (`succeeded`, `refused`, `failed`, with the HTTP-style status code). Entries are paged
-- newest first by id.

ALTER TABLE audit_log ADD COLUMN actor_id TEXT;
ALTER TABLE audit_log ADD COLUMN path TEXT NOT NULL DEFAULT 'rest'
    CONSTRAINT audit_log_path_check CHECK (path IN ('rest', 'kubectl', 'gitops'));
ALTER TABLE audit_log ADD COLUMN outcome TEXT NOT NULL DEFAULT 'succeeded'
    CONSTRAINT audit_log_outcome_check CHECK (outcome IN ('succeeded', 'refused', 'failed'));
ALTER TABLE audit_log ADD COLUMN status SMALLINT NOT NULL DEFAULT 200;
CREATE INDEX audit_log_org_id_idx ON audit_log (org_id, id DESC);
