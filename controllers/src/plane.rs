//! What every reconciler of the management plane shares: the API client, the history store,
//! the hub client and the work in flight.

use kube::runtime::reflector::ObjectRef;
use kubenest_contracts::{Envelope, Id, Message};
use kubenest_crds::app::App;
use tokio::sync::mpsc;

use crate::history::History;
use crate::hub_client::{DispatchError, HubClient};
use crate::intents::{Intents, Sent};
use crate::placement::Placement;

/// Shared by the App, Project and AddonInstance controllers and the status router.
pub struct Plane {
    pub client: kube::Client,
    pub history: History,
    pub hub: HubClient,
    pub intents: Intents,
    /// Where global AddonDefinitions and StackTemplates live.
    pub system_namespace: String,
    /// Asks the App controller to reconcile an App now (e.g. a snapshot says it differs).
    pub app_triggers: mpsc::Sender<ObjectRef<App>>,
}

impl std::fmt::Debug for Plane {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Plane")
            .field("system_namespace", &self.system_namespace)
            .finish_non_exhaustive()
    }
}

impl Plane {
    /// Sends a command to the placement's cluster, remembering what it was for. Succeeds on the
    /// hub's route acknowledgement, which proves routing only.
    pub async fn send(
        &self,
        placement: &Placement,
        payload: impl Into<Message>,
        what: Sent,
    ) -> Result<(), DispatchError> {
        let envelope = Envelope::new(payload)
            .for_cluster(Id::new(&placement.cluster_id), Id::new(&placement.org_id));
        self.intents.sent(envelope.id, what);
        self.hub.dispatch(envelope).await
    }
}

/// The condition reason and message for a command that was not routed.
pub fn unrouted(error: &DispatchError) -> (&'static str, String) {
    match error {
        DispatchError::NoSession => (
            "ClusterUnreachable",
            "the cluster's agent is not connected to any hub replica; the command is re-sent when it reconnects".into(),
        ),
        DispatchError::NotConnected(url) => (
            "HubUnavailable",
            format!("not connected to the hub replica holding the cluster ({url}); retrying"),
        ),
        DispatchError::Timeout => (
            "HubUnavailable",
            "the hub did not acknowledge the command in time; retrying".into(),
        ),
        DispatchError::Nacked(reason) => (
            "ClusterUnreachable",
            format!("the hub could not route the command ({reason:?}); retrying"),
        ),
        DispatchError::Invalid(reason) => ("InvalidCommand", reason.clone()),
        DispatchError::Kube(reason) => ("HubUnavailable", format!("session lookup failed: {reason}")),
    }
}
