//! The Project controller's decision for a project being deleted (pure): wait for its
//! dependents, then have the agent remove its namespace, if it ever got one. A project the
//! agent refused (its namespace exists and is not kubenest's, or is another project's) never
//! owned a namespace and goes at once.

use std::time::Duration;

use kubenest_contracts as wire;
use kubenest_crds::project::{Project, ProjectPhase, ProjectStatus};

use crate::conditions::{self, DELETION_BLOCKED};
use crate::intents::{ObjectKey, Sent};
use crate::placement::{Placement, Unplaced};
use kubenest_domain::project::owns_namespace;

/// What a reconcile of a project being deleted knows.
#[derive(Debug)]
pub struct DeletionFacts<'a> {
    pub project: &'a Project,
    pub key: &'a ObjectKey,
    pub old: &'a ProjectStatus,
    /// The Apps and AddonInstances still in the project (`app/NAME`, `addoninstance/NAME`).
    pub dependents: Vec<String>,
    pub placement: Result<Placement, Unplaced>,
}

/// What a reconcile of a project being deleted does.
#[derive(Debug)]
pub enum Deletion {
    /// Objects still use the project: write `status` (saying which) and look again after
    /// `wait`.
    Blocked {
        status: ProjectStatus,
        wait: Duration,
    },
    /// Nothing of the project is left on a cluster: the finalizer can go.
    Done,
    /// Have the agent remove the namespace: send `project.delete` (when due), then write
    /// `status` with what the deletion waits for.
    Delete {
        status: ProjectStatus,
        placement: Box<Placement>,
        command: wire::ProjectDelete,
        sent: Sent,
        routed: String,
    },
}

/// What a project being deleted needs.
pub fn decide_deletion(facts: &DeletionFacts<'_>) -> Deletion {
    let project = facts.project;
    let mut status = facts.old.clone();
    if !facts.dependents.is_empty() {
        let message = format!(
            "deletion waits until these are deleted: {}",
            facts.dependents.join(", ")
        );
        conditions::set(
            &mut status.conditions,
            DELETION_BLOCKED,
            true,
            "DependentsExist",
            message,
            project.metadata.generation,
        );
        return Deletion::Blocked {
            status,
            wait: Duration::from_secs(2),
        };
    }
    // Never the project's on the cluster (it lost a namespace conflict, or the agent refused
    // the namespace): nothing to remove.
    if !owns_namespace(facts.old) || facts.old.cluster_phase.as_deref() == Some("Deleted") {
        return Deletion::Done;
    }
    let Ok(placement) = &facts.placement else {
        return Deletion::Done;
    };
    status.phase = ProjectPhase::Terminating;
    Deletion::Delete {
        status,
        placement: Box::new(placement.clone()),
        command: wire::ProjectDelete {
            project_id: wire::Id::new(&facts.key.uid),
            namespace: wire::Name::new(&project.spec.namespace),
        },
        sent: Sent::ProjectDelete {
            project: facts.key.clone(),
        },
        routed: format!(
            "project.delete sent; waiting for the agent to remove namespace {}",
            project.spec.namespace
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::project::fixtures::{key, placement, project};

    #[test]
    fn deletion_waits_for_dependents_and_removes_only_a_claimed_namespace() {
        let web = project("web", "shop", 200, true);
        let key = key();
        let old = web.status.clone().unwrap_or_default();
        let blocked = DeletionFacts {
            project: &web,
            key: &key,
            old: &old,
            dependents: vec!["app/shop".into()],
            placement: Ok(placement(&web)),
        };
        let Deletion::Blocked { status, wait } = decide_deletion(&blocked) else {
            panic!("an App still uses the project");
        };
        let condition = conditions::get(&status.conditions, DELETION_BLOCKED).unwrap();
        assert_eq!(condition.reason, "DependentsExist");
        assert_eq!(
            condition.message,
            "deletion waits until these are deleted: app/shop"
        );
        assert_eq!(wait, Duration::from_secs(2));

        let free = DeletionFacts {
            dependents: vec![],
            ..blocked
        };
        let Deletion::Delete {
            status, command, ..
        } = decide_deletion(&free)
        else {
            panic!("the claimed namespace is removed");
        };
        assert_eq!(status.phase, ProjectPhase::Terminating);
        assert_eq!(command.namespace.as_str(), "shop");

        let unclaimed = project("web", "shop", 200, false);
        let never = DeletionFacts {
            project: &unclaimed,
            old: &ProjectStatus::default(),
            ..free
        };
        assert!(matches!(decide_deletion(&never), Deletion::Done));

        // The agent refused the namespace (it exists and is not kubenest's).
        let refused_status = ProjectStatus {
            cluster_phase: Some("Failed".into()),
            cluster_message: "namespace kube-system already exists and is not managed by kubenest"
                .into(),
            ..ProjectStatus::default()
        };
        let refused = DeletionFacts {
            old: &refused_status,
            ..never
        };
        assert!(matches!(decide_deletion(&refused), Deletion::Done));
    }
}
