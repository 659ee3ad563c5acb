//! Where a Secret the API changes on a cluster lives (the cluster, the organization, the
//! namespace and name), and the hub commands that change it. Component Secrets, Git
//! credentials and project registry credentials all go through here: the values travel to the
//! agent in the command and are never stored on the control plane.

use std::collections::BTreeMap;

use kube::ResourceExt;
use kubenest_contracts::{
    self as wire, Envelope, SecretDelete, SecretSet, SecretTarget, SecretValue,
};

use super::Scoped;
use crate::error::{ApiError, ApiResult};

/// A Secret on the cluster of a [`Scoped`] object.
#[derive(Debug)]
pub struct SecretPlace {
    cluster_id: wire::Id,
    org_id: wire::Id,
    pub target: SecretTarget,
}

impl SecretPlace {
    /// The Secret `target` on the cluster of `scoped`; 503 `cluster_unreachable` while the
    /// cluster is not registered (`what` names the object in the error, e.g. `app`).
    pub fn of<K>(scoped: &Scoped<K>, what: &str, target: SecretTarget) -> ApiResult<Self> {
        let cluster_id = scoped
            .cluster
            .as_ref()
            .and_then(|c| c.status.as_ref()?.cluster_id.clone())
            .ok_or_else(|| {
                ApiError::unavailable(
                    "cluster_unreachable",
                    format!("the {what}'s cluster is not registered"),
                )
            })?;
        Ok(Self {
            cluster_id: wire::Id::new(cluster_id),
            org_id: wire::Id::new(scoped.org.name_any()),
            target,
        })
    }

    /// `secret.set` of `values` (replacing the Secret's) as a Secret of `kind`.
    pub fn set(self, kind: wire::SecretKind, values: BTreeMap<String, String>) -> Envelope {
        let values = values
            .into_iter()
            .map(|(k, v)| (k, SecretValue(v)))
            .collect();
        let command = SecretSet {
            target: self.target,
            kind,
            values,
        };
        Envelope::new(command)
            .for_cluster(self.cluster_id, self.org_id)
            .traced(kubenest_runtime::traces::current_traceparent())
    }

    /// `secret.delete` of `keys` (all of the Secret when empty).
    pub fn delete(self, keys: Vec<String>) -> Envelope {
        let command = SecretDelete {
            target: self.target,
            keys,
        };
        Envelope::new(command).for_cluster(self.cluster_id, self.org_id)
    }
}
