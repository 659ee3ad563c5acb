//! Roles for cluster- and project-scope memberships (pure). Kubernetes RBAC binds per
//! namespace, and every object of an organization shares its namespace, so a role on one
//! cluster or project is a Role of its own naming exactly what that scope reaches:
//!
//! | scope   | reaches                                                                      |
//! |---------|------------------------------------------------------------------------------|
//! | cluster | the Cluster, the Projects on it, their Apps and standalone addons            |
//! | project | the Project, its Apps and standalone addons                                  |
//!
//! by `resourceNames`, one rule per kind naming only objects of that kind (an App named like
//! another project's AddonInstance must not open that addon), with the verbs of the role: viewer `get`; member also changes and
//! deletes those Apps and addons, creates new ones and holds `deploy` on the projects (the
//! admission policy checks that a created App's project is one of them); admin also changes
//! and deletes the projects (and the cluster) and holds `manage-members` on them. Lists and
//! watches are not granted at these scopes: Kubernetes cannot filter a list by project, and a
//! list would show other projects' objects (the REST API answers those 404).

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::api::rbac::v1::{PolicyRule, Role as KubeRole, RoleBinding, RoleRef, Subject};
use kube::ResourceExt;
use kube::core::ObjectMeta;
use kubenest_crds::common::{Member, Role};
use kubenest_crds::names::labels;
use kubenest_crds::{AddonInstance, App, Cluster, Project};

use super::by_role;
use crate::rbac::{DEPLOY, MANAGE_MEMBERS};

/// The label on every generated scope Role and RoleBinding (its value is the scope kind), so
/// those of removed memberships can be found and deleted.
pub const SCOPE_LABEL: &str = "kubenest.io/member-scope";

/// What an organization's namespace holds, as far as scopes go.
#[derive(Debug, Default)]
pub struct Objects<'a> {
    pub clusters: &'a [Cluster],
    pub projects: &'a [Project],
    pub apps: &'a [App],
    pub addons: &'a [AddonInstance],
}

fn rule(resources: &[&str], names: &BTreeSet<String>, verbs: &[&str]) -> Option<PolicyRule> {
    if names.is_empty() {
        return None;
    }
    Some(PolicyRule {
        api_groups: Some(vec![kubenest_crds::GROUP.to_owned()]),
        resources: Some(resources.iter().map(|s| (*s).to_owned()).collect()),
        resource_names: Some(names.iter().cloned().collect()),
        verbs: verbs.iter().map(|s| (*s).to_owned()).collect(),
        ..PolicyRule::default()
    })
}

fn create_rule() -> PolicyRule {
    PolicyRule {
        api_groups: Some(vec![kubenest_crds::GROUP.to_owned()]),
        resources: Some(vec!["apps".into(), "addoninstances".into()]),
        verbs: vec!["create".into()],
        ..PolicyRule::default()
    }
}

/// The names of the Apps and of the standalone addons a scope reaches, kept apart: one
/// `resourceNames` set for both kinds would open an object of one kind in another project
/// that shares a name with one of the other kind here.
#[derive(Debug, Default)]
struct Workloads {
    apps: BTreeSet<String>,
    addons: BTreeSet<String>,
}

/// The rules of `role` on a cluster (`cluster: Some`) or only on `projects`.
fn rules(
    role: Role,
    cluster: Option<&str>,
    projects: &BTreeSet<String>,
    workloads: &Workloads,
) -> Vec<PolicyRule> {
    let clusters: BTreeSet<String> = cluster.map(str::to_owned).into_iter().collect();
    let read = ["get"];
    let change = ["get", "update", "patch", "delete"];
    let mut out = vec![
        rule(&["clusters"], &clusters, &read),
        rule(&["projects"], projects, &read),
        rule(&["apps"], &workloads.apps, &read),
        rule(&["addoninstances"], &workloads.addons, &read),
    ];
    if role <= Role::Member {
        // `Role` orders admin < member < viewer.
        out.push(rule(&["apps"], &workloads.apps, &change));
        out.push(rule(&["addoninstances"], &workloads.addons, &change));
        out.push(rule(&["projects"], projects, &[DEPLOY]));
        out.push(Some(create_rule()));
    }
    if role == Role::Admin {
        out.push(rule(
            &["clusters"],
            &clusters,
            &["update", "patch", "delete", MANAGE_MEMBERS],
        ));
        out.push(rule(
            &["projects"],
            projects,
            &["update", "patch", "delete", MANAGE_MEMBERS],
        ));
    }
    out.into_iter().flatten().collect()
}

fn workloads_of(objects: &Objects<'_>, projects: &BTreeSet<String>) -> Workloads {
    Workloads {
        apps: objects
            .apps
            .iter()
            .filter(|a| projects.contains(&a.spec.project))
            .map(ResourceExt::name_any)
            .collect(),
        addons: objects
            .addons
            .iter()
            .filter(|a| projects.contains(&a.spec.project))
            .map(ResourceExt::name_any)
            .collect(),
    }
}

fn scoped(
    namespace: &str,
    org: &str,
    kind: &str,
    name: &str,
    members: &[Member],
    make: impl Fn(Role) -> Vec<PolicyRule>,
    out: &mut Vec<(KubeRole, RoleBinding)>,
) {
    for (role, users) in by_role(members) {
        if users.is_empty() {
            continue;
        }
        let object = format!(
            "kubenest-{kind}-{name}-{}",
            crate::rbac::cluster_role_name(role).trim_start_matches("kubenest-")
        );
        let metadata = ObjectMeta {
            name: Some(object.clone()),
            namespace: Some(namespace.to_owned()),
            labels: Some(
                [
                    (labels::ORGANIZATION.to_owned(), org.to_owned()),
                    (SCOPE_LABEL.to_owned(), kind.to_owned()),
                ]
                .into(),
            ),
            ..ObjectMeta::default()
        };
        let binding = RoleBinding {
            metadata: metadata.clone(),
            role_ref: RoleRef {
                api_group: "rbac.authorization.k8s.io".into(),
                kind: "Role".into(),
                name: object,
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
        let role = KubeRole {
            metadata,
            rules: Some(make(role)),
        };
        out.push((role, binding));
    }
}

/// The Role and RoleBinding of every role held at a cluster or project of the organization
/// `org` (namespace `namespace`).
pub fn scope_roles(
    namespace: &str,
    org: &str,
    objects: &Objects<'_>,
) -> Vec<(KubeRole, RoleBinding)> {
    let mut on_cluster: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for project in objects.projects {
        on_cluster
            .entry(project.spec.cluster.clone())
            .or_default()
            .insert(project.name_any());
    }
    let mut out = Vec::new();
    for cluster in objects.clusters {
        let name = cluster.name_any();
        let projects = on_cluster.get(&name).cloned().unwrap_or_default();
        let workloads = workloads_of(objects, &projects);
        scoped(
            namespace,
            org,
            "cluster",
            &name,
            &cluster.spec.members,
            |role| rules(role, Some(&name), &projects, &workloads),
            &mut out,
        );
    }
    for project in objects.projects {
        let name = project.name_any();
        let projects: BTreeSet<String> = [name.clone()].into();
        let workloads = workloads_of(objects, &projects);
        scoped(
            namespace,
            org,
            "project",
            &name,
            &project.spec.members,
            |role| rules(role, None, &projects, &workloads),
            &mut out,
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use kubenest_crds::cluster::ClusterSpec;
    use kubenest_crds::project::ProjectSpec;

    fn member(id: &str, role: Role) -> Member {
        Member {
            user: id.into(),
            user_id: Some(id.into()),
            role,
        }
    }

    #[test]
    fn a_project_viewer_gets_only_its_project_and_a_cluster_admin_all_on_the_cluster() {
        let east = Cluster::new(
            "east",
            ClusterSpec {
                display_name: None,
                provider: Default::default(),
                token_version: 1,
                desired_node_count: None,
                members: vec![member("carla", Role::Admin)],
                budget: None,
            },
        );
        let project = |name: &str, members| {
            Project::new(
                name,
                ProjectSpec {
                    cluster: "east".into(),
                    namespace: name.into(),
                    registry_secret: None,
                    ingress_ca: false,
                    members,
                    progress_deadline_seconds: 600,
                    pod_security: None,
                    quota: None,
                    defaults: None,
                    network: None,
                },
            )
        };
        let projects = [
            project("shop", vec![member("vic", Role::Viewer)]),
            project("blog", vec![]),
        ];
        let objects = Objects {
            clusters: std::slice::from_ref(&east),
            projects: &projects,
            ..Objects::default()
        };
        let roles = scope_roles("org-acme", "acme", &objects);
        assert_eq!(roles.len(), 2);
        let (admin, binding) = &roles[0];
        assert_eq!(
            admin.metadata.name.as_deref(),
            Some("kubenest-cluster-east-admin")
        );
        assert_eq!(binding.subjects.as_ref().unwrap()[0].name, "kubenest:carla");
        let admin_rules = admin.rules.clone().unwrap();
        assert!(
            admin_rules
                .iter()
                .any(|r| r.verbs.contains(&MANAGE_MEMBERS.to_owned())
                    && r.resource_names == Some(vec!["blog".into(), "shop".into()]))
        );
        let (viewer, _) = &roles[1];
        assert_eq!(
            viewer.metadata.name.as_deref(),
            Some("kubenest-project-shop-viewer")
        );
        for rule in viewer.rules.clone().unwrap() {
            assert_eq!(rule.verbs, ["get"]);
            assert_eq!(rule.resource_names, Some(vec!["shop".to_owned()]));
        }
    }

    /// An App of project shop named like blog's AddonInstance: shop's member gets the App's
    /// name on `apps` only, never on `addoninstances`, so blog's addon stays closed to them.
    #[test]
    fn each_kind_names_only_its_own_objects_of_the_scope() {
        let app: App = serde_json::from_value(serde_json::json!({
            "apiVersion": "kubenest.io/v1alpha1", "kind": "App",
            "metadata": {"name": "db"},
            "spec": {"project": "shop", "components": []},
        }))
        .unwrap();
        let addon = |name: &str, project: &str| -> AddonInstance {
            serde_json::from_value(serde_json::json!({
                "apiVersion": "kubenest.io/v1alpha1", "kind": "AddonInstance",
                "metadata": {"name": name},
                "spec": {"project": project, "definition": "postgres"},
            }))
            .unwrap()
        };
        let project = |name: &str, members| {
            Project::new(
                name,
                ProjectSpec {
                    cluster: "east".into(),
                    namespace: name.into(),
                    registry_secret: None,
                    ingress_ca: false,
                    members,
                    progress_deadline_seconds: 600,
                    pod_security: None,
                    quota: None,
                    defaults: None,
                    network: None,
                },
            )
        };
        let projects = [
            project("shop", vec![member("mia", Role::Member)]),
            project("blog", vec![]),
        ];
        let addons = [addon("db", "blog"), addon("cache", "shop")];
        let objects = Objects {
            projects: &projects,
            apps: std::slice::from_ref(&app),
            addons: &addons,
            ..Objects::default()
        };
        let roles = scope_roles("org-acme", "acme", &objects);
        let (role, _) = &roles[0];
        let names = |resource: &str| -> BTreeSet<String> {
            role.rules
                .iter()
                .flatten()
                .filter(|r| r.resource_names.is_some())
                .filter(|r| r.resources.as_ref().unwrap().iter().any(|x| x == resource))
                .inspect(|r| assert_eq!(r.resources.as_ref().unwrap().len(), 1, "{r:?}"))
                .flat_map(|r| r.resource_names.clone().unwrap_or_default())
                .collect()
        };
        assert_eq!(names("apps"), ["db".to_owned()].into());
        assert_eq!(names("addoninstances"), ["cache".to_owned()].into());
        let writes = role
            .rules
            .iter()
            .flatten()
            .filter(|r| r.verbs.contains(&"delete".to_owned()))
            .count();
        assert_eq!(writes, 2, "one write rule per kind");
    }
}
