//! The namespace boundary: the agent writes an App's, an addon's or a Secret's objects only into
//! the namespace of the project they belong to, and refuses anything else with a [`Refusal`]
//! that names the reason and the field.

use k8s_openapi::api::core::v1::Namespace;
use kube::ResourceExt;
use kube::api::Api;
use kubenest_contracts::RejectReason;
use kubenest_crds::names::labels;

use crate::apply::Applier;

/// Why a command was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    pub reason: RejectReason,
    pub message: String,
    /// JSON pointer into the payload.
    pub field: Option<String>,
}

impl Refusal {
    /// A refusal for `reason`, naming `field` when one part of the payload is at fault.
    pub fn new(reason: RejectReason, message: impl Into<String>, field: Option<&str>) -> Self {
        Self {
            reason,
            message: message.into(),
            field: field.map(str::to_owned),
        }
    }

    /// The cluster refused a read or write the command needs.
    pub fn internal(error: impl std::fmt::Display) -> Self {
        Self::new(
            RejectReason::Internal,
            format!("the cluster refused the write: {error}"),
            None,
        )
    }
}

/// Checks that `namespace` is the namespace of project `project_id` on this cluster. The
/// agent's cache of project namespaces answers; a refusal is confirmed with the API server
/// first, so a namespace created a moment ago is never refused because the cache has not seen
/// it yet. (A namespace handed to another project is seen by the cache within its watch's
/// delay, as every pass of the App's StackDeploy checks it again.)
pub async fn check_namespace(
    applier: &Applier,
    namespace: &str,
    project_id: &str,
    field: &str,
) -> Result<(), Refusal> {
    let cached = applier.namespace(namespace);
    if boundary(cached.as_deref(), namespace, project_id, field).is_ok() {
        return Ok(());
    }
    let found = Api::<Namespace>::all(applier.client().clone())
        .get_opt(namespace)
        .await
        .map_err(Refusal::internal)?;
    boundary(found.as_ref(), namespace, project_id, field)
}

/// Whether `found` (namespace `namespace`, if it exists) is project `project_id`'s (pure).
pub fn boundary(
    found: Option<&Namespace>,
    namespace: &str,
    project_id: &str,
    field: &str,
) -> Result<(), Refusal> {
    let owner = found.and_then(|ns| ns.labels().get(labels::PROJECT_ID).cloned());
    match owner {
        Some(owner) if owner == project_id => Ok(()),
        Some(_) => Err(Refusal::new(
            RejectReason::NamespaceViolation,
            format!("namespace {namespace} belongs to another project"),
            Some(field),
        )),
        None if found.is_some() => Err(Refusal::new(
            RejectReason::NamespaceViolation,
            format!("namespace {namespace} is not a kubenest project's namespace"),
            Some(field),
        )),
        None => Err(Refusal::new(
            RejectReason::NamespaceViolation,
            format!("namespace {namespace} does not exist; project {project_id} is not ready here"),
            Some(field),
        )),
    }
}

/// A namespace the agent manages (a project's): secrets are never written anywhere else.
pub async fn check_project_namespace(
    client: &kube::Client,
    namespace: &str,
) -> Result<(), Refusal> {
    let found = Api::<Namespace>::all(client.clone())
        .get_opt(namespace)
        .await
        .map_err(Refusal::internal)?;
    if found.is_some_and(|ns| ns.labels().contains_key(labels::PROJECT_ID)) {
        return Ok(());
    }
    Err(Refusal::new(
        RejectReason::NamespaceViolation,
        format!("namespace {namespace} is not a kubenest project's namespace"),
        Some("/target/namespace"),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn namespace(project: Option<&str>) -> Namespace {
        let mut ns = Namespace::default();
        ns.metadata.name = Some("shop".into());
        ns.metadata.labels =
            project.map(|p| [(labels::PROJECT_ID.to_owned(), p.to_owned())].into());
        ns
    }

    #[test]
    fn only_the_projects_own_namespace_passes_the_boundary() {
        let field = "/app/namespace";
        assert_eq!(
            boundary(Some(&namespace(Some("p1"))), "shop", "p1", field),
            Ok(())
        );
        for found in [Some(namespace(Some("p2"))), Some(namespace(None)), None] {
            let refusal = boundary(found.as_ref(), "shop", "p1", field).unwrap_err();
            assert_eq!(refusal.reason, RejectReason::NamespaceViolation);
            assert_eq!(refusal.field.as_deref(), Some(field));
        }
    }
}
