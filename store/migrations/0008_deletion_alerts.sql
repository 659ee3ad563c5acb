-- A deletion that does not finish within its object's progress deadline raises an alert about
-- that object: an App, a standalone addon or a Project.

ALTER TABLE alerts DROP CONSTRAINT alerts_kind_check;
ALTER TABLE alerts ADD CONSTRAINT alerts_kind_check
    CHECK (kind IN ('heartbeat_missed', 'progress_deadline_exceeded', 'deletion_deadline_exceeded'));
ALTER TABLE alerts DROP CONSTRAINT alerts_subject_kind_check;
ALTER TABLE alerts ADD CONSTRAINT alerts_subject_kind_check
    CHECK (subject_kind IN ('cluster', 'app', 'addon', 'project'));
