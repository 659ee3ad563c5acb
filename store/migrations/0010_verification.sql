-- Verified deployments: the verdict the agent gave a deployment's revision once it ran
-- (`Passed`, `Failed` or `Inconclusive`, with its reason and numbers), and why a deployment was
-- made when kubenest made it itself (an automatic rollback after a failed verification).
-- Alerts gain the verification that stopped its automation.

ALTER TABLE deployments ADD COLUMN verification JSONB;
ALTER TABLE deployments ADD COLUMN reason TEXT NOT NULL DEFAULT '';

ALTER TABLE alerts DROP CONSTRAINT alerts_kind_check;
ALTER TABLE alerts ADD CONSTRAINT alerts_kind_check
    CHECK (kind IN ('heartbeat_missed', 'progress_deadline_exceeded', 'deletion_deadline_exceeded',
                    'gitops_write_failed', 'verification_failed'));
