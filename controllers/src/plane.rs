//! The one context of the management plane's controllers: what every reconciler shares (the
//! API client, the history store, the hub client, the signing key, the caches and the work in
//! flight).

use kubenest_runtime::events::EventSink;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::runtime::reflector::ObjectRef;
use kubenest_contracts::{Envelope, Id, Message, TokenSigner};
use kubenest_crds::addon::AddonDefinition;
use kubenest_crds::app::App;
use tokio::sync::mpsc;

use crate::caches::Caches;
use crate::intents::{Intents, Sent};
use crate::placement::Placement;
use kubenest_hub_client::{DispatchError, HubClient};
use kubenest_store::History;

/// Shared by every controller (Organization, Cluster, Project, App, AddonInstance) and the
/// status router.
pub struct Plane {
    pub client: kube::Client,
    pub history: History,
    pub hub: HubClient,
    /// Mints the clusters' tokens (the Cluster controller).
    pub signer: Arc<TokenSigner>,
    pub intents: Intents,
    /// Where global AddonDefinitions and StackTemplates live.
    pub system_namespace: String,
    /// The objects placements and lookups read (kept current by watches).
    pub caches: Caches,
    /// Asks the App controller to reconcile an App now (e.g. a snapshot says it differs).
    pub app_triggers: mpsc::Sender<ObjectRef<App>>,
    /// Where the controllers' Kubernetes Events go.
    pub events: EventSink,
    /// The Apps as this process last wrote them, newer than the cache until it catches up.
    pub apps_written: crate::newest::Newest<App>,
}

impl std::fmt::Debug for Plane {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Plane")
            .field("system_namespace", &self.system_namespace)
            .finish_non_exhaustive()
    }
}

impl Plane {
    /// AddonDefinition `name`, from `namespace` or else the system namespace (the catalog).
    pub fn addon_definition(&self, namespace: &str, name: &str) -> Option<Arc<AddonDefinition>> {
        [namespace, self.system_namespace.as_str()]
            .into_iter()
            .find_map(|ns| {
                self.caches
                    .definitions
                    .get(&ObjectRef::new(name).within(ns))
            })
    }

    /// Sends a command to the placement's cluster, remembering what it was for. Succeeds on the
    /// hub's route acknowledgement, which proves routing only.
    pub async fn send(
        &self,
        placement: &Placement,
        payload: impl Into<Message>,
        what: Sent,
    ) -> Result<(), DispatchError> {
        let envelope = Envelope::new(payload)
            .for_cluster(Id::new(&placement.cluster_id), Id::new(&placement.org_id))
            .traced(kubenest_runtime::traces::current_traceparent());
        let r#type = envelope.message_type().as_str();
        let resend = self.intents.unsettled(what.uid());
        // The command id ties this line (and the reconcile span's revision) to the hub's and
        // the agent's lines about the same command.
        tracing::info!(command_id = %envelope.id, kind = r#type, resend, "command sent");
        self.intents.sent(envelope.id, what);
        let metrics = crate::metrics::metrics();
        metrics.sent(r#type, resend);
        let routed = self.hub.dispatch(envelope).await;
        metrics.routed(r#type, routed.as_ref().err().map(|e| unrouted(e).0));
        routed
    }
}

/// What an attempt to send an object's command came to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Attempt {
    /// Why the object waits now (reason, message): the send's outcome, or when no send was due,
    /// what the previous attempt recorded.
    pub waiting: Option<(String, String)>,
    /// When to try again.
    pub retry: Duration,
}

impl Attempt {
    /// [`Attempt::waiting`], or a plain "waiting for the agent" when nothing is recorded.
    pub fn waiting_or_default(&self) -> (String, String) {
        self.waiting.clone().unwrap_or_else(|| {
            (
                "AwaitingAgent".to_owned(),
                "waiting for the agent".to_owned(),
            )
        })
    }
}

impl Plane {
    /// Sends the command of object `uid` when its backoff has run out, else leaves it for the
    /// next attempt. `routed` is the message once the hub routed it; `previous` is the condition
    /// in which the last attempt was recorded.
    pub async fn attempt(
        &self,
        uid: &str,
        placement: &Placement,
        command: impl Into<Message>,
        sent: Sent,
        routed: String,
        previous: Option<&Condition>,
    ) -> Attempt {
        if !self.intents.due(uid) {
            return Attempt {
                waiting: previous.map(|c| (c.reason.clone(), c.message.clone())),
                retry: self.intents.until_due(uid),
            };
        }
        let waiting = match self.send(placement, command, sent).await {
            Ok(()) => ("AwaitingAgent".to_owned(), routed),
            Err(error) => {
                tracing::debug!(%error, "command not routed");
                let (reason, message) = unrouted(&error);
                (reason.to_owned(), message)
            }
        };
        Attempt {
            waiting: Some(waiting),
            retry: self.intents.backoff(uid),
        }
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
