//! Wires the whole management plane together: the hub client, the controllers, the status
//! router, the revocation floors and fleet health. [`run`] assumes leadership; the binary wraps
//! it in [`kubenest_runtime::leader::Election`].

use kubenest_runtime::events::EventSink;
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::coordination::v1::Lease;
use kube::ResourceExt;
use kube::api::Api;
use kubenest_contracts::TokenSigner;
use kubenest_crds::cluster::Cluster;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use crate::caches::Caches;
use crate::cluster::{self, health};
use crate::intents::Intents;
use crate::organization;
use crate::plane::Plane;
use crate::resync::resync_on_reconnect;
use crate::status::Router;
use crate::{addon, alerts, app, project, reach, template};
use kubenest_crds::names::labels;
use kubenest_hub_client::{DispatchError, HubClient, HubClientConfig};
use kubenest_store::History;

/// How often floors are recomputed and silent clusters looked for.
const FLOORS_EVERY: Duration = Duration::from_millis(500);
const HEALTH_EVERY: Duration = Duration::from_secs(2);

/// Everything the management plane needs.
pub struct Config {
    pub client: kube::Client,
    pub history: History,
    /// `ws(s)://host:port/v1/connect` of every hub replica.
    pub hub_urls: Vec<String>,
    /// Signs cluster tokens and the controllers' backend tokens.
    pub signer: Arc<TokenSigner>,
    /// Where the hub replicas keep their session Leases.
    pub session_namespace: String,
    /// Where global AddonDefinitions and StackTemplates live.
    pub system_namespace: String,
    /// A cluster silent for longer turns its checks `Unknown` with a critical condition.
    pub heartbeat_window: chrono::Duration,
}

impl std::fmt::Debug for Config {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Config")
            .field("hub_urls", &self.hub_urls)
            .field("session_namespace", &self.session_namespace)
            .field("system_namespace", &self.system_namespace)
            .finish_non_exhaustive()
    }
}

/// Runs every controller until `shutdown` is cancelled.
pub async fn run(config: Config, shutdown: CancellationToken) -> Result<(), DispatchError> {
    let client = config.client.clone();
    let sessions: Api<Lease> = Api::namespaced(client.clone(), &config.session_namespace);
    let (hub, statuses) = HubClient::start(
        HubClientConfig {
            urls: config.hub_urls.clone(),
            signer: config.signer.clone(),
            leases: sessions.clone(),
        },
        shutdown.child_token(),
    )?;
    let (triggers, trigger_rx) = mpsc::channel(4096);
    let (project_triggers, project_trigger_rx) = mpsc::channel(4096);
    let metrics = crate::metrics::metrics();
    metrics.lead_with(Some(hub.clone()));
    metrics.watch_queue("app_triggers", &triggers);
    metrics.watch_queue("project_triggers", &project_triggers);
    let (caches, app_stream) = Caches::start(&client, &shutdown).await;
    let plane = Arc::new(Plane {
        client: client.clone(),
        history: config.history.clone(),
        hub: hub.clone(),
        signer: config.signer.clone(),
        intents: Intents::default(),
        system_namespace: config.system_namespace.clone(),
        app_triggers: triggers,
        caches: caches.clone(),
        events: EventSink::start(
            client.clone(),
            kubenest_crds::names::field_managers::CONTROLLERS,
            metrics.events.clone(),
            shutdown.child_token(),
        ),
        apps_written: Default::default(),
    });
    let stop = || {
        let shutdown = shutdown.clone();
        async move { shutdown.cancelled().await }
    };
    // A reconcile that fails says so on its object, not only in this log.
    metrics.reconciles.tell_errors_to(plane.events.clone());
    let router = Router::new(plane.clone(), caches.clone());
    let follow = reach::follow(
        caches.clone(),
        plane.app_triggers.clone(),
        project_triggers,
        shutdown.clone(),
    );
    tokio::join!(
        organization::run(plane.clone(), stop()),
        cluster::run(plane.clone(), stop()),
        project::run(plane.clone(), project_trigger_rx, stop()),
        app::controller::run(plane.clone(), app_stream, trigger_rx, stop()),
        addon::run(plane.clone(), stop()),
        template::run(client.clone(), stop()),
        async {
            tokio::select! {
                _ = shutdown.cancelled() => {}
                _ = router.run(statuses) => {}
            }
        },
        resync_on_reconnect(plane.clone(), caches.clone(), shutdown.clone()),
        follow,
        alerts::run(
            client.clone(),
            caches.clone(),
            config.history.alerts(),
            shutdown.clone()
        ),
        push_floors(&hub, &caches, &shutdown),
        fleet_health(
            &client,
            &plane.events,
            &caches,
            &sessions,
            config.heartbeat_window,
            &shutdown
        ),
    );
    metrics.lead_with(None);
    Ok(())
}

/// Keeps every hub replica's revocation floors in step with the Clusters: a new cluster can
/// connect within a moment, and a raised token version cuts its old session at once.
async fn push_floors(hub: &HubClient, caches: &Caches, shutdown: &CancellationToken) {
    let mut pushed = None;
    loop {
        let clusters: Vec<Cluster> = caches
            .clusters
            .state()
            .iter()
            .map(|c| (**c).clone())
            .collect();
        let orgs: BTreeMap<String, String> = caches
            .namespaces
            .state()
            .iter()
            .filter_map(|ns| {
                Some((
                    ns.name_any(),
                    ns.labels().get(labels::ORGANIZATION)?.clone(),
                ))
            })
            .collect();
        let floors = cluster::floors(&clusters, &orgs);
        if pushed.as_ref() != Some(&floors) {
            hub.push_floors(floors.clone());
            pushed = Some(floors);
        }
        tokio::select! {
            _ = shutdown.cancelled() => return,
            _ = tokio::time::sleep(FLOORS_EVERY) => {}
        }
    }
}

/// Marks silent clusters (`Unknown` checks, critical condition) and clusters whose hub session
/// is gone (`disconnected`).
async fn fleet_health(
    client: &kube::Client,
    events: &EventSink,
    caches: &Caches,
    sessions: &Api<Lease>,
    window: chrono::Duration,
    shutdown: &CancellationToken,
) {
    loop {
        let now = chrono::Utc::now();
        let clusters = caches.clusters.state();
        if let Err(error) = health::sweep_clusters(client, events, &clusters, now, window).await {
            tracing::warn!(%error, "fleet health: sweep failed");
        }
        if let Err(error) = health::sweep_sessions(client, events, &clusters, sessions, now).await {
            tracing::warn!(%error, "fleet health: session sweep failed");
        }
        tokio::select! {
            _ = shutdown.cancelled() => return,
            _ = tokio::time::sleep(HEALTH_EVERY) => {}
        }
    }
}
