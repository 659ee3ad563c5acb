//! What an Organization asks for (pure): its namespace, the role bindings of its members and
//! the status that says they are in place.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Namespace;
use k8s_openapi::api::rbac::v1::{RoleBinding, RoleRef, Subject};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use kube::core::ObjectMeta;
use kube::{Resource, ResourceExt};
use kubenest_crds::common::{Role, conditions};
use kubenest_crds::names::labels;
use kubenest_crds::organization::{Organization, OrganizationStatus};

use super::{Error, bindings};
use crate::rbac::cluster_role_name;

/// The objects an organization owns on the management cluster.
#[derive(Debug, Clone)]
pub struct Desired {
    pub namespace: Namespace,
    pub role_bindings: Vec<RoleBinding>,
}

fn binding_name(role: Role) -> String {
    format!(
        "kubenest-org-{}",
        cluster_role_name(role).trim_start_matches("kubenest-")
    )
}

/// The namespace `namespace` of `org` (owned by it) and one role binding per role.
pub fn desired(org: &Organization, namespace: &str) -> Result<Desired, Error> {
    let owner = org
        .controller_owner_ref(&())
        .ok_or_else(|| Error::Invalid("organization without uid".into()))?;
    let labels: BTreeMap<String, String> =
        [(labels::ORGANIZATION.to_owned(), org.name_any())].into();
    let ns = Namespace {
        metadata: ObjectMeta {
            name: Some(namespace.to_owned()),
            labels: Some(labels.clone()),
            owner_references: Some(vec![owner]),
            ..ObjectMeta::default()
        },
        ..Namespace::default()
    };
    let role_bindings = bindings(org)
        .into_iter()
        .map(|(role, users)| RoleBinding {
            metadata: ObjectMeta {
                name: Some(binding_name(role)),
                namespace: Some(namespace.to_owned()),
                labels: Some(labels.clone()),
                ..ObjectMeta::default()
            },
            role_ref: RoleRef {
                api_group: "rbac.authorization.k8s.io".into(),
                kind: "ClusterRole".into(),
                name: cluster_role_name(role).into(),
            },
            subjects: Some(
                users
                    .into_iter()
                    .map(|user| Subject {
                        api_group: Some("rbac.authorization.k8s.io".into()),
                        kind: "User".into(),
                        name: user,
                        namespace: None,
                    })
                    .collect(),
            ),
        })
        .collect();
    Ok(Desired {
        namespace: ns,
        role_bindings,
    })
}

/// The status saying `namespace` and the bindings are in place, or `None` when it already says
/// so (timestamps aside), so the controller never wakes itself.
pub fn status(org: &Organization, namespace: &str) -> Option<OrganizationStatus> {
    let current = org.status.clone().unwrap_or_default();
    let ready = current
        .conditions
        .iter()
        .find(|c| c.type_ == conditions::READY);
    let unchanged = current.namespace.as_deref() == Some(namespace)
        && current.phase.as_deref() == Some("Ready")
        && current.observed_generation == org.metadata.generation
        && ready.is_some_and(|c| {
            c.status == "True" && c.observed_generation == org.metadata.generation
        });
    if unchanged {
        return None;
    }
    Some(OrganizationStatus {
        namespace: Some(namespace.to_owned()),
        phase: Some("Ready".into()),
        observed_generation: org.metadata.generation,
        conditions: vec![Condition {
            type_: conditions::READY.into(),
            status: "True".into(),
            reason: "NamespaceReady".into(),
            message: format!("namespace {namespace} and role bindings are in place"),
            observed_generation: org.metadata.generation,
            last_transition_time: ready
                .filter(|c| c.status == "True")
                .map(|c| c.last_transition_time.clone())
                .unwrap_or_else(|| Time(k8s_openapi::jiff::Timestamp::now())),
        }],
    })
}

#[cfg(test)]
mod tests {
    use kubenest_crds::common::Member;
    use kubenest_crds::organization::OrganizationSpec;

    use super::*;

    fn org() -> Organization {
        let mut org = Organization::new(
            "acme",
            OrganizationSpec {
                display_name: "ACME".into(),
                budget: None,
                members: vec![Member {
                    user: "alice".into(),
                    user_id: Some("id-alice".into()),
                    role: Role::Admin,
                }],
                verification: None,
            },
        );
        org.metadata.uid = Some("uid-acme".into());
        org.metadata.generation = Some(1);
        org
    }

    #[test]
    fn an_organization_owns_its_labelled_namespace_and_one_binding_per_role() {
        let owned = desired(&org(), "org-acme").unwrap();
        assert_eq!(
            owned.namespace.metadata.labels.unwrap()[labels::ORGANIZATION],
            "acme"
        );
        assert_eq!(owned.role_bindings.len(), 3);
        let admin = &owned.role_bindings[0];
        assert_eq!(admin.metadata.name.as_deref(), Some("kubenest-org-admin"));
        assert_eq!(
            admin.subjects.as_ref().unwrap()[0].name,
            "kubenest:id-alice"
        );
        let mut anonymous = org();
        anonymous.metadata.uid = None;
        assert!(matches!(
            desired(&anonymous, "org-acme"),
            Err(Error::Invalid(_))
        ));
    }

    #[test]
    fn the_status_is_written_until_it_says_ready_for_this_generation() {
        let mut org = org();
        let written = status(&org, "org-acme").unwrap();
        assert_eq!(written.phase.as_deref(), Some("Ready"));
        assert_eq!(written.observed_generation, Some(1));
        org.status = Some(written);
        assert!(status(&org, "org-acme").is_none());
        org.metadata.generation = Some(2);
        let rewritten = status(&org, "org-acme").unwrap();
        assert_eq!(rewritten.observed_generation, Some(2));
    }
}
