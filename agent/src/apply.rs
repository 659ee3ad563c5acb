//! The agent's applier: server-side apply of any object under one field manager, and pruning of
//! what an App or addon no longer renders, found by its labels.

use std::collections::{BTreeSet, HashMap};
use std::sync::Mutex;

use kube::api::{Api, DeleteParams, DynamicObject, ListParams, Patch, PatchParams};
use kube::core::GroupVersionKind;
use kube::discovery::{ApiResource, Scope, pinned_kind};
use serde_json::Value;

use crate::render::MANAGED_BY;

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
}

/// (apiVersion, kind, name) of an object.
pub type ObjectId = (String, String, String);

/// Applies objects and remembers how to reach each kind.
pub struct Applier {
    client: kube::Client,
    kinds: Mutex<HashMap<(String, String), (ApiResource, bool)>>,
}

impl std::fmt::Debug for Applier {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Applier").finish_non_exhaustive()
    }
}

/// The id of an object, if it has one.
pub fn id_of(object: &Value) -> Option<ObjectId> {
    Some((
        object.get("apiVersion")?.as_str()?.to_owned(),
        object.get("kind")?.as_str()?.to_owned(),
        object.pointer("/metadata/name")?.as_str()?.to_owned(),
    ))
}

impl Applier {
    pub fn new(client: kube::Client) -> Self {
        Self {
            client,
            kinds: Mutex::default(),
        }
    }

    /// The client of the local API server.
    pub fn client(&self) -> &kube::Client {
        &self.client
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
        let (group, version) = api_version.split_once('/').unwrap_or(("", api_version));
        let gvk = GroupVersionKind::gvk(group, version, kind);
        let (resource, capabilities) = pinned_kind(&self.client, &gvk)
            .await
            .map_err(|_| ApplyError::UnknownKind(format!("{api_version}/{kind}")))?;
        let found = (resource, capabilities.scope == Scope::Namespaced);
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

    /// Server-side applies `object` (forcing ownership of the fields it sets) and returns the
    /// live object.
    pub async fn apply(&self, object: &Value) -> Result<Value, ApplyError> {
        let (api_version, kind, name) = id_of(object).ok_or(ApplyError::Malformed)?;
        let namespace = object
            .pointer("/metadata/namespace")
            .and_then(Value::as_str);
        let api = self.api(&api_version, &kind, namespace).await?;
        let params = PatchParams::apply(MANAGED_BY).force();
        let live = api
            .patch(&name, &params, &Patch::Apply(object))
            .await
            .map_err(|source| ApplyError::Kube {
                kind: kind.clone(),
                name: name.clone(),
                source,
            })?;
        serde_json::to_value(live).map_err(|_| ApplyError::Malformed)
    }

    /// The live object, if there is one.
    pub async fn get(
        &self,
        api_version: &str,
        kind: &str,
        namespace: &str,
        name: &str,
    ) -> Result<Option<Value>, ApplyError> {
        let api = self.api(api_version, kind, Some(namespace)).await?;
        let found = api.get_opt(name).await.map_err(|source| ApplyError::Kube {
            kind: kind.to_owned(),
            name: name.to_owned(),
            source,
        })?;
        Ok(found.and_then(|o| serde_json::to_value(o).ok()))
    }

    /// Deletes every object of a prunable kind in `namespace` matching `selector` that is not in
    /// `keep`. Returns how many objects are still there (being deleted or not yet deleted).
    pub async fn prune(
        &self,
        namespace: &str,
        selector: &str,
        keep: &BTreeSet<ObjectId>,
    ) -> Result<usize, ApplyError> {
        let mut remaining = 0;
        for (api_version, kind) in PRUNABLE {
            let api = self.api(api_version, kind, Some(namespace)).await?;
            let kube_error = |source| ApplyError::Kube {
                kind: (*kind).to_owned(),
                name: selector.to_owned(),
                source,
            };
            let listed = api
                .list_metadata(&ListParams::default().labels(selector))
                .await
                .map_err(kube_error)?;
            for object in listed {
                let name = object.metadata.name.clone().unwrap_or_default();
                let id = ((*api_version).to_owned(), (*kind).to_owned(), name.clone());
                if keep.contains(&id) {
                    continue;
                }
                remaining += 1;
                if object.metadata.deletion_timestamp.is_some() {
                    continue;
                }
                let params = DeleteParams::background();
                match api.delete(&name, &params).await {
                    Ok(_) => tracing::info!(%kind, %name, "pruned"),
                    Err(kube::Error::Api(status)) if status.code == 404 => remaining -= 1,
                    Err(source) => return Err(kube_error(source)),
                }
            }
        }
        Ok(remaining)
    }
}
