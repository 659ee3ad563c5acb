//! The status router: every event an agent sends reaches the object it is about.
//!
//! The hub stamps each event with its session's cluster, and the router checks that the object
//! the event names lives on that very cluster, so an agent can only ever speak for its own
//! objects. The router writes only what the agent observed (`clusterPhase`, `observedRevision`,
//! components, drift, ...); the controllers derive phases, conditions and history from it,
//! so each status field has one writer. Objects are found by uid in reflector caches.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::StreamExt;
use k8s_openapi::api::core::v1::Namespace;
use kube::ResourceExt;
use kube::api::{Api, Patch, PatchParams};
use kube::runtime::reflector::{self, ObjectRef, Store};
use kube::runtime::{WatchStreamExt, watcher};
use kubenest_contracts::{self as wire, Envelope, Message};
use kubenest_crds::addon::{AddonDefinition, AddonInstance};
use kubenest_crds::app::App;
use kubenest_crds::cluster::Cluster;
use kubenest_crds::project::Project;
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};
use tokio::sync::{Notify, mpsc};
use tokio_util::sync::CancellationToken;

use crate::cluster::health;
use crate::history::DeploymentStatus;
use crate::intents::{Held, ObjectKey, Sent};
use crate::plane::Plane;
use crate::rfc3339;
use kubenest_crds::names::labels;

/// Caches of the objects events are about.
#[derive(Clone)]
pub struct Caches {
    pub apps: Store<App>,
    pub projects: Store<Project>,
    pub addons: Store<AddonInstance>,
    pub clusters: Store<Cluster>,
    /// Organization namespaces (labelled with their organization).
    pub namespaces: Store<Namespace>,
    pub definitions: Store<AddonDefinition>,
}

impl std::fmt::Debug for Caches {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Caches").finish_non_exhaustive()
    }
}

fn cache<K>(api: Api<K>, config: watcher::Config, shutdown: &CancellationToken) -> Store<K>
where
    K: kube::Resource<DynamicType = ()>
        + Clone
        + DeserializeOwned
        + std::fmt::Debug
        + Send
        + Sync
        + 'static,
{
    let (reader, writer) = reflector::store();
    let stream = reflector::reflector(writer, watcher(api, config))
        .default_backoff()
        .applied_objects();
    let shutdown = shutdown.clone();
    tokio::spawn(async move {
        let drain = stream.for_each(|_| async {});
        tokio::select! {
            _ = shutdown.cancelled() => {}
            _ = drain => {}
        }
    });
    reader
}

fn all() -> watcher::Config {
    watcher::Config::default()
}

/// The Apps cache, whose watch the App controller shares: one list and one watch of all Apps
/// for both. Every object the cache takes in is handed on to `apps` (unbounded, so the cache
/// fills even before the controller runs; what waits there is only pointers into the cache).
fn shared_apps(
    client: &kube::Client,
    shutdown: &CancellationToken,
) -> (Store<App>, mpsc::UnboundedReceiver<Arc<App>>) {
    let (reader, writer) = reflector::store_shared(1024);
    let mut subscriber = writer.subscribe();
    let (tx, rx) = mpsc::unbounded_channel();
    let stream = watcher(Api::<App>::all(client.clone()), all().any_semantic())
        .default_backoff()
        .reflect_shared(writer)
        .applied_objects();
    let shutdown = shutdown.clone();
    tokio::spawn(async move {
        let drain = stream.for_each(|_| async {});
        let forward = async {
            while let Some(app) = match subscriber.as_mut() {
                Some(s) => s.next().await,
                None => None,
            } {
                if tx.send(app).is_err() {
                    break;
                }
            }
        };
        tokio::select! {
            _ = shutdown.cancelled() => {}
            _ = drain => {}
            _ = forward => {}
        }
    });
    (reader, rx)
}

impl Caches {
    /// Starts the caches and waits until each has listed once. Also returns the stream of
    /// Apps for the App controller (sharing the Apps cache's watch).
    pub async fn start(
        client: &kube::Client,
        shutdown: &CancellationToken,
    ) -> (Self, mpsc::UnboundedReceiver<Arc<App>>) {
        let (apps, app_stream) = shared_apps(client, shutdown);
        let caches = Self {
            apps,
            projects: cache(Api::all(client.clone()), all(), shutdown),
            addons: cache(Api::all(client.clone()), all(), shutdown),
            clusters: cache(Api::all(client.clone()), all(), shutdown),
            namespaces: cache(
                Api::all(client.clone()),
                all().labels(labels::ORGANIZATION),
                shutdown,
            ),
            definitions: cache(Api::all(client.clone()), all(), shutdown),
        };
        let _ = tokio::join!(
            caches.apps.wait_until_ready(),
            caches.projects.wait_until_ready(),
            caches.addons.wait_until_ready(),
            caches.clusters.wait_until_ready(),
            caches.namespaces.wait_until_ready(),
            caches.definitions.wait_until_ready(),
        );
        (caches, app_stream)
    }

    /// The Apps of project `project` in `namespace`.
    pub fn apps_of(&self, namespace: &str, project: &str) -> Vec<ObjectRef<App>> {
        self.apps
            .state()
            .iter()
            .filter(|a| a.namespace().as_deref() == Some(namespace) && a.spec.project == project)
            .map(|a| ObjectRef::from_obj(&**a))
            .collect()
    }

    /// The AddonInstances of project `project` in `namespace`.
    pub fn addons_of(&self, namespace: &str, project: &str) -> Vec<ObjectRef<AddonInstance>> {
        self.addons
            .state()
            .iter()
            .filter(|a| a.namespace().as_deref() == Some(namespace) && a.spec.project == project)
            .map(|a| ObjectRef::from_obj(&**a))
            .collect()
    }

    /// The Projects on Cluster `cluster` in `namespace`.
    pub fn projects_on(&self, namespace: &str, cluster: &str) -> Vec<ObjectRef<Project>> {
        self.projects
            .state()
            .iter()
            .filter(|p| p.namespace().as_deref() == Some(namespace) && p.spec.cluster == cluster)
            .map(|p| ObjectRef::from_obj(&**p))
            .collect()
    }

    /// The id of the cluster that project `project` in `namespace` lives on.
    fn cluster_of_project(&self, namespace: &str, project: &str) -> Option<String> {
        let project = self
            .projects
            .get(&ObjectRef::new(project).within(namespace))?;
        self.cluster_of(namespace, &project.spec.cluster)
    }

    fn cluster_of(&self, namespace: &str, cluster: &str) -> Option<String> {
        self.clusters
            .get(&ObjectRef::new(cluster).within(namespace))?
            .status
            .as_ref()?
            .cluster_id
            .clone()
    }

    /// The App with uid `uid`, if it lives on cluster `cluster_id`.
    pub fn app_on(&self, cluster_id: &str, uid: &str) -> Option<Arc<App>> {
        let app = self.apps.find(|a| a.uid().as_deref() == Some(uid))?;
        let namespace = app.namespace()?;
        (self.cluster_of_project(&namespace, &app.spec.project)? == cluster_id).then_some(app)
    }

    /// The Apps on cluster `cluster_id`.
    pub fn apps_on(&self, cluster_id: &str) -> Vec<Arc<App>> {
        self.apps
            .state()
            .into_iter()
            .filter(|app| {
                app.namespace()
                    .and_then(|ns| self.cluster_of_project(&ns, &app.spec.project))
                    .as_deref()
                    == Some(cluster_id)
            })
            .collect()
    }

    fn project_on(&self, cluster_id: &str, uid: &str) -> Option<Arc<Project>> {
        let project = self.projects.find(|p| p.uid().as_deref() == Some(uid))?;
        (self.cluster_of(&project.namespace()?, &project.spec.cluster)? == cluster_id)
            .then_some(project)
    }

    fn addon_on(&self, cluster_id: &str, uid: &str) -> Option<Arc<AddonInstance>> {
        let addon = self.addons.find(|a| a.uid().as_deref() == Some(uid))?;
        let namespace = addon.namespace()?;
        (self.cluster_of_project(&namespace, &addon.spec.project)? == cluster_id).then_some(addon)
    }

    /// The Cluster whose id is `cluster_id`.
    pub fn cluster(&self, cluster_id: &str) -> Option<Arc<Cluster>> {
        self.clusters
            .find(|c| c.uid().as_deref() == Some(cluster_id))
    }
}

async fn patch_status<K>(
    client: &kube::Client,
    object: &K,
    status: Value,
) -> Result<(), kube::Error>
where
    K: kube::Resource<DynamicType = (), Scope = k8s_openapi::NamespaceResourceScope>
        + Clone
        + DeserializeOwned
        + Serialize
        + std::fmt::Debug,
{
    let Some(namespace) = object.meta().namespace.as_deref() else {
        return Ok(());
    };
    let name = object.meta().name.clone().unwrap_or_default();
    Api::<K>::namespaced(client.clone(), namespace)
        .patch_status(
            &name,
            &PatchParams::default(),
            &Patch::Merge(&json!({ "status": status })),
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

/// How long an agent's acceptance of an `app.deploy` waits for a status of the same App, to be
/// written with it. The agent reports the App right after applying it, a few milliseconds after
/// accepting; written together, that is one App write (and one reconcile) instead of two. Only
/// the controllers' re-send timer reads the acceptance, and it runs for seconds.
const ACCEPTANCE_WAIT: Duration = Duration::from_millis(100);

/// An acceptance of `app.deploy` not written yet.
#[derive(Debug)]
struct Waiting {
    app: Arc<App>,
    revision: String,
    /// When it is written alone if no status has taken it.
    due: Instant,
}

/// Acceptances of `app.deploy` not written yet, by App uid. One sweeper
/// ([`Router::sweep_acceptances`]) writes those no status took in time.
#[derive(Debug, Default)]
struct Acceptances {
    waiting: Mutex<HashMap<String, Waiting>>,
    added: Notify,
}

impl Acceptances {
    fn waiting(&self) -> std::sync::MutexGuard<'_, HashMap<String, Waiting>> {
        self.waiting.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Notes that the agent accepted `revision` of `app` at `now` (replacing an older one
    /// waiting).
    fn add(&self, uid: &str, app: Arc<App>, revision: &str, now: Instant) {
        let waiting = Waiting {
            app,
            revision: revision.to_owned(),
            due: now + ACCEPTANCE_WAIT,
        };
        self.waiting().insert(uid.to_owned(), waiting);
        self.added.notify_one();
    }

    /// Takes the acceptance waiting for App `uid`, to be written with its status.
    fn ride(&self, uid: &str) -> Option<String> {
        self.waiting().remove(uid).map(|w| w.revision)
    }

    /// Takes the acceptances due at `now`, and tells when the next one is due.
    fn due(&self, now: Instant) -> (Vec<(Arc<App>, String)>, Option<Instant>) {
        let mut waiting = self.waiting();
        let due: Vec<String> = waiting
            .iter()
            .filter(|(_, w)| w.due <= now)
            .map(|(uid, _)| uid.clone())
            .collect();
        let taken = due
            .iter()
            .filter_map(|uid| waiting.remove(uid))
            .map(|w| (w.app, w.revision))
            .collect();
        (taken, waiting.values().map(|w| w.due).min())
    }
}

/// Writes an acceptance alone. If that fails, the controllers re-send the command and the
/// agent accepts it again.
async fn record_acceptance(client: &kube::Client, app: &App, revision: String) {
    if let Err(error) = patch_status(client, app, json!({ "acceptedRevision": revision })).await {
        tracing::warn!(app = %app.name_any(), %error, "acceptance not recorded");
    }
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
        tokio::spawn(router.clone().sweep_acceptances(stop));
        let lanes: Vec<mpsc::Sender<Envelope>> = (0..LANES)
            .map(|_| {
                let (lane, mut events) = mpsc::channel::<Envelope>(LANE_DEPTH);
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
                Some(cluster) => health::record_heartbeat_of(client, &cluster, &heartbeat).await,
                None => {
                    tracing::info!(%cluster_id, "heartbeat from an unknown cluster ignored");
                    Ok(())
                }
            },
            Message::AppStatus(status) => self.app_status(cluster_id, status).await,
            Message::DriftReport(report) => self.drift(cluster_id, report).await,
            Message::ProjectStatus(status) => {
                let Some(project) = self
                    .caches
                    .project_on(cluster_id, status.project_id.as_str())
                else {
                    return self.stray(cluster_id, "project.status");
                };
                patch_status(
                    client,
                    &*project,
                    json!({
                        "clusterPhase": phase_name(&status.phase),
                        "clusterMessage": status.message,
                        "observedAt": rfc3339(status.observed_at),
                    }),
                )
                .await
            }
            Message::AddonStatus(status) => {
                let Some(addon) = self.caches.addon_on(cluster_id, status.addon_id.as_str()) else {
                    return self.stray(cluster_id, "addon.status");
                };
                patch_status(
                    client,
                    &*addon,
                    json!({
                        "observedRevision": status.observed_revision,
                        "clusterPhase": phase_name(&status.phase),
                        "message": status.message,
                        "exportSecret": status.export.as_ref().map(|e| e.secret.as_str()),
                        "gitCommit": status.git_commit,
                    }),
                )
                .await
            }
            Message::CommandAccepted(accepted) => {
                self.answered(cluster_id, accepted.command_id, None).await
            }
            Message::CommandRejected(rejected) => {
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
        let current = app.status.clone().unwrap_or_default();
        if current
            .observed_sequence
            .is_some_and(|seen| seen >= status.sequence)
        {
            return Ok(()); // older than what is recorded
        }
        let components: Vec<Value> = status
            .components
            .iter()
            .map(|c| {
                json!({
                    "name": c.name.as_str(),
                    "readyReplicas": c.ready_replicas,
                    "desiredReplicas": c.desired_replicas,
                    "ready": c.ready,
                    "message": c.message,
                })
            })
            .collect();
        // What the agent says is wrong, e.g. a StackDeploy outside its project's namespace.
        let failing: Vec<String> = status
            .conditions
            .iter()
            .filter(|c| c.status == wire::ConditionStatus::False)
            .map(|c| format!("{}: {}", c.reason, c.message))
            .collect();
        let message = (!failing.is_empty()).then(|| failing.join("; "));
        let mut patch = json!({
            "observedRevision": status.observed_revision,
            "clusterPhase": phase_name(&status.phase),
            "clusterMessage": message,
            "components": components,
            "ingressAddress": status.ingress_address,
            "observedAt": rfc3339(status.observed_at),
            "observedSequence": status.sequence,
        });
        let accepted = self.acceptances.ride(status.app_id.as_str());
        if let Some(revision) = &accepted {
            patch["acceptedRevision"] = json!(revision);
        }
        let written = patch_status(&self.plane.client, &*app, patch).await;
        if written.is_err()
            && let Some(revision) = accepted
        {
            // The acceptance is not lost with the status: it is written alone. The error
            // returned stays the status write's.
            record_acceptance(&self.plane.client, &app, revision).await;
        }
        written
    }

    /// Records the agent's acceptance of `revision` of `app`: with the App's next status if it
    /// comes within [`ACCEPTANCE_WAIT`], else alone.
    fn accepted(&self, app: Arc<App>, revision: String) {
        let Some(uid) = app.uid() else { return };
        self.acceptances.add(&uid, app, &revision, Instant::now());
    }

    /// Writes the acceptances no status took in time, until `stop`.
    async fn sweep_acceptances(self: Arc<Self>, stop: CancellationToken) {
        let acceptances = self.acceptances.clone();
        let client = self.plane.client.clone();
        drop(self);
        while !stop.is_cancelled() {
            let (due, next) = acceptances.due(Instant::now());
            futures::stream::iter(due)
                .for_each_concurrent(LANES, |(app, revision)| {
                    let client = &client;
                    async move { record_acceptance(client, &app, revision).await }
                })
                .await;
            let next = async {
                match next {
                    Some(next) => tokio::time::sleep_until(next.into()).await,
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                () = stop.cancelled() => {}
                () = next => {}
                () = acceptances.added.notified() => {}
            }
        }
    }

    async fn drift(&self, cluster_id: &str, report: wire::DriftReport) -> Result<(), kube::Error> {
        let Some(app) = self.caches.app_on(cluster_id, report.app_id.as_str()) else {
            return self.stray(cluster_id, "drift.report");
        };
        let text = |v: &Value| v.as_str().map_or_else(|| v.to_string(), str::to_owned);
        let details: Vec<Value> = report
            .details
            .iter()
            .map(|d| {
                json!({
                    "resource": d.resource,
                    "field": d.field,
                    "desired": text(&d.desired),
                    "observed": text(&d.observed),
                    "manager": d.manager,
                })
            })
            .collect();
        let blocked = report.class == wire::DriftClass::BlockedSync;
        let detected = blocked || !details.is_empty();
        let sync = json!({
            "driftDetected": detected,
            "driftClass": detected.then(|| phase_name(&report.class)),
            "driftDetails": details,
        });
        patch_status(&self.plane.client, &*app, json!({ "sync": sync })).await
    }

    /// The agent's answer to a command this process sent.
    async fn answered(
        &self,
        cluster_id: &str,
        command_id: uuid::Uuid,
        rejected: Option<wire::CommandRejected>,
    ) -> Result<(), kube::Error> {
        let Some(sent) = self.plane.intents.command(command_id) else {
            return Ok(()); // sent by another replica, or long ago
        };
        let client = &self.plane.client;
        let app = |key: &ObjectKey| self.caches.app_on(cluster_id, &key.uid);
        let rejection = rejected.as_ref().map(|r| {
            json!({
                "reason": phase_name(&r.reason),
                "message": r.message,
                "field": r.field,
            })
        });
        match (sent, rejection) {
            (Sent::AppDeploy { app: key, revision }, None) => {
                if let Some(app) = app(&key) {
                    self.accepted(app, revision);
                }
            }
            (Sent::AppDeploy { app: key, revision }, Some(mut rejection)) => {
                if let Some(app) = app(&key) {
                    rejection["revision"] = json!(revision);
                    patch_status(client, &*app, json!({ "rejection": rejection })).await?;
                }
            }
            (
                Sent::AppRedeploy {
                    app: key,
                    token,
                    deployment,
                    org,
                },
                rejection,
            ) => {
                if let Some(app) = app(&key) {
                    let (outcome, message) = match &rejection {
                        None => (
                            DeploymentStatus::Succeeded,
                            "the agent restarted the workloads".to_owned(),
                        ),
                        Some(r) => (
                            DeploymentStatus::Failed,
                            format!("the agent refused the redeploy: {r}"),
                        ),
                    };
                    if let Err(error) = self
                        .plane
                        .history
                        .finish_deployment(&org, deployment, outcome, &message)
                        .await
                    {
                        tracing::debug!(%error, "redeploy outcome not recorded");
                    }
                    patch_status(client, &*app, json!({ "handledRedeploy": token })).await?;
                }
            }
            (
                Sent::ProjectEnsure {
                    project: key,
                    generation,
                },
                rejection,
            ) => {
                if let Some(project) = self.caches.project_on(cluster_id, &key.uid) {
                    let patch = match rejection {
                        None => json!({ "ensuredGeneration": generation }),
                        Some(r) => {
                            json!({ "clusterPhase": "Failed", "clusterMessage": r["message"] })
                        }
                    };
                    patch_status(client, &*project, patch).await?;
                }
            }
            (
                Sent::AddonApply {
                    addon: key,
                    revision,
                },
                Some(r),
            ) => {
                if let Some(addon) = self.caches.addon_on(cluster_id, &key.uid) {
                    let message = format!(
                        "{}: {}",
                        r["reason"].as_str().unwrap_or_default(),
                        r["message"].as_str().unwrap_or_default()
                    );
                    patch_status(client, &*addon, json!({
                        "observedRevision": revision, "clusterPhase": "Failed", "message": message,
                    }))
                    .await?;
                }
            }
            (sent, Some(r)) => tracing::warn!(?sent, rejection = %r, "the agent refused a command"),
            (_, None) => {}
        }
        Ok(())
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

/// Asks every connected agent for a fresh snapshot and every status each time the hub client
/// (re)connects — including its first connection: a replica that has just taken over heard
/// nothing agents reported while no replica led, and must not wait for the next change to
/// learn it. Clusters are known only once the caches have been filled.
pub async fn resync_on_reconnect(plane: Arc<Plane>, caches: Caches, shutdown: CancellationToken) {
    let mut connections = plane.hub.connections();
    tokio::select! {
        _ = shutdown.cancelled() => return,
        ready = async {
            caches.clusters.wait_until_ready().await?;
            caches.namespaces.wait_until_ready().await
        } => if ready.is_err() { return },
    }
    // Connections made before the caches were ready count as the first one.
    let mut first = *connections.borrow_and_update() > 0;
    loop {
        if !std::mem::take(&mut first) {
            tokio::select! {
                _ = shutdown.cancelled() => return,
                changed = connections.changed() => if changed.is_err() { return },
            }
        }
        // Let the replica's session settle before asking through it.
        tokio::time::sleep(std::time::Duration::from_millis(500)).await;
        for cluster in caches.clusters.state() {
            let Some(cluster_id) = cluster.status.as_ref().and_then(|s| s.cluster_id.clone())
            else {
                continue;
            };
            let Some(namespace) = cluster.namespace() else {
                continue;
            };
            let Some(org) = crate::placement::org_in(&caches, &namespace) else {
                continue;
            };
            let request = Envelope::new(wire::ResyncRequest {
                reason: "controllers reconnected".into(),
            })
            .for_cluster(wire::Id::new(&cluster_id), wire::Id::new(&org));
            if let Err(error) = plane.hub.dispatch(request).await {
                tracing::debug!(%cluster_id, %error, "resync.request not routed");
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn app(name: &str) -> Arc<App> {
        Arc::new(App::new(
            name,
            kubenest_crds::app::AppSpec {
                project: "web".into(),
                components: vec![],
                progress_deadline_seconds: 600,
                paused: false,
            },
        ))
    }

    fn names(due: &[(Arc<App>, String)]) -> Vec<(String, &str)> {
        due.iter()
            .map(|(app, revision)| (app.name_any(), revision.as_str()))
            .collect()
    }

    #[test]
    fn an_acceptance_is_taken_once_by_a_status_or_by_the_sweeper_when_due() {
        let acceptances = Acceptances::default();
        let t0 = Instant::now();
        acceptances.add("a", app("a"), "r1", t0);
        assert_eq!(acceptances.ride("a").as_deref(), Some("r1"));
        let (due, next) = acceptances.due(t0 + ACCEPTANCE_WAIT);
        assert!(due.is_empty(), "the status wrote it");
        assert_eq!(next, None);

        acceptances.add("a", app("a"), "r1", t0);
        let (due, next) = acceptances.due(t0 + ACCEPTANCE_WAIT / 2);
        assert!(due.is_empty(), "not due yet");
        assert_eq!(next, Some(t0 + ACCEPTANCE_WAIT));
        let (due, _) = acceptances.due(t0 + ACCEPTANCE_WAIT);
        assert_eq!(names(&due), [("a".to_owned(), "r1")]);
        assert_eq!(acceptances.ride("a"), None, "the sweeper wrote it");
    }

    #[test]
    fn a_later_revision_replaces_the_acceptance_waiting() {
        let acceptances = Acceptances::default();
        let t0 = Instant::now();
        acceptances.add("a", app("a"), "r1", t0);
        acceptances.add("b", app("b"), "r1", t0 + ACCEPTANCE_WAIT);
        acceptances.add("a", app("a"), "r2", t0 + ACCEPTANCE_WAIT / 2);
        let (due, next) = acceptances.due(t0 + ACCEPTANCE_WAIT);
        assert!(due.is_empty(), "r2 replaced r1 and is due later");
        assert_eq!(next, Some(t0 + ACCEPTANCE_WAIT * 3 / 2));
        let (due, next) = acceptances.due(t0 + ACCEPTANCE_WAIT * 3 / 2);
        assert_eq!(names(&due), [("a".to_owned(), "r2")]);
        assert_eq!(next, Some(t0 + ACCEPTANCE_WAIT * 2));
        assert_eq!(acceptances.ride("b").as_deref(), Some("r1"));
    }
}
