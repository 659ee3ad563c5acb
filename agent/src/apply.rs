//! The agent's applier: server-side apply of any object under one field manager, pruning of
//! what an App or addon no longer renders, and the agent's view of the objects it manages.
//!
//! Every kind the agent renders is watched (label `app.kubernetes.io/managed-by=kubenest-agent`)
//! into a cache, so reconciles read live objects and prune without listing the API server.
//! Where the agent's powers are cluster-wide (a kubeconfig of its own, as in development) one
//! watch per kind covers the cluster. Installed by its chart they are not: it may only create
//! namespaces and read capacity cluster-wide, so it binds its project role in each project
//! namespace ([`ProjectGrant`]) and watches each of those namespaces on its own, starting and
//! stopping those watches as project namespaces come and go.
//! The same watches wake the StackDeploy controller ([`Applier::changes`]): a change reaches
//! it only after the cache holds it, so a reconcile never reads an object older than the one
//! that woke it, and the cluster serves one watch per kind rather than two.
//! Each applied object carries the hash of its desired state; an object whose live copy already
//! carries that hash is not written again unless the caller forces it (a drift to heal, or the
//! periodic full pass), so a cluster at rest costs the API server no writes.

use kubenest_crds::names::{annotations, field_managers, labels};
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::{FutureExt as _, StreamExt};
use k8s_openapi::api::core::v1::Namespace;
use kube::api::{Api, DeleteParams, DynamicObject, Patch, PatchParams};
use kube::core::GroupVersionKind;
use kube::discovery::{ApiResource, Scope, pinned_kind};
use kube::runtime::reflector::{self, ObjectRef, Store};
use kube::runtime::{WatchStreamExt, watcher};
use serde_json::Value;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

/// The kinds the agent renders and so may prune: (apiVersion, kind).
pub const PRUNABLE: &[(&str, &str)] = &[
    ("apps/v1", "Deployment"),
    ("apps/v1", "StatefulSet"),
    ("v1", "Service"),
    ("networking.k8s.io/v1", "Ingress"),
    ("v1", "ConfigMap"),
    ("v1", "Secret"),
    ("batch/v1", "Job"),
];

/// What went wrong applying or pruning.
#[derive(Debug, thiserror::Error)]
pub enum ApplyError {
    #[error("object without apiVersion, kind or name")]
    Malformed,
    #[error("{kind}/{name}: {source}")]
    Kube {
        kind: String,
        name: String,
        #[source]
        source: kube::Error,
    },
    #[error("unknown kind {0}")]
    UnknownKind(String),
    #[error("the caches of managed objects did not fill in time")]
    CachesNotReady,
}

/// (apiVersion, kind, name) of an object.
pub type ObjectId = (String, String, String);

/// The id of an object, if it has one.
pub fn id_of(object: &Value) -> Option<ObjectId> {
    Some((
        object.get("apiVersion")?.as_str()?.to_owned(),
        object.get("kind")?.as_str()?.to_owned(),
        object.pointer("/metadata/name")?.as_str()?.to_owned(),
    ))
}

/// `object` with [`annotations::DESIRED_HASH`] set to the hash of everything else in it (pure).
pub fn stamped(object: &Value) -> Value {
    let hash = kubenest_contracts::checksum_of(object);
    let mut object = object.clone();
    if let Some(metadata) = object.get_mut("metadata").and_then(Value::as_object_mut) {
        let annotations = metadata
            .entry("annotations")
            .or_insert_with(|| Value::Object(Default::default()));
        if let Some(map) = annotations.as_object_mut() {
            map.insert(annotations::DESIRED_HASH.into(), hash[..16].into());
        }
    }
    object
}

/// Whether `live` was last applied with `desired` (as [`stamped`] marks it).
fn carries(live: &Value, desired: &Value) -> bool {
    let want = desired.pointer(&format!(
        "/metadata/annotations/{}",
        annotations::DESIRED_HASH.replace('/', "~1")
    ));
    let have = live.pointer(&format!(
        "/metadata/annotations/{}",
        annotations::DESIRED_HASH.replace('/', "~1")
    ));
    want.is_some() && want == have
}

/// Labels as `key=value` pairs of a selector of equalities.
fn selector_pairs(selector: &str) -> Vec<(&str, &str)> {
    selector
        .split(',')
        .filter_map(|term| term.split_once('='))
        .collect()
}

/// Those told of every object a cache sees change.
type Listeners = Arc<Mutex<Vec<mpsc::UnboundedSender<DynamicObject>>>>;

/// The stores of one kind: one for the whole cluster (key `None`) when the agent's powers are
/// cluster-wide, else one per project namespace, each with the token that stops its watch.
type Stores = Arc<Mutex<BTreeMap<Option<String>, (Store<DynamicObject>, CancellationToken)>>>;

/// One rendered kind's caches and who listens to its changes.
struct Cache {
    resource: ApiResource,
    stores: Stores,
    listeners: Listeners,
}

impl Cache {
    /// The store holding `namespace`'s objects, once it has listed them.
    fn ready_store(&self, namespace: &str) -> Option<Store<DynamicObject>> {
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

/// Applies objects and keeps the agent's caches of what it manages.
pub struct Applier {
    client: kube::Client,
    kinds: Mutex<HashMap<(String, String), (ApiResource, bool)>>,
    caches: Arc<BTreeMap<(String, String), Cache>>,
    namespaces: Store<Namespace>,
    grant: Option<ProjectGrant>,
}

impl std::fmt::Debug for Applier {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Applier").finish_non_exhaustive()
    }
}

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
async fn bind(
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
    Ok(())
}

impl Applier {
    /// Starts the caches (until `shutdown`) and waits until each has listed once. With a
    /// `grant`, the agent's powers are namespaced: it binds itself in each project namespace
    /// and watches them one by one; without, it watches each kind across the cluster.
    pub async fn start(
        client: kube::Client,
        grant: Option<ProjectGrant>,
        shutdown: &CancellationToken,
    ) -> Result<Self, ApplyError> {
        let mut caches = BTreeMap::new();
        let mut kinds = HashMap::new();
        for (api_version, kind) in PRUNABLE {
            let (resource, namespaced) = discover(&client, api_version, kind).await?;
            kinds.insert(
                ((*api_version).to_owned(), (*kind).to_owned()),
                (resource.clone(), namespaced),
            );
            let cache = Cache {
                resource,
                stores: Stores::default(),
                listeners: Listeners::default(),
            };
            if grant.is_none() {
                watch_kind(&client, &cache, None, shutdown);
            }
            caches.insert(((*api_version).to_owned(), (*kind).to_owned()), cache);
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
            if let Some(grant) = &grant {
                follow_projects(&client, &caches, &namespaces, grant, shutdown).await;
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
            .map_err(|_| ApplyError::CachesNotReady)?;
        if let Some(grant) = grant.clone() {
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
        Ok(Self {
            client,
            kinds: Mutex::new(kinds),
            caches,
            namespaces,
            grant,
        })
    }

    /// Gives the agent its powers in a project namespace it has just made (a no-op when its
    /// powers are cluster-wide), so the objects of a project can be applied at once.
    pub async fn grant(&self, namespace: &str) -> Result<(), kube::Error> {
        match &self.grant {
            Some(grant) => bind(&self.client, grant, namespace).await,
            None => Ok(()),
        }
    }

    /// Every object of a rendered kind that changes from now on (applied, or deleted), each
    /// once the cache holds the change, with the kind's resource; `None` for a kind the agent
    /// does not render.
    pub fn changes(
        &self,
        api_version: &str,
        kind: &str,
    ) -> Option<(
        ApiResource,
        impl futures::Stream<Item = DynamicObject> + use<>,
    )> {
        let cache = self
            .caches
            .get(&(api_version.to_owned(), kind.to_owned()))?;
        let (tx, rx) = mpsc::unbounded_channel();
        cache.listeners.lock().ok()?.push(tx);
        let changes = futures::stream::unfold(rx, |mut rx| async move {
            rx.recv().await.map(|object| (object, rx))
        });
        Some((cache.resource.clone(), changes))
    }

    /// A project namespace as the cache holds it.
    pub fn namespace(&self, name: &str) -> Option<std::sync::Arc<Namespace>> {
        self.namespaces.get(&ObjectRef::new(name))
    }

    async fn resource(
        &self,
        api_version: &str,
        kind: &str,
    ) -> Result<(ApiResource, bool), ApplyError> {
        let key = (api_version.to_owned(), kind.to_owned());
        if let Some(found) = self.kinds.lock().ok().and_then(|k| k.get(&key).cloned()) {
            return Ok(found);
        }
        let found = discover(&self.client, api_version, kind).await?;
        if let Ok(mut kinds) = self.kinds.lock() {
            kinds.insert(key, found.clone());
        }
        Ok(found)
    }

    async fn api(
        &self,
        api_version: &str,
        kind: &str,
        namespace: Option<&str>,
    ) -> Result<Api<DynamicObject>, ApplyError> {
        let (resource, namespaced) = self.resource(api_version, kind).await?;
        Ok(match (namespaced, namespace) {
            (true, Some(ns)) => Api::namespaced_with(self.client.clone(), ns, &resource),
            _ => Api::all_with(self.client.clone(), &resource),
        })
    }

    /// The live object: from the cache for the kinds the agent renders, else (another kind, or
    /// an object the cache has not seen yet, such as one applied a moment ago) from the API
    /// server. A cache that lags behind never makes an object look missing: that would make
    /// the agent apply it again, or make a new password for a database.
    pub async fn get(
        &self,
        api_version: &str,
        kind: &str,
        namespace: &str,
        name: &str,
    ) -> Result<Option<Value>, ApplyError> {
        if let Some(cache) = self.caches.get(&(api_version.to_owned(), kind.to_owned()))
            && let Some(store) = cache.ready_store(namespace)
        {
            let key = ObjectRef::new_with(name, cache.resource.clone()).within(namespace);
            if let Some(cached) = store.get(&key) {
                return Ok(serde_json::to_value(&*cached).ok());
            }
        }
        let api = self.api(api_version, kind, Some(namespace)).await?;
        let found = api.get_opt(name).await.map_err(|source| ApplyError::Kube {
            kind: kind.to_owned(),
            name: name.to_owned(),
            source,
        })?;
        Ok(found.and_then(|o| serde_json::to_value(o).ok()))
    }

    /// Server-side applies `object` (forcing ownership of the fields it sets), stamped with its
    /// desired hash, and returns the live object. Skips the write when the live copy already
    /// carries that hash, unless `force`.
    pub async fn apply(&self, object: &Value, force: bool) -> Result<Value, ApplyError> {
        let (api_version, kind, name) = id_of(object).ok_or(ApplyError::Malformed)?;
        let namespace = object
            .pointer("/metadata/namespace")
            .and_then(Value::as_str);
        let object = stamped(object);
        if !force
            && let Some(ns) = namespace
            && let Some(live) = self.get(&api_version, &kind, ns, &name).await?
            && carries(&live, &object)
        {
            return Ok(live);
        }
        let api = self.api(&api_version, &kind, namespace).await?;
        let params = PatchParams::apply(field_managers::AGENT).force();
        let live = api
            .patch(&name, &params, &Patch::Apply(&object))
            .await
            .map_err(|source| ApplyError::Kube {
                kind: kind.clone(),
                name: name.clone(),
                source,
            })?;
        serde_json::to_value(live).map_err(|_| ApplyError::Malformed)
    }

    /// The objects of `cache`'s kind the agent manages in `namespace`: from the cache, or from
    /// the API server while the cache of a namespace just made has not listed it yet.
    async fn managed(
        &self,
        cache: &Cache,
        namespace: &str,
    ) -> Result<Vec<Arc<DynamicObject>>, ApplyError> {
        if let Some(store) = cache.ready_store(namespace) {
            return Ok(store.state());
        }
        let api: Api<DynamicObject> =
            Api::namespaced_with(self.client.clone(), namespace, &cache.resource);
        let selector = format!("{}={}", labels::MANAGED_BY, labels::MANAGED_BY_AGENT);
        let listed = api
            .list(&kube::api::ListParams::default().labels(&selector))
            .await
            .map_err(|source| ApplyError::Kube {
                kind: cache.resource.kind.clone(),
                name: String::new(),
                source,
            })?;
        Ok(listed.items.into_iter().map(Arc::new).collect())
    }

    /// Deletes every object of a prunable kind in `namespace` whose labels match `selector`
    /// (equalities, comma-separated) and that is not in `keep`. Returns how many such objects
    /// are still there (being deleted or not yet deleted).
    pub async fn prune(
        &self,
        namespace: &str,
        selector: &str,
        keep: &BTreeSet<ObjectId>,
    ) -> Result<usize, ApplyError> {
        let pairs = selector_pairs(selector);
        let mut remaining = 0;
        for ((api_version, kind), cache) in self.caches.iter() {
            let doomed: Vec<(String, bool)> = self
                .managed(cache, namespace)
                .await?
                .iter()
                .filter(|o| o.metadata.namespace.as_deref() == Some(namespace))
                .filter(|o| {
                    let labels = o.metadata.labels.as_ref();
                    pairs.iter().all(|(k, v)| {
                        labels.and_then(|l| l.get(*k)).map(String::as_str) == Some(*v)
                    })
                })
                .filter_map(|o| {
                    let name = o.metadata.name.clone()?;
                    let id = (api_version.clone(), kind.clone(), name.clone());
                    (!keep.contains(&id)).then_some((name, o.metadata.deletion_timestamp.is_some()))
                })
                .collect();
            if doomed.is_empty() {
                continue;
            }
            let api = self.api(api_version, kind, Some(namespace)).await?;
            for (name, deleting) in doomed {
                remaining += 1;
                if deleting {
                    continue;
                }
                match api.delete(&name, &DeleteParams::background()).await {
                    Ok(_) => tracing::info!(%kind, %name, "pruned"),
                    Err(kube::Error::Api(status)) if status.code == 404 => remaining -= 1,
                    Err(source) => {
                        return Err(ApplyError::Kube {
                            kind: kind.clone(),
                            name,
                            source,
                        });
                    }
                }
            }
        }
        Ok(remaining)
    }
}

async fn discover(
    client: &kube::Client,
    api_version: &str,
    kind: &str,
) -> Result<(ApiResource, bool), ApplyError> {
    let (group, version) = api_version.split_once('/').unwrap_or(("", api_version));
    let gvk = GroupVersionKind::gvk(group, version, kind);
    let (resource, capabilities) = pinned_kind(client, &gvk)
        .await
        .map_err(|_| ApplyError::UnknownKind(format!("{api_version}/{kind}")))?;
    Ok((resource, capabilities.scope == Scope::Namespaced))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_stamp_changes_with_the_desired_state_and_only_then() {
        let a = json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "s"}, "spec": {"ports": [{"port": 80}]}});
        let b = json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "s"}, "spec": {"ports": [{"port": 81}]}});
        let (sa, sa_again, sb) = (stamped(&a), stamped(&a), stamped(&b));
        assert!(carries(&sa, &sa_again));
        assert!(!carries(&sa, &sb));
        // A live object with extra fields (status, defaults) still carries its stamp.
        let mut live = sa.clone();
        live["status"] = json!({"loadBalancer": {}});
        assert!(carries(&live, &sa_again));
        assert!(!carries(&a, &sa), "an unstamped live object is applied");
    }

    #[test]
    fn selectors_are_equalities() {
        assert_eq!(selector_pairs("a=1,b=2"), vec![("a", "1"), ("b", "2")]);
    }
}
