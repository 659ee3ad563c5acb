//! Where an object in an organization's namespace goes: its organization, its Project and that
//! project's Cluster (with the cluster's id), looked up in the controllers' caches.

use k8s_openapi::api::core::v1::Namespace;
use kube::api::Api;
use kube::runtime::reflector::ObjectRef;
use kube::{Resource, ResourceExt};
use kubenest_crds::project::{Project, ProjectPhase};

use crate::caches::Caches;
use kubenest_crds::names::labels;

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
    Ok(ns.and_then(|ns| ns.labels().get(labels::ORGANIZATION).cloned()))
}

/// The organization owning `namespace`, from the cached organization namespaces.
pub fn org_in(caches: &Caches, namespace: &str) -> Option<String> {
    caches
        .namespaces
        .get(&ObjectRef::new(namespace))?
        .labels()
        .get(labels::ORGANIZATION)
        .cloned()
}

/// The id of Cluster `name` in `namespace`, if it exists and has one.
pub fn cluster(caches: &Caches, namespace: &str, name: &str) -> Result<String, Unplaced> {
    let cluster = caches
        .clusters
        .get(&ObjectRef::new(name).within(namespace))
        .ok_or_else(|| Unplaced::ClusterNotFound(name.to_owned()))?;
    cluster
        .status
        .as_ref()
        .and_then(|s| s.cluster_id.clone())
        .ok_or_else(|| Unplaced::ClusterNotRegistered(name.to_owned()))
}

/// Resolves project `project` in `namespace` from the caches. With `ready`, the project must be
/// Ready (its namespace confirmed by the agent).
pub fn place(
    caches: &Caches,
    namespace: &str,
    project: &str,
    ready: bool,
) -> Result<Placement, Unplaced> {
    let org_id = org_in(caches, namespace)
        .ok_or_else(|| Unplaced::NotInOrganization(namespace.to_owned()))?;
    let found = caches
        .projects
        .get(&ObjectRef::new(project).within(namespace))
        .ok_or_else(|| Unplaced::ProjectNotFound(project.to_owned()))?;
    let phase = found.status.as_ref().map(|s| s.phase).unwrap_or_default();
    if ready && (phase != ProjectPhase::Ready || found.meta().deletion_timestamp.is_some()) {
        return Err(Unplaced::ProjectNotReady(project.to_owned()));
    }
    let cluster_id = cluster(caches, namespace, &found.spec.cluster)?;
    Ok(Placement {
        org_id,
        project_id: found.uid().unwrap_or_default(),
        cluster_name: found.spec.cluster.clone(),
        namespace: found.spec.namespace.clone(),
        cluster_id,
        project: (*found).clone(),
    })
}
