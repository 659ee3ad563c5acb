//! The Cluster controller: mints each cluster's token (Ed25519 JWT with its id, organization and
//! token version) into a Secret beside it, re-mints when `tokenVersion` is raised (rotation),
//! and holds a cluster's deletion while projects still live on it.
//!
//! The revocation floors the hub enforces come from the same objects ([`floors`]); pushing
//! them to the hub replicas is the hub client's job.

mod decide;
pub mod health;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::core::v1::Secret;
use kube::ResourceExt;
use kube::api::{Api, ListParams, Patch, PatchParams};
use kube::runtime::controller::{Action, Controller};
use kube::runtime::watcher;
use kubenest_contracts::{Floor, Id};
use kubenest_crds::cluster::Cluster;
use kubenest_crds::names::{field_managers, finalizers};
use kubenest_crds::project::Project;

use crate::patch::merge_status;
use crate::plane::Plane;
use decide::Deletion;
use kubenest_runtime::finalizer::{self, Cleanup};

pub use crate::reconcile::Error;
use crate::reconcile::error_policy;

/// The Secret holding a cluster's token.
pub fn token_secret_name(cluster: &str) -> String {
    format!("cluster-{cluster}-token")
}

/// The floors of every cluster (pure): each cluster's id, organization and minimum token version.
/// Clusters without an id yet (never reconciled) have no floor and cannot connect.
pub fn floors(clusters: &[Cluster], org_of_namespace: &BTreeMap<String, String>) -> Vec<Floor> {
    clusters
        .iter()
        .filter_map(|c| {
            let cluster_id = c.status.as_ref()?.cluster_id.clone()?;
            let org = org_of_namespace.get(&c.namespace()?)?;
            Some(Floor {
                cluster_id: Id::new(cluster_id),
                org_id: Id::new(org),
                min_token_version: c.spec.token_version,
            })
        })
        .collect()
}

async fn reconcile(cluster: Arc<Cluster>, plane: Arc<Plane>) -> Result<Action, Error> {
    let namespace = cluster
        .namespace()
        .ok_or_else(|| Error::Invalid("cluster without namespace".into()))?;
    let api: Api<Cluster> = Api::namespaced(plane.client.clone(), &namespace);
    finalizer::hold(
        &api,
        finalizers::CLUSTER,
        cluster,
        async |cluster| apply(&cluster, &plane, &namespace).await,
        async |cluster| cleanup(&cluster, &plane, &namespace).await,
    )
    .await
    .map_err(|e| Error::Finalizer(Box::new(e)))
}

async fn apply(cluster: &Cluster, plane: &Plane, namespace: &str) -> Result<Action, Error> {
    let name = cluster.name_any();
    let cluster_id = cluster
        .uid()
        .ok_or_else(|| Error::Invalid("cluster without uid".into()))?;
    let org = crate::placement::org_of(&plane.client, namespace)
        .await?
        .ok_or_else(|| {
            Error::Invalid(format!("namespace {namespace} belongs to no organization"))
        })?;
    let status = cluster.status.clone().unwrap_or_default();
    let version = cluster.spec.token_version;
    let secret_name = token_secret_name(&name);
    let secrets: Api<Secret> = Api::namespaced(plane.client.clone(), namespace);
    // The Secret is looked up only when its version was issued: otherwise it is minted anyway.
    let secret_exists = if status.issued_token_version == Some(version) {
        Some(secrets.get_opt(&secret_name).await?.is_some())
    } else {
        None
    };
    if decide::must_mint(&status, version, secret_exists) {
        let token = plane
            .signer
            .cluster_token(&Id::new(&cluster_id), &Id::new(&org), version)?;
        let secret = decide::token_secret(cluster, namespace, &org, &cluster_id, token)?;
        let params = PatchParams::apply(field_managers::CONTROLLERS).force();
        secrets
            .patch(&secret_name, &params, &Patch::Apply(&secret))
            .await?;
        tracing::info!(version, "cluster token minted");
    }
    if let Some(minted) = decide::minted(cluster, &cluster_id) {
        merge_status(
            &Api::<Cluster>::namespaced(plane.client.clone(), namespace),
            &name,
            &minted,
        )
        .await?;
    }
    Ok(Action::requeue(Duration::from_secs(300)))
}

async fn cleanup(cluster: &Cluster, plane: &Plane, namespace: &str) -> Result<Cleanup, Error> {
    let name = cluster.name_any();
    let projects: Vec<String> = Api::<Project>::namespaced(plane.client.clone(), namespace)
        .list(&ListParams::default())
        .await?
        .items
        .into_iter()
        .filter(|p| p.spec.cluster == name)
        .map(|p| p.name_any())
        .collect();
    match decide::deletion(cluster, &projects) {
        Deletion::Done => Ok(Cleanup::Done(Action::await_change())),
        Deletion::Blocked { status } => {
            if let Some(status) = status {
                let api = Api::<Cluster>::namespaced(plane.client.clone(), namespace);
                merge_status(&api, &name, &*status).await?;
            }
            // Keeps the finalizer; looked at again until the projects are gone.
            Ok(Cleanup::Wait(Duration::from_secs(2)))
        }
    }
}

/// Runs the controller until `shutdown` resolves.
pub async fn run(plane: Arc<Plane>, shutdown: impl Future<Output = ()> + Send + Sync + 'static) {
    let clusters: Api<Cluster> = Api::all(plane.client.clone());
    let projects: Api<Project> = Api::all(plane.client.clone());
    Controller::new(clusters, watcher::Config::default())
        // A deleted project may unblock its cluster's deletion.
        .watches(projects, watcher::Config::default(), |project| {
            let namespace = project.namespace()?;
            Some(kube::runtime::reflector::ObjectRef::new(&project.spec.cluster).within(&namespace))
        })
        .graceful_shutdown_on(shutdown)
        .run(
            crate::metrics::metrics()
                .reconciles
                .measure("cluster", reconcile),
            error_policy::<Cluster>,
            plane,
        )
        .for_each(|result| async move {
            if let Err(error) = result {
                tracing::debug!(%error, "reconcile");
            }
        })
        .await;
}

#[cfg(test)]
mod tests {
    use kubenest_crds::cluster::{ClusterSpec, ClusterState, ClusterStatus};

    use super::*;

    fn cluster(name: &str, namespace: &str, version: u64, id: Option<&str>) -> Cluster {
        let mut c = Cluster::new(
            name,
            ClusterSpec {
                display_name: None,
                provider: Default::default(),
                token_version: version,
                desired_node_count: None,
                members: Vec::new(),
                budget: None,
            },
        );
        c.metadata.namespace = Some(namespace.into());
        c.status = id.map(|id| ClusterStatus {
            cluster_id: Some(id.into()),
            state: ClusterState::Pending,
            ..Default::default()
        });
        c
    }

    #[test]
    fn floors_carry_each_cluster_id_org_and_token_version() {
        let orgs = BTreeMap::from([("org-acme".to_owned(), "acme".to_owned())]);
        let clusters = [
            cluster("east", "org-acme", 3, Some("uid-east")),
            cluster("new", "org-acme", 1, None),
            cluster("stray", "elsewhere", 1, Some("uid-stray")),
        ];
        let floors = floors(&clusters, &orgs);
        assert_eq!(
            floors,
            vec![Floor {
                cluster_id: Id::from("uid-east"),
                org_id: Id::from("acme"),
                min_token_version: 3
            }]
        );
    }
}
