//! Session Leases on the management cluster: one `Lease` per connected cluster, held by the
//! replica that has its agent, so that controllers (and other replicas) can see which replica to
//! send a cluster's commands to. This is the hub's only use of the Kubernetes API.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use k8s_openapi::api::coordination::v1::Lease;
use kube::api::{Api, DeleteParams, Patch, PatchParams, Preconditions};
use kubenest_contracts::Id;
use serde_json::json;

use kubenest_contracts::names::lease::{
    ADDRESS_ANNOTATION, CLUSTER_LABEL, EPOCH_ANNOTATION, FIELD_MANAGER,
};

/// The Lease name for a cluster's session.
pub fn lease_name(cluster_id: &Id) -> String {
    kubenest_contracts::names::lease::name(cluster_id.as_str())
}

/// Records sessions as Leases, or does nothing (local use without a management cluster).
#[derive(Debug, Clone)]
pub enum Leases {
    Disabled,
    Kube(Arc<KubeLeases>),
}

/// Leases in one namespace of the management cluster.
#[derive(Debug)]
pub struct KubeLeases {
    api: Api<Lease>,
    namespace: String,
    replica: String,
    address: String,
    duration: Duration,
    held: Mutex<HashMap<Id, Held>>,
}

#[derive(Debug, Clone)]
struct Held {
    epoch: i64,
    acquired: String,
}

impl Leases {
    /// Leases in `namespace`, held as `replica` reachable at `address`.
    pub fn kube(
        client: kube::Client,
        namespace: &str,
        replica: &str,
        address: &str,
        duration: Duration,
    ) -> Self {
        Self::Kube(Arc::new(KubeLeases {
            api: Api::namespaced(client, namespace),
            namespace: namespace.to_owned(),
            replica: replica.to_owned(),
            address: address.to_owned(),
            duration,
            held: Mutex::new(HashMap::new()),
        }))
    }

    /// Takes the cluster's Lease for this replica and session epoch.
    pub async fn acquire(&self, cluster_id: &Id, epoch: i64) -> Result<(), kube::Error> {
        let Self::Kube(leases) = self else {
            return Ok(());
        };
        let held = Held {
            epoch,
            acquired: now_micro(),
        };
        leases.held().insert(cluster_id.clone(), held.clone());
        leases.apply(cluster_id, &held).await
    }

    /// Gives the Lease up, if it is still this session's.
    pub async fn release(&self, cluster_id: &Id, epoch: i64) -> Result<(), kube::Error> {
        let Self::Kube(leases) = self else {
            return Ok(());
        };
        {
            let mut held = leases.held();
            if held.get(cluster_id).is_none_or(|h| h.epoch != epoch) {
                return Ok(()); // a newer session of this cluster holds it now
            }
            held.remove(cluster_id);
        }
        let name = lease_name(cluster_id);
        let Some(lease) = leases.api.get_opt(&name).await? else {
            return Ok(());
        };
        let ours = lease
            .spec
            .as_ref()
            .and_then(|s| s.holder_identity.as_deref())
            == Some(&leases.replica)
            && lease
                .metadata
                .annotations
                .as_ref()
                .and_then(|a| a.get(EPOCH_ANNOTATION))
                == Some(&epoch.to_string());
        if !ours {
            return Ok(()); // another replica took the cluster over
        }
        let params = DeleteParams {
            preconditions: Some(Preconditions {
                resource_version: lease.metadata.resource_version,
                uid: None,
            }),
            ..DeleteParams::default()
        };
        match leases.api.delete(&name, &params).await {
            Ok(_) => Ok(()),
            // Changed or gone meanwhile: no longer ours to delete.
            Err(kube::Error::Api(e)) if e.code == 409 || e.code == 404 => Ok(()),
            Err(e) => Err(e),
        }
    }

    /// Renews every held Lease every third of their duration until `stop`.
    pub async fn renew_until(&self, stop: tokio_util::sync::CancellationToken) {
        let Self::Kube(leases) = self else { return };
        let mut tick = tokio::time::interval(leases.duration / 3);
        loop {
            tokio::select! {
                _ = stop.cancelled() => return,
                _ = tick.tick() => {}
            }
            let held: Vec<(Id, Held)> = leases
                .held()
                .iter()
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect();
            for (cluster_id, h) in held {
                if let Err(error) = leases.apply(&cluster_id, &h).await {
                    tracing::warn!(%cluster_id, %error, "renewing session lease failed");
                }
            }
        }
    }

    /// Number of Leases this replica holds.
    pub fn held_count(&self) -> usize {
        match self {
            Self::Disabled => 0,
            Self::Kube(leases) => leases.held().len(),
        }
    }
}

impl KubeLeases {
    fn held(&self) -> std::sync::MutexGuard<'_, HashMap<Id, Held>> {
        self.held.lock().unwrap_or_else(|e| e.into_inner())
    }

    async fn apply(&self, cluster_id: &Id, held: &Held) -> Result<(), kube::Error> {
        let name = lease_name(cluster_id);
        let lease = json!({
            "apiVersion": "coordination.k8s.io/v1",
            "kind": "Lease",
            "metadata": {
                "name": name,
                "namespace": self.namespace,
                "labels": { CLUSTER_LABEL: cluster_id.as_str(), "app.kubernetes.io/managed-by": FIELD_MANAGER },
                "annotations": { ADDRESS_ANNOTATION: self.address, EPOCH_ANNOTATION: held.epoch.to_string() }
            },
            "spec": {
                "holderIdentity": self.replica,
                "leaseDurationSeconds": self.duration.as_secs(),
                "acquireTime": held.acquired,
                "renewTime": now_micro()
            }
        });
        self.api
            .patch(
                &name,
                &PatchParams::apply(FIELD_MANAGER).force(),
                &Patch::Apply(&lease),
            )
            .await?;
        Ok(())
    }
}

fn now_micro() -> String {
    chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Micros, true)
}
