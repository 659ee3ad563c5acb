//! The Organization controller: gives each organization a namespace of its own on the
//! management cluster (recorded in its status) and binds its members' roles there, so kubectl
//! users get exactly the rights their kubenest role gives them.

mod desired;
pub mod scopes;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::core::v1::Namespace;
use k8s_openapi::api::rbac::v1::{Role as KubeRole, RoleBinding};
use kube::ResourceExt;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams};
use kube::runtime::controller::{Action, Controller};
use kube::runtime::reflector::ObjectRef;
use kube::runtime::watcher;
use kubenest_crds::common::Role;
use kubenest_crds::names::{field_managers, labels};
use kubenest_crds::organization::Organization;
use kubenest_crds::{AddonInstance, App, Cluster, Project};

use crate::patch::merge_status;
use crate::plane::Plane;

pub use crate::reconcile::Error;
use crate::reconcile::error_policy;

/// The namespace of an organization ([`kubenest_domain::names::namespace_of`]).
pub fn namespace_of(org: &str) -> Result<String, Error> {
    kubenest_domain::names::namespace_of(org).map_err(|e| Error::Invalid(e.to_string()))
}

/// Kubernetes subjects per role, from the members list (pure): each member with a user id is the
/// Kubernetes user `kubenest:<id>`; a member without one binds nobody.
pub fn bindings(org: &Organization) -> BTreeMap<Role, Vec<String>> {
    by_role(&org.spec.members)
}

/// Kubernetes user names per role of a members list (pure), every role present.
pub fn by_role(members: &[kubenest_crds::common::Member]) -> BTreeMap<Role, Vec<String>> {
    let mut by_role: BTreeMap<Role, Vec<String>> = [Role::Admin, Role::Member, Role::Viewer]
        .into_iter()
        .map(|r| (r, Vec::new()))
        .collect();
    for member in members {
        if let Some(id) = &member.user_id {
            by_role
                .entry(member.role)
                .or_default()
                .push(kubenest_crds::common::kubernetes_user(id));
        }
    }
    for users in by_role.values_mut() {
        users.sort();
        users.dedup();
    }
    by_role
}

async fn reconcile(org: Arc<Organization>, plane: Arc<Plane>) -> Result<Action, Error> {
    let namespace = namespace_of(&org.name_any())?;
    let desired = desired::desired(&org, &namespace)?;
    let params = PatchParams::apply(field_managers::CONTROLLERS).force();
    Api::<Namespace>::all(plane.client.clone())
        .patch(&namespace, &params, &Patch::Apply(&desired.namespace))
        .await?;
    let role_bindings: Api<RoleBinding> = Api::namespaced(plane.client.clone(), &namespace);
    for binding in &desired.role_bindings {
        let name = binding.metadata.name.clone().unwrap_or_default();
        role_bindings
            .patch(&name, &params, &Patch::Apply(binding))
            .await?;
    }
    scope_bindings(&plane.client, &org.name_any(), &namespace, &params).await?;
    if let Some(status) = desired::status(&org, &namespace) {
        let api = Api::<Organization>::all(plane.client.clone());
        merge_status(&api, &org.name_any(), &status).await?;
    }
    Ok(Action::requeue(Duration::from_secs(300)))
}

/// Applies the Roles and RoleBindings of cluster- and project-scope memberships and deletes
/// those of memberships that are gone.
async fn scope_bindings(
    client: &kube::Client,
    org: &str,
    namespace: &str,
    params: &PatchParams,
) -> Result<(), Error> {
    let all = ListParams::default();
    let clusters = Api::<Cluster>::namespaced(client.clone(), namespace)
        .list(&all)
        .await?
        .items;
    let projects = Api::<Project>::namespaced(client.clone(), namespace)
        .list(&all)
        .await?
        .items;
    let apps = Api::<App>::namespaced(client.clone(), namespace)
        .list(&all)
        .await?
        .items;
    let addons = Api::<AddonInstance>::namespaced(client.clone(), namespace)
        .list(&all)
        .await?
        .items;
    let objects = scopes::Objects {
        clusters: &clusters,
        projects: &projects,
        apps: &apps,
        addons: &addons,
    };
    let wanted = scopes::scope_roles(namespace, org, &objects);
    let roles: Api<KubeRole> = Api::namespaced(client.clone(), namespace);
    let bindings: Api<RoleBinding> = Api::namespaced(client.clone(), namespace);
    let mut names = std::collections::BTreeSet::new();
    for (role, binding) in &wanted {
        let name = role.metadata.name.clone().unwrap_or_default();
        roles.patch(&name, params, &Patch::Apply(role)).await?;
        bindings
            .patch(&name, params, &Patch::Apply(binding))
            .await?;
        names.insert(name);
    }
    let ours = ListParams::default().labels(scopes::SCOPE_LABEL);
    for binding in bindings.list(&ours).await?.items {
        let name = binding.name_any();
        if !names.contains(&name) {
            bindings.delete(&name, &DeleteParams::default()).await?;
        }
    }
    for role in roles.list(&ours).await?.items {
        let name = role.name_any();
        if !names.contains(&name) {
            roles.delete(&name, &DeleteParams::default()).await?;
        }
    }
    Ok(())
}

/// The organization an object in an organization's namespace belongs to.
fn org_of<K: ResourceExt>(object: K) -> Option<ObjectRef<Organization>> {
    let namespace = object.namespace()?;
    let org = namespace.strip_prefix("org-")?;
    Some(ObjectRef::new(org))
}

/// Runs the controller until `shutdown` resolves.
pub async fn run(plane: Arc<Plane>, shutdown: impl Future<Output = ()> + Send + Sync + 'static) {
    let client = plane.client.clone();
    let orgs: Api<Organization> = Api::all(client.clone());
    let namespaces: Api<Namespace> = Api::all(client.clone());
    let config = watcher::Config::default;
    Controller::new(orgs, config())
        .owns(namespaces, config().labels(labels::ORGANIZATION))
        // Scope roles name the objects each membership reaches.
        .watches(Api::<Cluster>::all(client.clone()), config(), org_of)
        .watches(Api::<Project>::all(client.clone()), config(), org_of)
        .watches(Api::<App>::all(client.clone()), config(), org_of)
        .watches(Api::<AddonInstance>::all(client.clone()), config(), org_of)
        // Apps change status often: a burst is one reconcile.
        .with_config(
            kube::runtime::controller::Config::default().debounce(Duration::from_millis(500)),
        )
        .graceful_shutdown_on(shutdown)
        .run(
            crate::metrics::metrics()
                .reconciles
                .measure("organization", reconcile),
            error_policy::<Organization>,
            plane,
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
            user_id: Some(user.into()),
            role,
        };
        let org = Organization::new(
            "acme",
            OrganizationSpec {
                display_name: "ACME".into(),
                budget: None,
                members: vec![
                    member("bob", Role::Member),
                    member("alice", Role::Admin),
                    member("bob", Role::Member),
                    member("carol", Role::Viewer),
                    Member {
                        user: "by-hand".into(),
                        user_id: None,
                        role: Role::Admin,
                    },
                ],
                verification: None,
            },
        );
        let b = bindings(&org);
        assert_eq!(b[&Role::Admin], ["kubenest:alice"]);
        assert_eq!(b[&Role::Member], ["kubenest:bob"]);
        assert_eq!(b[&Role::Viewer], ["kubenest:carol"]);
        assert_eq!(namespace_of("acme").unwrap(), "org-acme");
        assert!(matches!(
            namespace_of(&"x".repeat(60)),
            Err(Error::Invalid(_))
        ));
    }
}
