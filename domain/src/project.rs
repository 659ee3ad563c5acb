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

#[cfg(test)]
mod tests {
    use super::*;

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
