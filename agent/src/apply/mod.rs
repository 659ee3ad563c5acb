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

use kubenest_crds::names::{field_managers, labels};
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::{Arc, Mutex};

use k8s_openapi::api::core::v1::Namespace;
use kube::api::{Api, DeleteParams, DynamicObject, ListParams, Patch, PatchParams};
use kube::core::GroupVersionKind;
use kube::discovery::{ApiResource, Scope, pinned_kind};
use kube::runtime::reflector::{ObjectRef, Store};
use serde_json::Value;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

mod caches;
mod kinds;
mod remaining;

pub use kinds::{ApplyError, FENCES, ObjectId, PRUNABLE, WAKING, id_of, stamped};
use kinds::{carries, selector_pairs};

use caches::Cache;
pub use caches::{PROJECT_BINDING, ProjectGrant};
pub use remaining::{Remaining, describe};

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

impl Applier {
    /// Starts the caches (until `shutdown`) and waits until each has listed once. With a
    /// `grant`, the agent's powers are namespaced: it binds itself in each project namespace
    /// and watches them one by one; without, it watches each kind across the cluster.
    pub async fn start(
        client: kube::Client,
        grant: Option<ProjectGrant>,
        shutdown: &CancellationToken,
    ) -> Result<Self, ApplyError> {
        let mut kinds = HashMap::new();
        let mut resources = Vec::new();
        // The kinds it renders, and the fences of project namespaces.
        for (api_version, kind) in PRUNABLE.iter().chain(FENCES).copied() {
            let (resource, namespaced) = discover(&client, api_version, kind).await?;
            let key = ((*api_version).to_owned(), (*kind).to_owned());
            kinds.insert(key.clone(), (resource.clone(), namespaced));
            resources.push((key, resource));
        }
        let (caches, namespaces) = caches::start(&client, resources, grant.as_ref(), shutdown)
            .await
            .map_err(|caches::NotReady| ApplyError::CachesNotReady)?;
        Ok(Self {
            client,
            kinds: Mutex::new(kinds),
            caches,
            namespaces,
            grant,
        })
    }

    /// The client the applier writes with.
    pub fn client(&self) -> &kube::Client {
        &self.client
    }

    /// The EndpointSlices of Service `service` in `namespace` (by the `kubernetes.io/service-name`
    /// label the EndpointSlice controller sets), for judging whether the Service serves.
    pub async fn endpoint_slices(
        &self,
        namespace: &str,
        service: &str,
    ) -> Result<Vec<Value>, ApplyError> {
        use k8s_openapi::api::discovery::v1::EndpointSlice;
        let api = Api::<EndpointSlice>::namespaced(self.client.clone(), namespace);
        let selected =
            ListParams::default().labels(&format!("kubernetes.io/service-name={service}"));
        let listed = api
            .list(&selected)
            .await
            .map_err(|source| ApplyError::Kube {
                kind: "EndpointSlice".into(),
                name: service.to_owned(),
                source,
            })?;
        Ok(listed
            .items
            .iter()
            .filter_map(|slice| serde_json::to_value(slice).ok())
            .collect())
    }

    /// Gives the agent its powers in a project namespace it has just made (a no-op when its
    /// powers are cluster-wide), so the objects of a project can be applied at once.
    pub async fn grant(&self, namespace: &str) -> Result<(), kube::Error> {
        match &self.grant {
            Some(grant) => caches::bind(&self.client, grant, namespace).await,
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

    /// Every object of a watched kind the caches hold now (none for a kind not watched).
    pub fn cached(&self, api_version: &str, kind: &str) -> Vec<Arc<DynamicObject>> {
        self.caches
            .get(&(api_version.to_owned(), kind.to_owned()))
            .map(Cache::all)
            .unwrap_or_default()
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

    /// What the cluster's discovery says of `api_version`/`kind` (remembered per kind once
    /// found); a kind it does not serve is [`Scope::Unknown`](crate::confine::Scope::Unknown).
    pub async fn scope(
        &self,
        api_version: &str,
        kind: &str,
    ) -> Result<crate::confine::Scope, ApplyError> {
        use crate::confine::Scope as Of;
        match self.resource(api_version, kind).await {
            Ok((_, true)) => Ok(Of::Namespaced),
            Ok((_, false)) => Ok(Of::Cluster),
            Err(ApplyError::UnknownKind(_)) => Ok(Of::Unknown),
            Err(error) => Err(error),
        }
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

    /// Puts `object` back as desired after someone else changed it (drift), then applies it. A
    /// forced server-side apply takes back the fields the agent sets, but never removes what
    /// another manager added beside them (a port, an env var, a data key in a list or map it
    /// merges by key); a JSON merge patch of the object's `spec` (or `data`) replaces each list
    /// whole, so the agent's lists are exactly its own again.
    pub async fn restore(&self, object: &Value) -> Result<Value, ApplyError> {
        let (api_version, kind, name) = id_of(object).ok_or(ApplyError::Malformed)?;
        let namespace = object
            .pointer("/metadata/namespace")
            .and_then(Value::as_str);
        let mut patch = serde_json::Map::new();
        for root in ["spec", "data"] {
            if let Some(value) = object.get(root) {
                patch.insert(root.to_owned(), value.clone());
            }
        }
        let api = self.api(&api_version, &kind, namespace).await?;
        let params = PatchParams {
            field_manager: Some(field_managers::AGENT.to_owned()),
            ..PatchParams::default()
        };
        api.patch(&name, &params, &Patch::Merge(&Value::Object(patch)))
            .await
            .map_err(|source| ApplyError::Kube {
                kind: kind.clone(),
                name: name.clone(),
                source,
            })?;
        self.apply(object, true).await
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
    /// (equalities, comma-separated) and that is not in `keep`. Returns those still there
    /// (being deleted, held by finalizers, or not yet deleted).
    pub async fn prune(
        &self,
        namespace: &str,
        selector: &str,
        keep: &BTreeSet<ObjectId>,
    ) -> Result<Vec<Remaining>, ApplyError> {
        let pairs = selector_pairs(selector);
        let mut remaining = Vec::new();
        for ((api_version, kind), cache) in self.caches.iter() {
            let doomed: Vec<(Remaining, bool)> = self
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
                    let left = Remaining {
                        kind: kind.clone(),
                        name,
                        finalizers: o.metadata.finalizers.clone().unwrap_or_default(),
                    };
                    (!keep.contains(&id)).then_some((left, o.metadata.deletion_timestamp.is_some()))
                })
                .collect();
            if doomed.is_empty() {
                continue;
            }
            let api = self.api(api_version, kind, Some(namespace)).await?;
            for (left, deleting) in doomed {
                if deleting {
                    remaining.push(left);
                    continue;
                }
                match api.delete(&left.name, &DeleteParams::background()).await {
                    Ok(_) => {
                        tracing::info!(%kind, name = %left.name, "pruned");
                        remaining.push(left);
                    }
                    Err(kube::Error::Api(status)) if status.code == 404 => {}
                    Err(source) => {
                        return Err(ApplyError::Kube {
                            kind: kind.clone(),
                            name: left.name,
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
