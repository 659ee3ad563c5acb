//! Kubernetes RBAC for kubenest roles, so kubectl users get exactly the rights their kubenest
//! role gives them: three ClusterRoles, bound per organization namespace by the controllers.
//!
//! | role   | kubenest objects in the organization's namespace |
//! |--------|---------------------------------------------------|
//! | viewer | get, list, watch everything                       |
//! | member | also create/update/patch/delete apps, standalone addons and templates; create projects; `deploy` into every project |
//! | admin  | everything, including changing and deleting projects and clusters and `manage-members` |
//!
//! Two verbs are kubenest's own, checked by the admission policies
//! (`charts/kubenest/templates/kubenest-policies.yaml`) with the authorizer: `deploy` on a
//! project (writing its Apps and standalone addons) and `manage-members` on an organization,
//! cluster or project (changing `spec.members`). A member may create a project but not change
//! one, nor its members: that was an escalation (a member adding themselves as project admin).
//! Cluster- and project-scope memberships get Roles of their own with `resourceNames`
//! ([`crate::organization::scopes`]).
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
/// The verb on a project that lets one write its Apps and standalone addons.
pub const DEPLOY: &str = "deploy";
/// The verb on an organization, cluster or project that lets one change its members.
pub const MANAGE_MEMBERS: &str = "manage-members";

/// The ClusterRole name of a kubenest role.
pub fn cluster_role_name(role: Role) -> &'static str {
    match role {
        Role::Admin => "kubenest-admin",
        Role::Member => "kubenest-member",
        Role::Viewer => "kubenest-viewer",
    }
}

pub(crate) fn rule(resources: &[&str], verbs: &[&str]) -> PolicyRule {
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
            rule(&["projects"], &["create", DEPLOY]),
        ],
        Role::Admin => vec![
            read,
            rule(ALL, WRITE),
            rule(&["projects"], &[DEPLOY]),
            rule(&["clusters", "projects"], &[MANAGE_MEMBERS]),
        ],
    }
}

/// Applies the three ClusterRoles and the admission policies that check kubenest's own verbs
/// ([`crate::policies`]).
pub async fn ensure_cluster_roles(client: &kube::Client) -> Result<(), kube::Error> {
    let api: Api<ClusterRole> = Api::all(client.clone());
    let params = PatchParams::apply(field_managers::CONTROLLERS).force();
    for object in cluster_roles() {
        let name = object.metadata.name.clone().unwrap_or_default();
        api.patch(&name, &params, &Patch::Apply(&object)).await?;
    }
    crate::policies::ensure_policies(client).await
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
