//! Where an object in an organization's namespace goes: its organization, its Project and that
//! project's Cluster (with the cluster's id), looked up on each reconcile from the API server.

use k8s_openapi::api::core::v1::Namespace;
use kube::api::Api;
use kube::{Resource, ResourceExt};
use kubenest_crds::cluster::Cluster;
use kubenest_crds::project::{Project, ProjectPhase};

use crate::organization::ORG_LABEL;

/// A resolved destination.
#[derive(Debug, Clone)]
pub struct Placement {
    /// The organization's name (the `org_id` of tokens, frames and history).
    pub org_id: String,
    pub project: Project,
    /// The Project's uid.
    pub project_id: String,
    pub cluster_name: String,
    /// The Cluster's uid, as its agent's token carries it.
    pub cluster_id: String,
    /// The project's namespace on the workload cluster.
    pub namespace: String,
}

/// Why an object cannot be placed (yet). Each is a condition reason.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Unplaced {
    NotInOrganization(String),
    ProjectNotFound(String),
    ProjectNotReady(String),
    ClusterNotFound(String),
    ClusterNotRegistered(String),
}

impl Unplaced {
    /// The condition reason.
    pub fn reason(&self) -> &'static str {
        match self {
            Self::NotInOrganization(_) => "NotInOrganization",
            Self::ProjectNotFound(_) => "ProjectNotFound",
            Self::ProjectNotReady(_) => "ProjectNotReady",
            Self::ClusterNotFound(_) => "ClusterNotFound",
            Self::ClusterNotRegistered(_) => "ClusterNotRegistered",
        }
    }

    /// The condition message.
    pub fn message(&self) -> String {
        match self {
            Self::NotInOrganization(ns) => {
                format!("namespace {ns} belongs to no organization")
            }
            Self::ProjectNotFound(p) => format!("project {p:?} does not exist in this namespace"),
            Self::ProjectNotReady(p) => {
                format!("project {p:?} is not Ready yet (its namespace is not confirmed)")
            }
            Self::ClusterNotFound(c) => format!("cluster {c:?} does not exist in this namespace"),
            Self::ClusterNotRegistered(c) => format!("cluster {c:?} has no id yet"),
        }
    }
}

/// The organization owning `namespace`, from the namespace's label.
pub async fn org_of(client: &kube::Client, namespace: &str) -> Result<Option<String>, kube::Error> {
    let ns = Api::<Namespace>::all(client.clone())
        .get_opt(namespace)
        .await?;
    Ok(ns.and_then(|ns| ns.labels().get(ORG_LABEL).cloned()))
}

/// The id of Cluster `name` in `namespace`, if it exists and has one.
pub async fn cluster(
    client: &kube::Client,
    namespace: &str,
    name: &str,
) -> Result<Result<String, Unplaced>, kube::Error> {
    let cluster = Api::<Cluster>::namespaced(client.clone(), namespace)
        .get_opt(name)
        .await?;
    Ok(match cluster {
        None => Err(Unplaced::ClusterNotFound(name.to_owned())),
        Some(c) => c
            .status
            .and_then(|s| s.cluster_id)
            .ok_or_else(|| Unplaced::ClusterNotRegistered(name.to_owned())),
    })
}

/// Resolves project `project` in `namespace`. With `ready`, the project must be Ready (its
/// namespace confirmed by the agent).
pub async fn place(
    client: &kube::Client,
    namespace: &str,
    project: &str,
    ready: bool,
) -> Result<Result<Placement, Unplaced>, kube::Error> {
    let Some(org_id) = org_of(client, namespace).await? else {
        return Ok(Err(Unplaced::NotInOrganization(namespace.to_owned())));
    };
    let Some(found) = Api::<Project>::namespaced(client.clone(), namespace)
        .get_opt(project)
        .await?
    else {
        return Ok(Err(Unplaced::ProjectNotFound(project.to_owned())));
    };
    let phase = found.status.as_ref().map(|s| s.phase).unwrap_or_default();
    if ready && (phase != ProjectPhase::Ready || found.meta().deletion_timestamp.is_some()) {
        return Ok(Err(Unplaced::ProjectNotReady(project.to_owned())));
    }
    let cluster_id = match cluster(client, namespace, &found.spec.cluster).await? {
        Ok(id) => id,
        Err(unplaced) => return Ok(Err(unplaced)),
    };
    Ok(Ok(Placement {
        org_id,
        project_id: found.uid().unwrap_or_default(),
        cluster_name: found.spec.cluster.clone(),
        namespace: found.spec.namespace.clone(),
        cluster_id,
        project: found,
    }))
}
