//! Projects: whether a project's namespace is its own.

use kubenest_crds::project::ProjectStatus;

/// Whether the agent ever took the project's namespace (accepted a `project.ensure`, or
/// reported the namespace as this project's). A project the agent refused — its namespace
/// exists and is not kubenest's, or belongs to another project — never owned it: deleting the
/// project must not wait for that namespace, let alone remove it.
pub fn owns_namespace(status: &ProjectStatus) -> bool {
    status.ensured_generation.is_some()
        || matches!(
            status.cluster_phase.as_deref(),
            Some("Ready" | "Terminating")
        )
}

/// Whether `project` holds its namespace against another project naming it: a project being
/// deleted that never owned its namespace (the agent refused it) holds nothing, so a new
/// project may take the namespace at once rather than wait for the refused one to go.
pub fn holds_namespace(project: &kubenest_crds::project::Project) -> bool {
    let deleting = project.metadata.deletion_timestamp.is_some();
    let owned = project.status.as_ref().is_some_and(owns_namespace);
    !deleting || owned
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_refused_project_being_deleted_holds_no_namespace() {
        use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
        use kubenest_crds::project::{Project, ProjectSpec};
        let mut project = Project::new(
            "p",
            ProjectSpec {
                cluster: "east".into(),
                namespace: "legacy".into(),
                registry_secret: None,
                ingress_ca: false,
                members: vec![],
                progress_deadline_seconds: 600,
                pod_security: Default::default(),
                quota: None,
                defaults: None,
                network: None,
            },
        );
        project.status = Some(ProjectStatus {
            cluster_phase: Some("Failed".into()),
            ..ProjectStatus::default()
        });
        assert!(
            holds_namespace(&project),
            "refused but not deleted: still named"
        );
        project.metadata.deletion_timestamp = Some(Time(k8s_openapi::jiff::Timestamp::UNIX_EPOCH));
        assert!(!holds_namespace(&project), "refused and being deleted");
        project.status.as_mut().unwrap().cluster_phase = Some("Terminating".into());
        assert!(holds_namespace(&project), "owned and draining");
    }

    #[test]
    fn only_a_namespace_the_agent_took_is_the_projects() {
        let status = |phase: Option<&str>, ensured: Option<i64>| ProjectStatus {
            cluster_phase: phase.map(str::to_owned),
            ensured_generation: ensured,
            ..ProjectStatus::default()
        };
        assert!(!owns_namespace(&status(None, None)), "never sent");
        assert!(!owns_namespace(&status(Some("Failed"), None)), "refused");
        assert!(owns_namespace(&status(Some("Ready"), None)));
        assert!(owns_namespace(&status(Some("Terminating"), None)));
        assert!(
            owns_namespace(&status(Some("Failed"), Some(1))),
            "taken, then failed"
        );
        assert!(owns_namespace(&status(None, Some(1))));
    }
}
