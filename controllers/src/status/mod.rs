//! The status router: every event an agent sends reaches the object it is about.
//!
//! The hub stamps each event with its session's cluster, and the router checks that the object
//! the event names lives on that very cluster, so an agent can only ever speak for its own
//! objects. The router writes only what the agent observed (`clusterPhase`, `observedRevision`,
//! components, drift, ...); the controllers derive phases, conditions and history from it,
//! so each status field has one writer. Objects are found by uid in reflector caches.

mod acceptances;
mod answers;
mod verdicts;

use std::sync::Arc;

use kube::ResourceExt;
use kube::api::Api;
use kube::runtime::reflector::ObjectRef;
use kubenest_contracts::{self as wire, Envelope, Message};
use kubenest_crds::app::{ComponentStatus, DriftDetail};
use kubenest_crds::observed::{
    AddonObserved, AppDrift, AppObserved, ObservedSync, ProjectObserved,
};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use crate::caches::Caches;
use crate::cluster::health;
use crate::intents::Held;
use crate::patch::merge_status;
use crate::plane::Plane;
use crate::rfc3339;
use acceptances::{Acceptances, record_acceptance};

/// Merge-patches `status` (the fields the router owns, see [`kubenest_crds::observed`]) into
/// the object's status.
async fn patch_status<K, S>(
    client: &kube::Client,
    object: &K,
    status: &S,
) -> Result<(), kube::Error>
where
    K: kube::Resource<DynamicType = (), Scope = k8s_openapi::NamespaceResourceScope>
        + Clone
        + DeserializeOwned
        + Serialize
        + std::fmt::Debug,
    S: Serialize + std::fmt::Debug,
{
    let Some(namespace) = object.meta().namespace.as_deref() else {
        return Ok(());
    };
    let name = object.meta().name.clone().unwrap_or_default();
    merge_status(
        &Api::<K>::namespaced(client.clone(), namespace),
        &name,
        status,
    )
    .await?;
    Ok(())
}

fn phase_name<T: Serialize>(phase: &T) -> String {
    serde_json::to_value(phase)
        .ok()
        .and_then(|v| v.as_str().map(str::to_owned))
        .unwrap_or_default()
}

/// Status events written to the management cluster at once.
const LANES: usize = 16;
/// Events waiting in one lane before the router waits for it.
const LANE_DEPTH: usize = 256;

/// The lane of an event: by the object it is about, so one object's events stay in order.
fn lane_of(envelope: &Envelope) -> usize {
    use std::hash::{Hash, Hasher};
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    match &envelope.message {
        Message::AppStatus(status) => status.app_id.as_str().hash(&mut hasher),
        Message::DriftReport(report) => report.app_id.as_str().hash(&mut hasher),
        Message::VerificationResult(result) => result.app_id.as_str().hash(&mut hasher),
        Message::ProjectStatus(status) => status.project_id.as_str().hash(&mut hasher),
        Message::AddonStatus(status) => status.addon_id.as_str().hash(&mut hasher),
        Message::CommandAccepted(accepted) => accepted.command_id.hash(&mut hasher),
        Message::CommandRejected(rejected) => rejected.command_id.hash(&mut hasher),
        _ => envelope
            .cluster_id
            .as_ref()
            .map(|c| c.as_str())
            .hash(&mut hasher),
    }
    usize::try_from(hasher.finish()).unwrap_or(0)
}

/// Routes status events to their objects.
pub struct Router {
    plane: Arc<Plane>,
    caches: Caches,
    acceptances: Arc<Acceptances>,
}

impl std::fmt::Debug for Router {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Router").finish_non_exhaustive()
    }
}

impl Router {
    pub fn new(plane: Arc<Plane>, caches: Caches) -> Self {
        Self {
            plane,
            caches,
            acceptances: Arc::default(),
        }
    }

    /// Consumes status events until the channel closes. Each event is a write to the
    /// management cluster; they are written [`LANES`] at a time, the events about one object
    /// always in the same lane, so they are recorded in the order the agent sent them.
    pub async fn run(self, mut statuses: mpsc::Receiver<Envelope>) {
        let router = Arc::new(self);
        let stop = CancellationToken::new();
        let _stop_sweeping = stop.clone().drop_guard();
        tokio::spawn(acceptances::sweep(
            router.acceptances.clone(),
            router.plane.client.clone(),
            stop,
        ));
        let lanes: Vec<mpsc::Sender<Envelope>> = (0..LANES)
            .map(|_| {
                let (lane, mut events) = mpsc::channel::<Envelope>(LANE_DEPTH);
                crate::metrics::metrics().watch_queue("status_events", &lane);
                let router = router.clone();
                tokio::spawn(async move {
                    while let Some(envelope) = events.recv().await {
                        router.record(envelope).await;
                    }
                });
                lane
            })
            .collect();
        while let Some(envelope) = statuses.recv().await {
            let lane = lane_of(&envelope) % LANES;
            if lanes[lane].send(envelope).await.is_err() {
                return;
            }
        }
    }

    async fn record(&self, envelope: Envelope) {
        // The hub guarantees an agent speaks only for its own cluster, so cluster_id is trusted.
        let Some(cluster_id) = envelope.cluster_id.clone() else {
            return;
        };
        let kind = envelope.message.message_type();
        if let Err(error) = self.handle(cluster_id.as_str(), envelope.message).await {
            tracing::warn!(%cluster_id, %kind, %error, "status event could not be recorded");
        }
    }

    async fn handle(&self, cluster_id: &str, message: Message) -> Result<(), kube::Error> {
        let client = &self.plane.client;
        match message {
            Message::Heartbeat(heartbeat) => match self.caches.cluster(cluster_id) {
                Some(cluster) => {
                    health::record_heartbeat_of(client, &self.plane.events, &cluster, &heartbeat)
                        .await
                }
                None => {
                    tracing::info!(%cluster_id, "heartbeat from an unknown cluster ignored");
                    Ok(())
                }
            },
            Message::AppStatus(status) => self.app_status(cluster_id, status).await,
            Message::DriftReport(report) => self.drift(cluster_id, report).await,
            Message::VerificationResult(result) => self.verified(cluster_id, result).await,
            Message::ProjectStatus(status) => {
                let Some(project) = self
                    .caches
                    .project_on(cluster_id, status.project_id.as_str())
                else {
                    return self.stray(cluster_id, "project.status");
                };
                let observed = ProjectObserved {
                    cluster_phase: phase_name(&status.phase),
                    cluster_message: status.message,
                    observed_at: rfc3339(status.observed_at),
                    usage: ProjectObserved::usage_patch(&status.usage),
                    healed: status.healed,
                };
                patch_status(client, &*project, &observed).await
            }
            Message::AddonStatus(status) => {
                let Some(addon) = self.caches.addon_on(cluster_id, status.addon_id.as_str()) else {
                    return self.stray(cluster_id, "addon.status");
                };
                let observed = AddonObserved {
                    observed_revision: status.observed_revision,
                    cluster_phase: phase_name(&status.phase),
                    message: status.message,
                    export_secret: status.export.map(|e| e.secret.as_str().to_owned()),
                    git_commit: status.git_commit,
                    gitops_error: status.gitops_error,
                    sync: ObservedSync {
                        drift_detected: !status.drift.is_empty(),
                        drift_class: (!status.drift.is_empty()).then(|| "recoverable".into()),
                        drift_details: status.drift.iter().map(drift_detail).collect(),
                    },
                };
                // Told once per report, as `kubectl describe addoninstance` shows it: the agent
                // applied it back already, and its next report clears `sync`.
                self.plane
                    .events
                    .emit(&*addon, status.drift.iter().map(drift_event));
                patch_status(client, &*addon, &observed).await
            }
            Message::CommandAccepted(accepted) => {
                crate::metrics::metrics().answered("accepted");
                self.answered(cluster_id, accepted.command_id, None).await
            }
            Message::CommandRejected(rejected) => {
                crate::metrics::metrics().answered("rejected");
                let command_id = rejected.command_id;
                self.answered(cluster_id, command_id, Some(rejected)).await
            }
            Message::Snapshot(snapshot) => {
                self.snapshot(cluster_id, &snapshot);
                Ok(())
            }
            Message::Hello(hello) => {
                tracing::info!(%cluster_id, agent = %hello.agent_version, kubernetes = %hello.kubernetes_version, "agent connected");
                Ok(())
            }
            other => {
                tracing::debug!(%cluster_id, kind = %other.message_type(), "status event not routed");
                Ok(())
            }
        }
    }

    fn stray(&self, cluster_id: &str, kind: &str) -> Result<(), kube::Error> {
        tracing::info!(%cluster_id, kind, "event about an object that is not on this cluster ignored");
        Ok(())
    }

    async fn app_status(
        &self,
        cluster_id: &str,
        status: wire::AppStatus,
    ) -> Result<(), kube::Error> {
        let Some(app) = self.caches.app_on(cluster_id, status.app_id.as_str()) else {
            return self.stray(cluster_id, "app.status");
        };
        let app = self.plane.apps_written.of(app);
        let current = app.status.clone().unwrap_or_default();
        if current
            .observed_sequence
            .is_some_and(|seen| seen >= status.sequence)
        {
            return Ok(()); // older than what is recorded
        }
        let components = status
            .components
            .iter()
            .map(|c| ComponentStatus {
                name: c.name.as_str().to_owned(),
                ready_replicas: c.ready_replicas,
                desired_replicas: c.desired_replicas,
                ready: c.ready,
                message: c.message.clone(),
            })
            .collect();
        // What the agent says is wrong, e.g. a StackDeploy outside its project's namespace; a
        // GitOps record it could not write is said apart, since the App runs regardless.
        let (records, failing): (Vec<&wire::Condition>, Vec<&wire::Condition>) = status
            .conditions
            .iter()
            .filter(|c| c.status == wire::ConditionStatus::False)
            .partition(|c| c.type_ == kubenest_crds::names::conditions::GITOPS_RECORDED);
        let failing: Vec<String> = failing
            .iter()
            .map(|c| format!("{}: {}", c.reason, c.message))
            .collect();
        let gitops_error = records.first().map(|c| c.message.clone());
        let message = (!failing.is_empty()).then(|| failing.join("; "));
        let accepted = self.acceptances.ride(status.app_id.as_str());
        let observed = AppObserved {
            observed_revision: status.observed_revision,
            cluster_phase: phase_name(&status.phase),
            cluster_message: message,
            components,
            ingress_address: status.ingress_address,
            observed_at: rfc3339(status.observed_at),
            observed_sequence: status.sequence,
            gitops_error,
            accepted_revision: accepted.clone(),
        };
        let namespace = app.namespace().unwrap_or_default();
        let written = merge_status(
            &Api::<kubenest_crds::app::App>::namespaced(self.plane.client.clone(), &namespace),
            &app.name_any(),
            &observed,
        )
        .await
        .map(|written| self.plane.apps_written.wrote(written));
        if written.is_err()
            && let Some(revision) = accepted
        {
            // The acceptance is not lost with the status: it is written alone. The error
            // returned stays the status write's.
            record_acceptance(&self.plane.client, &app, revision).await;
        }
        written
    }

    async fn drift(&self, cluster_id: &str, report: wire::DriftReport) -> Result<(), kube::Error> {
        let Some(app) = self.caches.app_on(cluster_id, report.app_id.as_str()) else {
            return self.stray(cluster_id, "drift.report");
        };
        let details: Vec<DriftDetail> = report.details.iter().map(drift_detail).collect();
        let blocked = report.class == wire::DriftClass::BlockedSync;
        let detected = blocked || !details.is_empty();
        let drift = AppDrift {
            sync: ObservedSync {
                drift_detected: detected,
                drift_class: detected.then(|| phase_name(&report.class)),
                drift_details: details,
            },
        };
        patch_status(&self.plane.client, &*app, &drift).await
    }

    /// Records what the cluster holds and has every App that differs reconciled (and re-sent).
    fn snapshot(&self, cluster_id: &str, snapshot: &wire::Snapshot) {
        for app in self.caches.apps_on(cluster_id) {
            let Some(uid) = app.uid() else { continue };
            let held = snapshot
                .stack_deploys
                .iter()
                .find(|e| e.app_id.as_str() == uid)
                .map_or(Held::Missing, |e| Held::At {
                    revision: e.revision.clone(),
                    checksum: e.checksum.clone(),
                });
            self.plane.intents.set_held(&uid, held);
            let _ = self.plane.app_triggers.try_send(ObjectRef::from_obj(&*app));
        }
        let known: std::collections::HashSet<String> = self
            .caches
            .apps
            .state()
            .iter()
            .filter_map(|a| a.uid())
            .collect();
        for orphan in snapshot
            .stack_deploys
            .iter()
            .filter(|e| !known.contains(e.app_id.as_str()))
        {
            tracing::warn!(%cluster_id, app_id = %orphan.app_id, "the cluster holds an App that no longer exists");
        }
    }
}

/// A drifted field as a status shows it: values as text (a string as it is, anything else as
/// JSON).
fn drift_detail(d: &wire::DriftDetail) -> DriftDetail {
    let text = |v: &Value| v.as_str().map_or_else(|| v.to_string(), str::to_owned);
    DriftDetail {
        resource: d.resource.clone(),
        field: d.field.clone(),
        desired: text(&d.desired),
        observed: text(&d.observed),
        manager: d.manager.clone(),
    }
}

/// The Event of a field another manager changed, which the agent applied back.
fn drift_event(d: &wire::DriftDetail) -> kubenest_runtime::events::Event {
    let d = drift_detail(d);
    let by = d.manager.map(|m| format!(" by {m}")).unwrap_or_default();
    kubenest_runtime::events::event(
        kubenest_runtime::events::EventType::Warning,
        kubenest_crds::names::reasons::DRIFT_DETECTED,
        format!(
            "{} {} changed on the cluster{by} (desired {}, found {}); applied back",
            d.resource, d.field, d.desired, d.observed
        ),
        "Drift",
    )
}
