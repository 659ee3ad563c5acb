//! The Organization controller: gives each organization a namespace of its own on the
//! management cluster (recorded in its status) and binds its members' roles there, so kubectl
//! users get exactly the rights their kubenest role gives them.

use kubenest_crds::names::{field_managers, labels};
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::core::v1::Namespace;
use k8s_openapi::api::rbac::v1::{RoleBinding, RoleRef, Subject};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use kube::api::{Api, Patch, PatchParams};
use kube::core::ObjectMeta;
use kube::runtime::controller::{Action, Controller};
use kube::runtime::watcher;
use kube::{Resource, ResourceExt};
use kubenest_crds::common::{Role, conditions};
use kubenest_crds::organization::{Organization, OrganizationStatus};

use crate::rbac::cluster_role_name;

/// What stops a reconcile; the category decides the retry policy.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The object cannot be reconciled as written; retrying will not help until it changes.
    #[error("invalid: {0}")]
    Invalid(String),
    #[error("kubernetes: {0}")]
    Kube(#[from] kube::Error),
}

/// Shared by every reconcile.
#[derive(Clone)]
pub struct Context {
    pub client: kube::Client,
}

impl std::fmt::Debug for Context {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Context").finish_non_exhaustive()
    }
}

/// The namespace of an organization ([`kubenest_domain::names::namespace_of`]).
pub fn namespace_of(org: &str) -> Result<String, Error> {
    kubenest_domain::names::namespace_of(org).map_err(|e| Error::Invalid(e.to_string()))
}

/// Subjects per role, from the members list (pure).
pub fn bindings(org: &Organization) -> BTreeMap<Role, Vec<String>> {
    let mut by_role: BTreeMap<Role, Vec<String>> = [Role::Admin, Role::Member, Role::Viewer]
        .into_iter()
        .map(|r| (r, Vec::new()))
        .collect();
    for member in &org.spec.members {
        by_role
            .entry(member.role)
            .or_default()
            .push(member.user.clone());
    }
    for users in by_role.values_mut() {
        users.sort();
        users.dedup();
    }
    by_role
}

fn binding_name(role: Role) -> String {
    format!(
        "kubenest-org-{}",
        cluster_role_name(role).trim_start_matches("kubenest-")
    )
}

#[tracing::instrument(skip(org, ctx), fields(org = %org.name_any()))]
async fn reconcile(org: Arc<Organization>, ctx: Arc<Context>) -> Result<Action, Error> {
    let name = org.name_any();
    let namespace = namespace_of(&name)?;
    let owner = org
        .controller_owner_ref(&())
        .ok_or_else(|| Error::Invalid("organization without uid".into()))?;
    let labels: BTreeMap<String, String> = [(labels::ORGANIZATION.to_owned(), name.clone())].into();
    let params = PatchParams::apply(field_managers::CONTROLLERS).force();

    let ns = Namespace {
        metadata: ObjectMeta {
            name: Some(namespace.clone()),
            labels: Some(labels.clone()),
            owner_references: Some(vec![owner]),
            ..ObjectMeta::default()
        },
        ..Namespace::default()
    };
    Api::<Namespace>::all(ctx.client.clone())
        .patch(&namespace, &params, &Patch::Apply(&ns))
        .await?;

    let role_bindings: Api<RoleBinding> = Api::namespaced(ctx.client.clone(), &namespace);
    for (role, users) in bindings(&org) {
        let binding = RoleBinding {
            metadata: ObjectMeta {
                name: Some(binding_name(role)),
                namespace: Some(namespace.clone()),
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
        };
        role_bindings
            .patch(&binding_name(role), &params, &Patch::Apply(&binding))
            .await?;
    }

    update_status(&org, &ctx, &namespace).await?;
    Ok(Action::requeue(Duration::from_secs(300)))
}

/// Writes status only when it differs (ignoring timestamps), so the controller never wakes itself.
async fn update_status(org: &Organization, ctx: &Context, namespace: &str) -> Result<(), Error> {
    let current = org.status.clone().unwrap_or_default();
    let ready = current
        .conditions
        .iter()
        .find(|c| c.type_ == conditions::READY);
    let unchanged = current.namespace.as_deref() == Some(namespace)
        && current.phase.as_deref() == Some("Ready")
        && ready.is_some_and(|c| {
            c.status == "True" && c.observed_generation == org.metadata.generation
        });
    if unchanged {
        return Ok(());
    }
    let status = OrganizationStatus {
        namespace: Some(namespace.to_owned()),
        phase: Some("Ready".into()),
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
    };
    let patch = serde_json::json!({ "status": status });
    Api::<Organization>::all(ctx.client.clone())
        .patch_status(
            &org.name_any(),
            &PatchParams::default(),
            &Patch::Merge(&patch),
        )
        .await?;
    Ok(())
}

fn error_policy(_org: Arc<Organization>, error: &Error, _ctx: Arc<Context>) -> Action {
    match error {
        Error::Invalid(reason) => {
            tracing::warn!(reason, "organization cannot be reconciled until it changes");
            Action::await_change()
        }
        Error::Kube(e) => {
            tracing::warn!(error = %e, "organization reconcile failed; retrying");
            Action::requeue(Duration::from_secs(5))
        }
    }
}

/// Runs the controller until `shutdown` resolves.
pub async fn run(client: kube::Client, shutdown: impl Future<Output = ()> + Send + Sync + 'static) {
    let orgs: Api<Organization> = Api::all(client.clone());
    let namespaces: Api<Namespace> = Api::all(client.clone());
    Controller::new(orgs, watcher::Config::default())
        .owns(
            namespaces,
            watcher::Config::default().labels(labels::ORGANIZATION),
        )
        .graceful_shutdown_on(shutdown)
        .run(reconcile, error_policy, Arc::new(Context { client }))
        .for_each(|result| async move {
            if let Err(error) = result {
                tracing::debug!(%error, "reconcile");
            }
        })
        .await;
}

#[cfg(test)]
mod tests {
    use kubenest_crds::common::Member;
    use kubenest_crds::organization::OrganizationSpec;

    use super::*;

    #[test]
    fn members_are_grouped_by_role_without_duplicates() {
        let member = |user: &str, role| Member {
            user: user.into(),
            role,
        };
        let org = Organization::new(
            "acme",
            OrganizationSpec {
                display_name: "ACME".into(),
                members: vec![
                    member("bob", Role::Member),
                    member("alice", Role::Admin),
                    member("bob", Role::Member),
                    member("carol", Role::Viewer),
                ],
            },
        );
        let b = bindings(&org);
        assert_eq!(b[&Role::Admin], ["alice"]);
        assert_eq!(b[&Role::Member], ["bob"]);
        assert_eq!(b[&Role::Viewer], ["carol"]);
        assert_eq!(namespace_of("acme").unwrap(), "org-acme");
        assert!(matches!(
            namespace_of(&"x".repeat(60)),
            Err(Error::Invalid(_))
        ));
    }
}
