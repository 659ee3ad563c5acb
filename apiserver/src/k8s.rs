//! Reading the management cluster: the API's ids are object uids, found through an index of
//! every kubenest object's uid (metadata watches; a miss falls back to a list, so an object
//! created a moment ago on another replica is found too). Objects themselves are read from the
//! API server, never from a cache, so every replica answers with the same state; the one
//! exception is the fence check's count over a whole organization ([`crate::mirror`]).

use std::collections::HashMap;
use std::sync::{Arc, RwLock};

use futures::StreamExt;
use kube::api::{Api, ListParams};
use kube::runtime::watcher;
use kube::{Resource, ResourceExt};
use kubenest_crds::StackTemplate;
use kubenest_crds::addon::AddonInstance;
use kubenest_crds::organization::Organization;
use serde::de::DeserializeOwned;
use tokio_util::sync::CancellationToken;

use crate::error::ApiError;

/// The kinds the API addresses by id.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Kind {
    Cluster,
    Project,
    App,
    AddonInstance,
    StackTemplate,
}

impl Kind {
    /// How the kind is named in errors.
    pub fn noun(self) -> &'static str {
        match self {
            Self::Cluster => "cluster",
            Self::Project => "project",
            Self::App => "app",
            Self::AddonInstance => "addon instance",
            Self::StackTemplate => "stack template",
        }
    }
}

/// uid → (namespace, name), per kind.
#[derive(Debug, Default)]
pub struct Index {
    entries: RwLock<HashMap<(Kind, String), (String, String)>>,
}

impl Index {
    fn entries(
        &self,
    ) -> std::sync::RwLockWriteGuard<'_, HashMap<(Kind, String), (String, String)>> {
        self.entries.write().unwrap_or_else(|e| e.into_inner())
    }

    fn get(&self, kind: Kind, uid: &str) -> Option<(String, String)> {
        self.entries
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .get(&(kind, uid.to_owned()))
            .cloned()
    }

    /// Keeps the index of addon instances and stack templates until `shutdown`. Clusters,
    /// Projects and Apps are recorded by the event stream's watches of them
    /// ([`crate::events`]), which see every change anyway: the management cluster serves one
    /// watch of each rather than two.
    pub fn start(client: &kube::Client, shutdown: &CancellationToken) -> Arc<Self> {
        let index = Arc::new(Self::default());
        spawn_watch::<AddonInstance>(&index, client, Kind::AddonInstance, shutdown);
        spawn_watch::<StackTemplate>(&index, client, Kind::StackTemplate, shutdown);
        index
    }

    /// Notes where the object `meta` describes is.
    pub(crate) fn record(&self, kind: Kind, meta: &kube::core::ObjectMeta) {
        if let (Some(uid), Some(ns), Some(name)) = (&meta.uid, &meta.namespace, &meta.name) {
            self.entries()
                .insert((kind, uid.clone()), (ns.clone(), name.clone()));
        }
    }

    /// Forgets the object `meta` describes (it is gone).
    pub(crate) fn forget(&self, kind: Kind, meta: &kube::core::ObjectMeta) {
        if let Some(uid) = &meta.uid {
            self.entries().remove(&(kind, uid.clone()));
        }
    }
}

fn spawn_watch<K>(
    index: &Arc<Index>,
    client: &kube::Client,
    kind: Kind,
    shutdown: &CancellationToken,
) where
    K: Resource<DynamicType = ()> + Clone + DeserializeOwned + std::fmt::Debug + Send + 'static,
{
    let api: Api<kube::core::PartialObjectMeta<K>> = Api::all(client.clone());
    let index = index.clone();
    let shutdown = shutdown.clone();
    tokio::spawn(async move {
        let mut events = watcher::watcher(api, watcher::Config::default()).boxed();
        loop {
            let event = tokio::select! {
                () = shutdown.cancelled() => return,
                event = events.next() => event,
            };
            match event {
                Some(Ok(watcher::Event::Apply(o) | watcher::Event::InitApply(o))) => {
                    index.record(kind, &o.metadata);
                }
                Some(Ok(watcher::Event::Delete(o))) => index.forget(kind, &o.metadata),
                Some(Ok(_)) => {}
                Some(Err(error)) => {
                    tracing::debug!(%error, ?kind, "index watch error; the watcher retries");
                    tokio::time::sleep(std::time::Duration::from_millis(500)).await;
                }
                None => return,
            }
        }
    });
}

/// Reads the object of `kind` with `uid`, wherever it is; `None` when there is none.
pub async fn by_id<K>(
    client: &kube::Client,
    index: &Index,
    kind: Kind,
    uid: &str,
) -> Result<Option<K>, ApiError>
where
    K: Resource<DynamicType = (), Scope = kube::core::NamespaceResourceScope>
        + Clone
        + DeserializeOwned
        + std::fmt::Debug,
{
    if uuid::Uuid::parse_str(uid).is_err() {
        return Ok(None);
    }
    let location = match index.get(kind, uid) {
        Some(found) => Some(found),
        None => {
            let all: Api<K> = Api::all(client.clone());
            let list = all.list_metadata(&ListParams::default()).await?;
            list.items
                .iter()
                .for_each(|o| index.record(kind, &o.metadata));
            index.get(kind, uid)
        }
    };
    let Some((namespace, name)) = location else {
        return Ok(None);
    };
    let api: Api<K> = Api::namespaced(client.clone(), &namespace);
    Ok(api
        .get_opt(&name)
        .await?
        .filter(|o| o.meta().uid.as_deref() == Some(uid)))
}

/// The organization whose namespace `namespace` is.
pub fn org_name_of(namespace: &str) -> Option<&str> {
    namespace.strip_prefix("org-")
}

/// Whether `name` can name a kubenest object (a DNS label). Anything else names nothing, and
/// is never sent to the API server.
pub fn is_name(name: &str) -> bool {
    kubenest_domain::names::is_dns_label(name)
}

/// An organization by name, if it exists.
pub async fn organization(
    client: &kube::Client,
    name: &str,
) -> Result<Option<Organization>, ApiError> {
    if !is_name(name) {
        return Ok(None);
    }
    let api: Api<Organization> = Api::all(client.clone());
    Ok(api.get_opt(name).await?)
}

/// The namespace of an organization (fixed by its name).
pub fn namespace_of(org: &str) -> Result<String, ApiError> {
    // Worded as the controllers' `invalid:` error always was, so the answer does not change.
    kubenest_domain::names::namespace_of(org)
        .map_err(|e| ApiError::invalid("name", format!("invalid: {e}")))
}

/// Everything in one organization's namespace of kind `K`.
pub async fn list_in<K>(client: &kube::Client, namespace: &str) -> Result<Vec<K>, ApiError>
where
    K: Resource<DynamicType = (), Scope = kube::core::NamespaceResourceScope>
        + Clone
        + DeserializeOwned
        + std::fmt::Debug,
{
    let api: Api<K> = Api::namespaced(client.clone(), namespace);
    Ok(api.list(&ListParams::default()).await?.items)
}

/// The name of an object as a string (never empty for stored objects).
pub fn name<K: Resource>(object: &K) -> String {
    object.meta().name.clone().unwrap_or_default()
}

/// The uid of an object.
pub fn uid<K: Resource>(object: &K) -> String {
    object.meta().uid.clone().unwrap_or_default()
}

/// The creation time of an object, RFC 3339.
pub fn created<K: Resource>(object: &K) -> Option<String> {
    object
        .meta()
        .creation_timestamp
        .as_ref()
        .map(|t| t.0.to_string())
}

/// The namespace of a namespaced object.
pub fn namespace<K: ResourceExt>(object: &K) -> String {
    object.namespace().unwrap_or_default()
}
