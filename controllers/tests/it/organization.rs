//! The Organization controller on a real management kube-apiserver: each organization gets its
//! namespace, and its members get exactly their role's rights there, checked by the API
//! server's own authorizer (SubjectAccessReview), across two organizations.

use crate::common;

use std::time::Duration;

use crate::common::{eventually, eventually_within};
use k8s_openapi::api::authorization::v1::{
    ResourceAttributes, SubjectAccessReview, SubjectAccessReviewSpec,
};
use k8s_openapi::api::core::v1::Namespace;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use kube::{Client, Resource};
use kubenest_crds::Project;
use kubenest_crds::common::{Member, Role, kubernetes_user};
use kubenest_crds::organization::{Organization, OrganizationSpec};
use kubenest_crds::project::{PodSecurity, ProjectSpec};
/// Whether the kubenest user `user` (of id `id-<user>`, so the Kubernetes user
/// `kubenest:id-<user>`) may `verb` `resource` in `namespace`.
async fn can(client: &Client, user: &str, verb: &str, resource: &str, namespace: &str) -> bool {
    let (resource, subresource) = match resource.split_once('/') {
        Some((r, s)) => (r, Some(s.to_owned())),
        None => (resource, None),
    };
    let review = SubjectAccessReview {
        spec: SubjectAccessReviewSpec {
            user: Some(kubernetes_user(&format!("id-{user}"))),
            resource_attributes: Some(ResourceAttributes {
                namespace: Some(namespace.into()),
                verb: Some(verb.into()),
                group: Some("kubenest.io".into()),
                resource: Some(resource.into()),
                subresource,
                ..ResourceAttributes::default()
            }),
            ..SubjectAccessReviewSpec::default()
        },
        ..SubjectAccessReview::default()
    };
    let reviewed = Api::<SubjectAccessReview>::all(client.clone())
        .create(&PostParams::default(), &review)
        .await
        .unwrap();
    reviewed.status.unwrap().allowed
}

/// [`can`] on one object by name.
async fn can_named(
    client: &Client,
    user: &str,
    verb: &str,
    resource: &str,
    namespace: &str,
    name: &str,
) -> bool {
    let review = SubjectAccessReview {
        spec: SubjectAccessReviewSpec {
            user: Some(kubernetes_user(&format!("id-{user}"))),
            resource_attributes: Some(ResourceAttributes {
                namespace: Some(namespace.into()),
                verb: Some(verb.into()),
                group: Some("kubenest.io".into()),
                resource: Some(resource.into()),
                name: Some(name.into()),
                ..ResourceAttributes::default()
            }),
            ..SubjectAccessReviewSpec::default()
        },
        ..SubjectAccessReview::default()
    };
    Api::<SubjectAccessReview>::all(client.clone())
        .create(&PostParams::default(), &review)
        .await
        .unwrap()
        .status
        .unwrap()
        .allowed
}

/// A client of the management cluster acting as kubenest user `user` (id `id-<user>`).
async fn impersonating(mgmt: &kubenest_testkit::Cluster, user: &str) -> Client {
    let kubeconfig = kube::config::Kubeconfig::read_from(mgmt.kubeconfig_path()).unwrap();
    let mut config = kube::Config::from_custom_kubeconfig(kubeconfig, &Default::default())
        .await
        .unwrap();
    config.auth_info.impersonate = Some(kubernetes_user(&format!("id-{user}")));
    Client::try_from(config).unwrap()
}

fn members(members: &[(&str, Role)]) -> Vec<Member> {
    members
        .iter()
        .map(|(u, r)| Member {
            user: (*u).into(),
            user_id: Some(format!("id-{u}")),
            role: *r,
        })
        .collect()
}

fn project(name: &str, of: &[(&str, Role)]) -> Project {
    Project::new(
        name,
        ProjectSpec {
            cluster: "east".into(),
            namespace: name.into(),
            registry_secret: None,
            ingress_ca: false,
            members: members(of),
            progress_deadline_seconds: 600,
            pod_security: None,
            quota: None,
            defaults: None,
            network: None,
        },
    )
}

fn org(name: &str, members: &[(&str, Role)]) -> Organization {
    Organization::new(
        name,
        OrganizationSpec {
            display_name: name.to_uppercase(),
            budget: None,
            members: members
                .iter()
                .map(|(u, r)| Member {
                    user: (*u).into(),
                    user_id: Some(format!("id-{u}")),
                    role: *r,
                })
                .collect(),
            verification: None,
        },
    )
}

async fn ready_namespace(orgs: &Api<Organization>, name: &str) -> String {
    let mut namespace = String::new();
    eventually("the organization to be Ready", async || {
        let status = orgs.get(name).await.unwrap().status.unwrap_or_default();
        namespace = status.namespace.unwrap_or_default();
        status.phase.as_deref() == Some("Ready") && !namespace.is_empty()
    })
    .await;
    namespace
}

#[tokio::test]
async fn members_get_exactly_their_roles_rights_in_their_organization_only() {
    let mgmt = kubenest_testkit::shared_management().await.unwrap();
    let client = mgmt.client().await.unwrap();
    common::install(&client).await;
    // The plane runs the Organization controller (one set of controllers per management
    // cluster).
    common::shared_plane().await;

    let suffix = &uuid::Uuid::new_v4().simple().to_string()[..6];
    let (acme, globex) = (format!("acme-{suffix}"), format!("globex-{suffix}"));
    let orgs: Api<Organization> = Api::all(client.clone());
    let pp = PostParams::default();
    orgs.create(
        &pp,
        &org(
            &acme,
            &[
                ("alice", Role::Admin),
                ("bob", Role::Member),
                ("carol", Role::Viewer),
            ],
        ),
    )
    .await
    .unwrap();
    orgs.create(&pp, &org(&globex, &[("dave", Role::Admin)]))
        .await
        .unwrap();
    let acme_ns = ready_namespace(&orgs, &acme).await;
    let globex_ns = ready_namespace(&orgs, &globex).await;
    assert_eq!(acme_ns, format!("org-{acme}"));

    // The namespace belongs to the organization (deleting the organization collects it).
    let ns = Api::<Namespace>::all(client.clone())
        .get(&acme_ns)
        .await
        .unwrap();
    let owner = &ns.metadata.owner_references.unwrap()[0];
    assert_eq!(
        (owner.kind.as_str(), owner.name.as_str()),
        ("Organization", acme.as_str())
    );

    // role × verb × resource in the organization's namespace, and nothing in the other one.
    let matrix: &[(&str, &str, &str, bool)] = &[
        ("alice", "delete", "projects", true),
        ("alice", "patch", "clusters", true),
        ("alice", "create", "apps", true),
        ("bob", "create", "apps", true),
        ("bob", "delete", "apps", true),
        ("bob", "create", "projects", true),
        ("bob", "delete", "projects", false),
        // A member once could patch Projects, and so make themselves project admin.
        ("bob", "patch", "projects", false),
        ("bob", "update", "projects", false),
        ("bob", "deploy", "projects", true),
        ("bob", "manage-members", "projects", false),
        ("alice", "manage-members", "projects", true),
        ("bob", "patch", "clusters", false),
        ("bob", "delete", "clusters", false),
        ("carol", "list", "apps", true),
        ("carol", "get", "clusters", true),
        ("carol", "create", "apps", false),
        ("carol", "patch", "projects", false),
        ("dave", "list", "apps", false),
        ("mallory", "list", "apps", false),
    ];
    for (user, verb, resource, allowed) in matrix {
        assert_eq!(
            can(&client, user, verb, resource, &acme_ns).await,
            *allowed,
            "{user} {verb} {resource} in {acme}"
        );
    }
    for user in ["alice", "bob", "carol"] {
        assert!(
            !can(&client, user, "list", "apps", &globex_ns).await,
            "{user} sees into {globex}"
        );
    }
    assert!(can(&client, "dave", "delete", "projects", &globex_ns).await);
    // Status belongs to the controllers, even for admins.
    assert!(!can(&client, "alice", "patch", "apps/status", &acme_ns).await);

    // A member creating a project with themselves as its admin, through kubectl: the
    // admission policy refuses the members (only admins at a scope change its members).
    let bob = impersonating(mgmt, "bob").await;
    let escalation = project("grab", &[("bob", Role::Admin)]);
    let refused = Api::<Project>::namespaced(bob.clone(), &acme_ns)
        .create(&PostParams::default(), &escalation)
        .await
        .unwrap_err();
    assert!(refused.to_string().contains("spec.members"), "{refused}");
    // Without members the same project is fine for him; changing its members afterwards is not.
    let plain = project("grab", &[]);
    Api::<Project>::namespaced(bob.clone(), &acme_ns)
        .create(&PostParams::default(), &plain)
        .await
        .unwrap();

    // The Pod Security level of a project is the organization's admins' to choose: a member
    // creating a `restricted` project is refused naming the field, an admin is not, and a
    // project-scope admin (who may update that project) may not change it either.
    let mut strict = project("strict", &[]);
    strict.spec.pod_security = Some(PodSecurity::Restricted);
    let refused = Api::<Project>::namespaced(bob.clone(), &acme_ns)
        .create(&PostParams::default(), &strict)
        .await
        .unwrap_err();
    strict.spec.members = members(&[("frank", Role::Admin)]);
    assert!(
        refused.to_string().contains("spec.podSecurity"),
        "{refused}"
    );
    let alice = impersonating(mgmt, "alice").await;
    Api::<Project>::namespaced(alice.clone(), &acme_ns)
        .create(&PostParams::default(), &strict)
        .await
        .unwrap();
    eventually("frank's project Role", async || {
        can_named(&client, "frank", "update", "projects", &acme_ns, "strict").await
    })
    .await;
    let frank = impersonating(mgmt, "frank").await;
    let loosen = serde_json::json!({"spec": {"podSecurity": "baseline"}});
    let refused = Api::<Project>::namespaced(frank, &acme_ns)
        .patch("strict", &PatchParams::default(), &Patch::Merge(&loosen))
        .await
        .unwrap_err();
    assert!(
        refused.to_string().contains("spec.podSecurity"),
        "{refused}"
    );
    Api::<Project>::namespaced(alice, &acme_ns)
        .patch("strict", &PatchParams::default(), &Patch::Merge(&loosen))
        .await
        .unwrap();

    // A project-scope viewer gets that project only, by name, through a Role of its own.
    let shop = project("shop", &[("erin", Role::Viewer)]);
    Api::<Project>::namespaced(client.clone(), &acme_ns)
        .create(&PostParams::default(), &shop)
        .await
        .unwrap();
    eventually("erin's project Role", async || {
        can_named(&client, "erin", "get", "projects", &acme_ns, "shop").await
    })
    .await;
    assert!(!can_named(&client, "erin", "get", "projects", &acme_ns, "grab").await);
    assert!(!can_named(&client, "erin", "patch", "projects", &acme_ns, "shop").await);
    assert!(!can(&client, "erin", "list", "apps", &acme_ns).await);

    // Removing a member takes the rights away.
    let keep = serde_json::json!({ "spec": { "members": [{ "user": "alice", "userId": "id-alice", "role": "admin" }] } });
    orgs.patch(&acme, &PatchParams::default(), &Patch::Merge(&keep))
        .await
        .unwrap();
    eventually("bob to lose his rights", async || {
        !can(&client, "bob", "create", "apps", &acme_ns).await
    })
    .await;

    // Deleting the organization takes its namespace with it. The garbage collector learns of a
    // new CRD's objects on its next discovery round (every 30 s), hence the longer wait.
    orgs.delete(&acme, &DeleteParams::background())
        .await
        .unwrap();
    let namespaces: Api<Namespace> = Api::all(client.clone());
    eventually_within("the namespace to go", Duration::from_secs(90), async || {
        namespaces
            .get_opt(&acme_ns)
            .await
            .unwrap()
            .is_none_or(|n| n.meta().deletion_timestamp.is_some())
    })
    .await;
}
