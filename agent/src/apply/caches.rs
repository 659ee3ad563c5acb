//! The agent's caches of the objects it manages, and how they are watched: one watch per kind
//! across the cluster, or, with namespaced powers ([`ProjectGrant`]), one per kind in each
//! project namespace, followed as project namespaces come and go.

use kubenest_crds::names::{field_managers, labels};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::{FutureExt as _, StreamExt};
use k8s_openapi::api::core::v1::Namespace;
use kube::api::{Api, DynamicObject, Patch, PatchParams};
use kube::discovery::ApiResource;
use kube::runtime::reflector::{self, Store};
use kube::runtime::{WatchStreamExt, watcher};
use serde_json::Value;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

/// The caches did not list within their minute at start.
#[derive(Debug)]
pub(super) struct NotReady;

/// Those told of every object a cache sees change.
type Listeners = Arc<Mutex<Vec<mpsc::UnboundedSender<DynamicObject>>>>;

/// The stores of one kind: one for the whole cluster (key `None`) when the agent's powers are
/// cluster-wide, else one per project namespace, each with the token that stops its watch.
type Stores = Arc<Mutex<BTreeMap<Option<String>, (Store<DynamicObject>, CancellationToken)>>>;

/// One rendered kind's caches and who listens to its changes.
pub(super) struct Cache {
    pub(super) resource: ApiResource,
    stores: Stores,
    pub(super) listeners: Listeners,
}

impl Cache {
    /// Every object the kind's stores hold now, across the namespaces watched.
    pub(super) fn all(&self) -> Vec<Arc<DynamicObject>> {
        self.stores
            .lock()
            .map(|stores| stores.values().flat_map(|(s, _)| s.state()).collect())
            .unwrap_or_default()
    }

    /// The store holding `namespace`'s objects, once it has listed them.
    pub(super) fn ready_store(&self, namespace: &str) -> Option<Store<DynamicObject>> {
        let stores = self.stores.lock().ok()?;
        let (store, _) = stores
            .get(&None)
            .or_else(|| stores.get(&Some(namespace.to_owned())))?;
        store
            .wait_until_ready()
            .now_or_never()
            .is_some()
            .then(|| store.clone())
    }
}

/// What the agent binds in each project namespace when its own powers are namespaced (the
/// chart's least-privilege install): its ServiceAccount gets `role` there, and it watches each
/// project namespace on its own instead of the whole cluster.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProjectGrant {
    /// The ClusterRole with the agent's powers inside a project namespace.
    pub role: String,
    /// The agent's ServiceAccount: (namespace, name).
    pub service_account: (String, String),
}

impl ProjectGrant {
    /// The RoleBinding that gives the agent its powers in `namespace` (pure).
    pub fn role_binding(&self, namespace: &str) -> Value {
        serde_json::json!({
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "RoleBinding",
            "metadata": {
                "name": PROJECT_BINDING,
                "namespace": namespace,
                "labels": {labels::MANAGED_BY: labels::MANAGED_BY_AGENT},
            },
            "roleRef": {
                "apiGroup": "rbac.authorization.k8s.io",
                "kind": "ClusterRole",
                "name": self.role,
            },
            "subjects": [{
                "kind": "ServiceAccount",
                "namespace": self.service_account.0,
                "name": self.service_account.1,
            }],
        })
    }
}

/// How often the project namespaces are followed even when none changed (a binding that
/// failed is tried again).
const FOLLOW_EVERY: Duration = Duration::from_secs(30);

/// The name of the agent's RoleBinding in each project namespace.
pub const PROJECT_BINDING: &str = "kubenest-agent";

/// Keeps `writer`'s store until `shutdown`, calling `changed` with each object applied or
/// deleted once the store holds the change.
fn run_reflector<K>(
    writer: reflector::store::Writer<K>,
    stream: impl futures::Stream<Item = Result<watcher::Event<K>, watcher::Error>> + Send + 'static,
    changed: impl Fn(K) + Send + Sync + 'static,
    shutdown: &CancellationToken,
) where
    K: kube::Resource + Clone + Send + Sync + 'static,
    K::DynamicType: std::hash::Hash + Eq + Clone + Send + Sync,
{
    let stream = reflector::reflector(writer, stream)
        .default_backoff()
        .touched_objects();
    let shutdown = shutdown.clone();
    tokio::spawn(async move {
        let drain = stream.for_each(|object| {
            if let Ok(object) = object {
                changed(object);
            }
            async {}
        });
        tokio::select! {
            _ = shutdown.cancelled() => {}
            _ = drain => {}
        }
    });
}

/// Starts the watch of one rendered kind in `namespace` (`None`: the whole cluster) into a
/// store of its own, its changes told to the kind's listeners.
fn watch_kind(
    client: &kube::Client,
    cache: &Cache,
    namespace: Option<&str>,
    shutdown: &CancellationToken,
) {
    let writer = reflector::store::Writer::new(cache.resource.clone());
    let store = writer.as_reader();
    let api: Api<DynamicObject> = match namespace {
        Some(ns) => Api::namespaced_with(client.clone(), ns, &cache.resource),
        None => Api::all_with(client.clone(), &cache.resource),
    };
    let config = watcher::Config::default()
        .labels(&format!(
            "{}={}",
            labels::MANAGED_BY,
            labels::MANAGED_BY_AGENT
        ))
        .any_semantic();
    let tell = cache.listeners.clone();
    let changed = move |object: DynamicObject| {
        if let Ok(mut listeners) = tell.lock() {
            listeners.retain(|l| l.send(object.clone()).is_ok());
        }
    };
    let stop = shutdown.child_token();
    run_reflector(writer, watcher(api, config), changed, &stop);
    if let Ok(mut stores) = cache.stores.lock() {
        stores.insert(namespace.map(str::to_owned), (store, stop));
    }
}

/// Project scope: binds the agent in every project namespace it has no watches in yet and
/// starts them there; stops the watches of namespaces that are gone. A namespace whose binding
/// fails gets no watches yet: the next pass (a namespace change, or the periodic one) tries
/// again.
async fn follow_projects(
    client: &kube::Client,
    caches: &BTreeMap<(String, String), Cache>,
    namespaces: &Store<Namespace>,
    grant: &ProjectGrant,
    shutdown: &CancellationToken,
) {
    let wanted: BTreeSet<String> = namespaces
        .state()
        .iter()
        .filter_map(|ns| ns.metadata.name.clone())
        .collect();
    let watched: BTreeSet<String> = caches
        .values()
        .next()
        .and_then(|cache| {
            cache
                .stores
                .lock()
                .ok()
                .map(|s| s.keys().flatten().cloned().collect())
        })
        .unwrap_or_default();
    for namespace in wanted.difference(&watched) {
        if let Err(error) = bind(client, grant, namespace).await {
            tracing::warn!(%namespace, %error, "cannot bind the agent's project role yet");
            continue;
        }
        for cache in caches.values() {
            watch_kind(client, cache, Some(namespace), shutdown);
        }
        tracing::info!(%namespace, "watching the project namespace");
    }
    for namespace in watched.difference(&wanted) {
        for cache in caches.values() {
            if let Some((_, stop)) = cache
                .stores
                .lock()
                .ok()
                .and_then(|mut s| s.remove(&Some(namespace.clone())))
            {
                stop.cancel();
            }
        }
    }
}

/// Applies the agent's RoleBinding in project namespace `namespace`.
pub(super) async fn bind(
    client: &kube::Client,
    grant: &ProjectGrant,
    namespace: &str,
) -> Result<(), kube::Error> {
    let api: Api<DynamicObject> = Api::namespaced_with(
        client.clone(),
        namespace,
        &ApiResource::erase::<k8s_openapi::api::rbac::v1::RoleBinding>(&()),
    );
    api.patch(
        PROJECT_BINDING,
        &PatchParams::apply(field_managers::AGENT).force(),
        &Patch::Apply(&grant.role_binding(namespace)),
    )
    .await?;
    until_effective(client, namespace).await
}

/// How long a new binding may take to reach the API server's authorizer.
const EFFECTIVE_WITHIN: Duration = Duration::from_secs(10);

/// Waits until the API server's authorizer holds the agent's new binding in `namespace`: RBAC
/// reads bindings from a cache, so a write right after the binding may still be refused.
/// Asks as the agent itself (a SelfSubjectAccessReview, which every account may make) whether
/// it may write a ServiceAccount there, every 100 ms for [`EFFECTIVE_WITHIN`]; past that it
/// goes on, and the write that follows says what the cluster refused.
async fn until_effective(client: &kube::Client, namespace: &str) -> Result<(), kube::Error> {
    use k8s_openapi::api::authorization::v1::{
        ResourceAttributes, SelfSubjectAccessReview, SelfSubjectAccessReviewSpec,
    };
    let reviews = Api::<SelfSubjectAccessReview>::all(client.clone());
    let review = SelfSubjectAccessReview {
        spec: SelfSubjectAccessReviewSpec {
            resource_attributes: Some(ResourceAttributes {
                namespace: Some(namespace.to_owned()),
                verb: Some("patch".into()),
                resource: Some("serviceaccounts".into()),
                ..Default::default()
            }),
            ..Default::default()
        },
        ..Default::default()
    };
    let deadline = tokio::time::Instant::now() + EFFECTIVE_WITHIN;
    loop {
        let answer = reviews.create(&Default::default(), &review).await?;
        let allowed = answer.status.is_some_and(|status| status.allowed);
        if allowed || tokio::time::Instant::now() >= deadline {
            if !allowed {
                tracing::warn!(namespace, "the agent's binding is not yet in force");
            }
            return Ok(());
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Starts the caches of `resources` (until `shutdown`) and the watch of project namespaces,
/// and waits until each has listed once; with a `grant`, follows the project namespaces from
/// then on (see [`follow_projects`]).
pub(super) async fn start(
    client: &kube::Client,
    resources: Vec<((String, String), ApiResource)>,
    grant: Option<&ProjectGrant>,
    shutdown: &CancellationToken,
) -> Result<(Arc<BTreeMap<(String, String), Cache>>, Store<Namespace>), NotReady> {
    let mut caches = BTreeMap::new();
    for (key, resource) in resources {
        let cache = Cache {
            resource,
            stores: Stores::default(),
            listeners: Listeners::default(),
        };
        if grant.is_none() {
            watch_kind(client, &cache, None, shutdown);
        }
        caches.insert(key, cache);
    }
    let caches = Arc::new(caches);
    let writer = reflector::store::Writer::<Namespace>::new(());
    let namespaces = writer.as_reader();
    let config = watcher::Config::default()
        .labels(labels::PROJECT_ID)
        .any_semantic();
    let (touched, mut follow) = mpsc::unbounded_channel::<()>();
    run_reflector(
        writer,
        watcher(Api::<Namespace>::all(client.clone()), config),
        move |_| {
            let _ = touched.send(());
        },
        shutdown,
    );
    let ready = async {
        let _ = namespaces.wait_until_ready().await;
        if let Some(grant) = grant {
            follow_projects(client, &caches, &namespaces, grant, shutdown).await;
        }
        for cache in caches.values() {
            let stores: Vec<_> = cache
                .stores
                .lock()
                .map(|s| s.values().map(|(store, _)| store.clone()).collect())
                .unwrap_or_default();
            for store in stores {
                let _ = store.wait_until_ready().await;
            }
        }
    };
    tokio::time::timeout(Duration::from_secs(60), ready)
        .await
        .map_err(|_| NotReady)?;
    if let Some(grant) = grant.cloned() {
        let (client, caches, namespaces) = (client.clone(), caches.clone(), namespaces.clone());
        let shutdown = shutdown.clone();
        tokio::spawn(async move {
            loop {
                tokio::select! {
                    _ = shutdown.cancelled() => return,
                    touched = follow.recv() => if touched.is_none() { return },
                    () = tokio::time::sleep(FOLLOW_EVERY) => {}
                }
                while follow.try_recv().is_ok() {}
                follow_projects(&client, &caches, &namespaces, &grant, &shutdown).await;
            }
        });
    }
    Ok((caches, namespaces))
}
