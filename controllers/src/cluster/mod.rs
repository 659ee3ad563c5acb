//! The Cluster controller: mints each cluster's token (Ed25519 JWT with its id, organization and
//! token version) into a Secret beside it, re-mints when `tokenVersion` is raised (rotation),
//! and holds a cluster's deletion while projects still live on it.
//!
//! The revocation floors the hub enforces come from the same objects ([`floors`]); pushing
//! them to the hub replicas is the hub client's job.

pub mod health;

use kubenest_crds::names::{field_managers, finalizers, labels};
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use kube::api::{Api, ListParams, Patch, PatchParams};
use kube::core::ObjectMeta;
use kube::runtime::controller::{Action, Controller};
use kube::runtime::finalizer::{Event, finalizer};
use kube::runtime::watcher;
use kube::{Resource, ResourceExt};
use kubenest_contracts::{Floor, Id, TokenSigner};
use kubenest_crds::cluster::{Cluster, ClusterStatus};

use kubenest_crds::project::Project;

/// What stops a reconcile.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("invalid: {0}")]
    Invalid(String),
    #[error("token: {0}")]
    Token(#[from] kubenest_contracts::TokenError),
    #[error("kubernetes: {0}")]
    Kube(#[from] kube::Error),
    #[error("finalizer: {0}")]
    Finalizer(Box<kube::runtime::finalizer::Error<Error>>),
    #[error("{0} project(s) still use this cluster")]
    InUse(usize),
}

/// Shared by every reconcile.
#[derive(Clone)]
pub struct Context {
    pub client: kube::Client,
    pub signer: Arc<TokenSigner>,
}

impl std::fmt::Debug for Context {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Context")
            .field("signer", &self.signer)
            .finish_non_exhaustive()
    }
}

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

#[tracing::instrument(skip(cluster, ctx), fields(cluster = %cluster.name_any()))]
async fn reconcile(cluster: Arc<Cluster>, ctx: Arc<Context>) -> Result<Action, Error> {
    let namespace = cluster
        .namespace()
        .ok_or_else(|| Error::Invalid("cluster without namespace".into()))?;
    let api: Api<Cluster> = Api::namespaced(ctx.client.clone(), &namespace);
    finalizer(&api, finalizers::CLUSTER, cluster, |event| async {
        match event {
            Event::Apply(cluster) => apply(&cluster, &ctx, &namespace).await,
            Event::Cleanup(cluster) => cleanup(&cluster, &ctx, &namespace).await,
        }
    })
    .await
    .map_err(|e| Error::Finalizer(Box::new(e)))
}

async fn apply(cluster: &Cluster, ctx: &Context, namespace: &str) -> Result<Action, Error> {
    let name = cluster.name_any();
    let cluster_id = cluster
        .uid()
        .ok_or_else(|| Error::Invalid("cluster without uid".into()))?;
    let org = crate::placement::org_of(&ctx.client, namespace)
        .await?
        .ok_or_else(|| {
            Error::Invalid(format!("namespace {namespace} belongs to no organization"))
        })?;
    let status = cluster.status.clone().unwrap_or_default();
    let secret_name = token_secret_name(&name);
    let secrets: Api<Secret> = Api::namespaced(ctx.client.clone(), namespace);
    let current = status.issued_token_version == Some(cluster.spec.token_version)
        && secrets.get_opt(&secret_name).await?.is_some();
    if !current {
        let token = ctx.signer.cluster_token(
            &Id::new(&cluster_id),
            &Id::new(&org),
            cluster.spec.token_version,
        )?;
        let owner = cluster
            .controller_owner_ref(&())
            .ok_or_else(|| Error::Invalid("cluster without uid".into()))?;
        let data: BTreeMap<String, ByteString> = [
            ("token", token),
            ("cluster-id", cluster_id.clone()),
            ("org-id", org.clone()),
            ("token-version", cluster.spec.token_version.to_string()),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_owned(), ByteString(v.into_bytes())))
        .collect();
        let secret = Secret {
            metadata: ObjectMeta {
                name: Some(secret_name.clone()),
                namespace: Some(namespace.to_owned()),
                owner_references: Some(vec![owner]),
                labels: Some([(labels::CLUSTER.to_owned(), name.clone())].into()),
                ..ObjectMeta::default()
            },
            type_: Some("kubenest.io/cluster-token".into()),
            data: Some(data),
            ..Secret::default()
        };
        let params = PatchParams::apply(field_managers::CONTROLLERS).force();
        secrets
            .patch(&secret_name, &params, &Patch::Apply(&secret))
            .await?;
        tracing::info!(version = cluster.spec.token_version, "cluster token minted");
    }
    // Only this controller's fields: heartbeats write capacity and health concurrently.
    let mut patch = serde_json::json!({ "status": {
        "clusterId": cluster_id,
        "tokenSecret": secret_name,
        "issuedTokenVersion": cluster.spec.token_version,
    }});
    if status
        .conditions
        .iter()
        .any(|c| c.type_ == crate::conditions::DELETION_BLOCKED)
    {
        let kept: Vec<&Condition> = status
            .conditions
            .iter()
            .filter(|c| c.type_ != crate::conditions::DELETION_BLOCKED)
            .collect();
        patch["status"]["conditions"] =
            serde_json::to_value(kept).map_err(|e| Error::Invalid(e.to_string()))?;
    }
    let unchanged = status.cluster_id.as_deref() == Some(cluster_id.as_str())
        && status.token_secret.as_deref() == Some(secret_name.as_str())
        && status.issued_token_version == Some(cluster.spec.token_version)
        && patch["status"].get("conditions").is_none();
    if !unchanged {
        Api::<Cluster>::namespaced(ctx.client.clone(), namespace)
            .patch_status(&name, &PatchParams::default(), &Patch::Merge(&patch))
            .await?;
    }
    Ok(Action::requeue(Duration::from_secs(300)))
}

async fn cleanup(cluster: &Cluster, ctx: &Context, namespace: &str) -> Result<Action, Error> {
    let name = cluster.name_any();
    let projects: Vec<String> = Api::<Project>::namespaced(ctx.client.clone(), namespace)
        .list(&ListParams::default())
        .await?
        .items
        .into_iter()
        .filter(|p| p.spec.cluster == name)
        .map(|p| p.name_any())
        .collect();
    if projects.is_empty() {
        return Ok(Action::await_change());
    }
    let mut status = cluster.status.clone().unwrap_or_default();
    let message = format!(
        "deletion waits until these projects are deleted: {}",
        projects.join(", ")
    );
    let blocked = status
        .conditions
        .iter()
        .any(|c| c.type_ == crate::conditions::DELETION_BLOCKED && c.message == message);
    if !blocked {
        status
            .conditions
            .retain(|c| c.type_ != crate::conditions::DELETION_BLOCKED);
        status.conditions.push(Condition {
            type_: crate::conditions::DELETION_BLOCKED.into(),
            status: "True".into(),
            reason: "ProjectsExist".into(),
            message,
            observed_generation: cluster.metadata.generation,
            last_transition_time: Time(k8s_openapi::jiff::Timestamp::now()),
        });
        patch_status(ctx, namespace, &name, &status).await?;
    }
    // Keeps the finalizer; retried until the projects are gone.
    Err(Error::InUse(projects.len()))
}

async fn patch_status(
    ctx: &Context,
    namespace: &str,
    name: &str,
    status: &ClusterStatus,
) -> Result<(), Error> {
    let patch = serde_json::json!({ "status": status });
    Api::<Cluster>::namespaced(ctx.client.clone(), namespace)
        .patch_status(name, &PatchParams::default(), &Patch::Merge(&patch))
        .await?;
    Ok(())
}

fn error_policy(_cluster: Arc<Cluster>, error: &Error, _ctx: Arc<Context>) -> Action {
    match error {
        Error::Invalid(reason) => {
            tracing::warn!(reason, "cluster cannot be reconciled until it changes");
            Action::await_change()
        }
        Error::Finalizer(inner)
            if matches!(
                **inner,
                kube::runtime::finalizer::Error::CleanupFailed(Error::InUse(_))
            ) =>
        {
            Action::requeue(Duration::from_secs(2))
        }
        other => {
            tracing::warn!(error = %other, "cluster reconcile failed; retrying");
            Action::requeue(Duration::from_secs(5))
        }
    }
}

/// Runs the controller until `shutdown` resolves.
pub async fn run(ctx: Context, shutdown: impl Future<Output = ()> + Send + Sync + 'static) {
    let clusters: Api<Cluster> = Api::all(ctx.client.clone());
    let projects: Api<Project> = Api::all(ctx.client.clone());
    Controller::new(clusters, watcher::Config::default())
        // A deleted project may unblock its cluster's deletion.
        .watches(projects, watcher::Config::default(), |project| {
            let namespace = project.namespace()?;
            Some(kube::runtime::reflector::ObjectRef::new(&project.spec.cluster).within(&namespace))
        })
        .graceful_shutdown_on(shutdown)
        .run(reconcile, error_policy, Arc::new(ctx))
        .for_each(|result| async move {
            if let Err(error) = result {
                tracing::debug!(%error, "reconcile");
            }
        })
        .await;
}

#[cfg(test)]
mod tests {
    use kubenest_crds::cluster::{ClusterSpec, ClusterState};

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
