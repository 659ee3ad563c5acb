//! Kubernetes RBAC for kubenest roles, so kubectl users get exactly the rights their kubenest
//! role gives them: three ClusterRoles, bound per organization namespace by the controllers.
//!
//! | role   | kubenest objects in the organization's namespace |
//! |--------|---------------------------------------------------|
//! | viewer | get, list, watch everything                       |
//! | member | also create/update/patch/delete apps, standalone addons and templates; create/update/patch projects |
//! | admin  | everything, including deleting projects and clusters and changing clusters (node count, token rotation) |
//!
//! No role may write `status`: that belongs to the controllers.

use k8s_openapi::api::rbac::v1::{ClusterRole, PolicyRule};
use kube::api::{Api, Patch, PatchParams};
use kube::core::ObjectMeta;
use kubenest_crds::common::Role;
use kubenest_crds::names::{field_managers, labels};

const ALL: &[&str] = &[
    "clusters",
    "projects",
    "apps",
    "addoninstances",
    "stacktemplates",
    "addondefinitions",
];
const READ: &[&str] = &["get", "list", "watch"];
const WRITE: &[&str] = &["create", "update", "patch", "delete"];

/// The ClusterRole name of a kubenest role.
pub fn cluster_role_name(role: Role) -> &'static str {
    match role {
        Role::Admin => "kubenest-admin",
        Role::Member => "kubenest-member",
        Role::Viewer => "kubenest-viewer",
    }
}

fn rule(resources: &[&str], verbs: &[&str]) -> PolicyRule {
    PolicyRule {
        api_groups: Some(vec![kubenest_crds::GROUP.to_owned()]),
        resources: Some(resources.iter().map(|s| (*s).to_owned()).collect()),
        verbs: verbs.iter().map(|s| (*s).to_owned()).collect(),
        ..PolicyRule::default()
    }
}

/// The rules of each role (pure, for tests and for the apply below).
pub fn rules(role: Role) -> Vec<PolicyRule> {
    let read = rule(ALL, READ);
    match role {
        Role::Viewer => vec![read],
        Role::Member => vec![
            read,
            rule(&["apps", "addoninstances", "stacktemplates"], WRITE),
            rule(&["projects"], &["create", "update", "patch"]),
        ],
        Role::Admin => vec![read, rule(ALL, WRITE)],
    }
}

/// Applies the three ClusterRoles.
pub async fn ensure_cluster_roles(client: &kube::Client) -> Result<(), kube::Error> {
    let api: Api<ClusterRole> = Api::all(client.clone());
    let params = PatchParams::apply(field_managers::CONTROLLERS).force();
    for object in cluster_roles() {
        let name = object.metadata.name.clone().unwrap_or_default();
        api.patch(&name, &params, &Patch::Apply(&object)).await?;
    }
    Ok(())
}

/// The ClusterRoles of the kubenest roles (viewer, member, admin), bound per organization,
/// cluster or project. The kubenest chart ships the same objects.
pub fn cluster_roles() -> Vec<ClusterRole> {
    [Role::Viewer, Role::Member, Role::Admin]
        .into_iter()
        .map(|role| ClusterRole {
            metadata: ObjectMeta {
                name: Some(cluster_role_name(role).to_owned()),
                labels: Some(
                    [(
                        labels::MANAGED_BY.to_owned(),
                        field_managers::CONTROLLERS.to_owned(),
                    )]
                    .into(),
                ),
                ..ObjectMeta::default()
            },
            rules: Some(rules(role)),
            ..ClusterRole::default()
        })
        .collect()
}
