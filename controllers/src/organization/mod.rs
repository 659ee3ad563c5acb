//! The Organization controller: gives each organization a namespace of its own on the
//! management cluster (recorded in its status) and binds its members' roles there, so kubectl
//! users get exactly the rights their kubenest role gives them.

mod desired;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::core::v1::Namespace;
use k8s_openapi::api::rbac::v1::RoleBinding;
use kube::ResourceExt;
use kube::api::{Api, Patch, PatchParams};
use kube::runtime::controller::{Action, Controller};
use kube::runtime::watcher;
use kubenest_crds::common::Role;
use kubenest_crds::names::{field_managers, labels};
use kubenest_crds::organization::Organization;

use crate::patch::merge_status;

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

async fn reconcile(org: Arc<Organization>, ctx: Arc<Context>) -> Result<Action, Error> {
    let namespace = namespace_of(&org.name_any())?;
    let desired = desired::desired(&org, &namespace)?;
    let params = PatchParams::apply(field_managers::CONTROLLERS).force();
    Api::<Namespace>::all(ctx.client.clone())
        .patch(&namespace, &params, &Patch::Apply(&desired.namespace))
        .await?;
    let role_bindings: Api<RoleBinding> = Api::namespaced(ctx.client.clone(), &namespace);
    for binding in &desired.role_bindings {
        let name = binding.metadata.name.clone().unwrap_or_default();
        role_bindings
            .patch(&name, &params, &Patch::Apply(binding))
            .await?;
    }
    if let Some(status) = desired::status(&org, &namespace) {
        let api = Api::<Organization>::all(ctx.client.clone());
        merge_status(&api, &org.name_any(), &status).await?;
    }
    Ok(Action::requeue(Duration::from_secs(300)))
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
        .run(
            crate::metrics::metrics()
                .reconciles
                .measure("organization", reconcile),
            error_policy,
            Arc::new(Context { client }),
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
