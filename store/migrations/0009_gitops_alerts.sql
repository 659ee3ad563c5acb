-- An App or standalone addon whose GitOps folder its agent could not write raises an alert.

ALTER TABLE alerts DROP CONSTRAINT alerts_kind_check;
ALTER TABLE alerts ADD CONSTRAINT alerts_kind_check
    CHECK (kind IN ('heartbeat_missed', 'progress_deadline_exceeded', 'deletion_deadline_exceeded',
                    'gitops_write_failed'));
