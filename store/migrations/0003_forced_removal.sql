-- A deployment can end `forced`: an administrator removed the App from the control plane
-- without its cluster confirming that what the App ran there is gone (the agent was
-- uninstalled, the cluster is dead). The row's message says what may be left on the cluster.

ALTER TABLE deployments DROP CONSTRAINT deployments_status_check;
ALTER TABLE deployments ADD CONSTRAINT deployments_status_check CHECK (
    status IN ('pending', 'succeeded', 'failed', 'superseded', 'forced'));
