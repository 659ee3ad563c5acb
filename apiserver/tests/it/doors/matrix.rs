//! The shared role matrix ([`common::matrix`]) through kubectl, at every scope, in two
//! organizations.

use super::*;

/// The names of one place of the matrix: (cluster, project, app, addon).
type PlaceNames = (String, String, String, String);

/// Runs one row of the shared role matrix ([`common::matrix`]) as `kube`; Ok when Kubernetes
/// let it through. Every write is a server-side dry run: authorization, the admission policies
/// and webhooks all decide, and nothing changes.
async fn kubectl_request(
    what: &str,
    kube: &kube::Client,
    namespace: &str,
    (cluster, project, app, addon): &PlaceNames,
    me: &str,
) -> Result<(), kube::Error> {
    use kube::api::{DeleteParams, ListParams};
    let dry = PatchParams {
        dry_run: true,
        ..PatchParams::default()
    };
    let dry_delete = DeleteParams {
        dry_run: true,
        ..DeleteParams::default()
    };
    let dry_create = PostParams {
        dry_run: true,
        ..PostParams::default()
    };
    let clusters: Api<kubenest_crds::cluster::Cluster> = Api::namespaced(kube.clone(), namespace);
    let projects: Api<Project> = Api::namespaced(kube.clone(), namespace);
    let apps: Api<App> = Api::namespaced(kube.clone(), namespace);
    let addons: Api<AddonInstance> = Api::namespaced(kube.clone(), namespace);
    let escalate = json!({"spec": {"members": [{"user": me, "userId": me, "role": "admin"}]}});
    let annotate = json!({"metadata": {"annotations": {"example.com/note": "x"}}});
    let change = json!({"spec": {"progressDeadlineSeconds": 300}});
    match what {
        "get cluster" => clusters.get(cluster).await.map(|_| ()),
        "change cluster" => clusters
            .patch(
                cluster,
                &dry,
                &Patch::Merge(json!({"spec": {"displayName": "x"}})),
            )
            .await
            .map(|_| ()),
        "make self cluster admin" => clusters
            .patch(cluster, &dry, &Patch::Merge(&escalate))
            .await
            .map(|_| ()),
        "get project" => projects.get(project).await.map(|_| ()),
        "make self project admin" => projects
            .patch(project, &dry, &Patch::Merge(&escalate))
            .await
            .map(|_| ()),
        "delete project" => projects.delete(project, &dry_delete).await.map(|_| ()),
        "get app" => apps.get(app).await.map(|_| ()),
        "list apps" => apps.list(&ListParams::default()).await.map(|_| ()),
        "change app" => apps
            .patch(app, &dry, &Patch::Merge(&change))
            .await
            .map(|_| ()),
        "annotate app" => apps
            .patch(app, &dry, &Patch::Merge(&annotate))
            .await
            .map(|_| ()),
        "delete app" => apps.delete(app, &dry_delete).await.map(|_| ()),
        "create app" => apps
            .create(
                &dry_create,
                &app_object(
                    &common::unique("k"),
                    project,
                    json!([{"name": "web", "workload": {"image": "k:1"}}]),
                ),
            )
            .await
            .map(|_| ()),
        "get addon" => addons.get(addon).await.map(|_| ()),
        "change addon" => addons
            .patch(addon, &dry, &Patch::Merge(&change))
            .await
            .map(|_| ()),
        "annotate addon" => addons
            .patch(addon, &dry, &Patch::Merge(&annotate))
            .await
            .map(|_| ()),
        "delete addon" => addons.delete(addon, &dry_delete).await.map(|_| ()),
        "create addon" => {
            let object: AddonInstance = serde_json::from_value(json!({
                "apiVersion": "kubenest.io/v1alpha1", "kind": "AddonInstance",
                "metadata": {"name": common::unique("k")},
                "spec": {"project": project, "definition": "redis"},
            }))
            .unwrap();
            addons.create(&dry_create, &object).await.map(|_| ())
        }
        other => panic!("the matrix row {other:?} has no kubectl request"),
    }
}

/// A project with an App `app` and a standalone addon `addon` on cluster `cluster_id` of
/// `org`, Ready; returns its names and id.
async fn matrix_place(
    admin: &Client,
    kube: &kube::Client,
    org: &str,
    cluster_id: &str,
    app: &str,
    addon: &str,
) -> (PlaceNames, String) {
    let p = project(admin, org, cluster_id).await;
    agent_took_namespace(admin, kube, org, &p).await;
    let project_id = p["id"].as_str().unwrap().to_owned();
    admin
        .expect(
            Method::POST,
            "/api/v1/apps",
            Some(common::web_app(&project_id, app, "m:1")),
            202,
        )
        .await;
    admin
        .expect(
            Method::POST,
            "/api/v1/addon-instances",
            Some(json!({"project_id": project_id, "name": addon, "definition": "redis"})),
            202,
        )
        .await;
    let name = p["name"].as_str().unwrap().to_owned();
    let cluster = Api::<Project>::namespaced(kube.clone(), &format!("org-{org}"))
        .get(&name)
        .await
        .unwrap()
        .spec
        .cluster;
    (
        (cluster, name, app.to_owned(), addon.to_owned()),
        project_id,
    )
}

/// Every kubectl row of the shared role matrix ([`common::matrix`]), for every role bound on
/// organization A, its cluster and its first project, against that project, another project
/// on the same cluster (whose addon is named like the first project's App) and organization B.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_role_at_every_scope_through_kubectl_in_two_organizations_with_escalations() {
    use crate::common::Level;
    use crate::common::matrix::{Door, Place, rows};
    common::redis_definition().await;
    let admin = Client::admin().await;
    let kube = plane().kube().await;
    let a = org(&admin, "kmatrix-a", json!([])).await;
    let b = org(&admin, "kmatrix-b", json!([])).await;
    let cluster_a = cluster(&admin, &a).await["cluster_id"]
        .as_str()
        .unwrap()
        .to_owned();
    let cluster_b = cluster(&admin, &b).await["cluster_id"]
        .as_str()
        .unwrap()
        .to_owned();
    let (own, project_a) = matrix_place(&admin, &kube, &a, &cluster_a, "m", "mdb").await;
    let (other, _) = matrix_place(&admin, &kube, &a, &cluster_a, "m2", "m").await;
    let (outside, _) = matrix_place(&admin, &kube, &b, &cluster_b, "m", "mdb").await;
    let places = [
        (Place::OwnProject, &a, own.clone()),
        (Place::OtherProject, &a, other),
        (Place::OtherOrg, &b, outside),
    ];
    let roles = [
        ("admin", common::Needs::Admin),
        ("member", common::Needs::Member),
        ("viewer", common::Needs::Viewer),
    ];
    let mut users = Vec::new();
    for (role, needs) in roles {
        for level in [Level::Org, Level::Cluster, Level::Project] {
            let name = user(&admin, &format!("k{role}-{level:?}").to_lowercase()).await;
            let path = match level {
                Level::Org => format!("/api/v1/orgs/{a}/members"),
                Level::Cluster => format!("/api/v1/clusters/{cluster_a}/members"),
                Level::Project => format!("/api/v1/projects/{project_a}/members"),
            };
            admin
                .expect(
                    Method::PUT,
                    &path,
                    Some(json!({"user": name, "role": role})),
                    200,
                )
                .await;
            let session = Client::login(0, &name, PASSWORD).await;
            let id = session.my_id().await;
            let client = as_user(&id).await;
            // Every one of them reaches project A's addon once the controllers have bound
            // the role (the addon is the last object the Roles name).
            let addons: Api<AddonInstance> = Api::namespaced(client.clone(), &format!("org-{a}"));
            eventually(&format!("{name}'s binding"), 60, async || {
                addons.get(&own.3).await.is_ok()
            })
            .await;
            users.push((name, id, client, needs, level));
        }
    }
    let mut checked = 0;
    let mut wrong = Vec::new();
    for (name, id, client, holds, bound) in &users {
        for (place, org, names) in &places {
            for row in rows(Door::Kubectl) {
                let allowed = row.allowed(*holds, *bound, *place);
                let result =
                    kubectl_request(row.what, client, &format!("org-{org}"), names, id).await;
                checked += 1;
                let ok = match (&result, allowed) {
                    (Ok(()), true) => true,
                    // Refused by RBAC or by kubenest's admission policies: 403 either way.
                    (Err(kube::Error::Api(status)), false) => status.code == 403,
                    _ => false,
                };
                if !ok {
                    wrong.push(format!(
                        "{name} ({holds:?} at {bound:?}) {} at {place:?}: {:?}, want {}",
                        row.what,
                        result.map_err(|e| e.to_string()),
                        if allowed { "allowed" } else { "403" }
                    ));
                }
            }
        }
    }
    assert!(
        wrong.is_empty(),
        "{} of {checked} wrong:\n{}",
        wrong.len(),
        wrong.join("\n")
    );
    assert_eq!(checked, 9 * 3 * rows(Door::Kubectl).count());
    eprintln!("kubectl matrix: {checked} requests, 0 leaks, 0 escalations");
}
