-- Alerts users list and acknowledge: a cluster silent past its heartbeat window, an App that
-- failed its progress deadline. The controllers open one when the condition starts and resolve
-- it when it ends; at most one is open per subject and kind at a time.

CREATE TABLE alerts (
    id               UUID PRIMARY KEY,
    org_id           TEXT NOT NULL,
    -- `heartbeat_missed` or `progress_deadline_exceeded`.
    kind             TEXT NOT NULL,
    -- `critical` or `warning`.
    severity         TEXT NOT NULL,
    -- `cluster` or `app`, its uid and its name.
    subject_kind     TEXT NOT NULL,
    subject_id       TEXT NOT NULL,
    subject_name     TEXT NOT NULL,
    -- Where the subject lives, so each caller sees the alerts of what they have a role on.
    cluster_id       TEXT,
    project_id       TEXT,
    message          TEXT NOT NULL,
    opened_at        TIMESTAMPTZ NOT NULL DEFAULT now(),
    acknowledged_at  TIMESTAMPTZ,
    acknowledged_by  TEXT,
    resolved_at      TIMESTAMPTZ,
    -- Why it was resolved (the cluster reports again, the App runs again, it was deleted).
    resolution       TEXT,
    CONSTRAINT alerts_kind_check CHECK (kind IN ('heartbeat_missed', 'progress_deadline_exceeded')),
    CONSTRAINT alerts_severity_check CHECK (severity IN ('critical', 'warning')),
    CONSTRAINT alerts_subject_kind_check CHECK (subject_kind IN ('cluster', 'app'))
);
CREATE UNIQUE INDEX alerts_one_open_idx ON alerts (subject_id, kind) WHERE resolved_at IS NULL;
CREATE INDEX alerts_org_idx ON alerts (org_id, opened_at DESC);
