//! A member of another project, or a Kubernetes user with RBAC but no kubenest role, cannot
//! reach a project's objects through kubectl.

use super::*;

/// A kube client impersonating the Kubernetes user `name` (no kubenest user behind it).
async fn as_kubernetes_user(name: &str) -> kube::Client {
    impersonating(name, &[]).await
}

/// Gets, changes, annotates and deletes `name` as `api`'s user: every outcome, in that order.
async fn attack<K>(api: &Api<K>, name: &str) -> Vec<Result<(), kube::Error>>
where
    K: kube::Resource + Clone + std::fmt::Debug + serde::de::DeserializeOwned,
{
    let params = PatchParams::default();
    let change = json!({"spec": {"progressDeadlineSeconds": 301}});
    let annotate = json!({"metadata": {"annotations": {"attacker.example/note": "mine"}}});
    vec![
        api.get(name).await.map(|_| ()),
        api.patch(name, &params, &Patch::Merge(&change))
            .await
            .map(|_| ()),
        api.patch(name, &params, &Patch::Merge(&annotate))
            .await
            .map(|_| ()),
        api.delete(name, &Default::default()).await.map(|_| ()),
    ]
}

const VERBS: &[&str] = &["get", "change", "annotate", "delete"];

fn all_forbidden(
    what: &str,
    verbs: &[&str],
    outcomes: impl IntoIterator<Item = Result<(), kube::Error>>,
) {
    let outcomes: Vec<_> = outcomes.into_iter().collect();
    assert_eq!(outcomes.len(), verbs.len());
    for (verb, outcome) in verbs.iter().zip(outcomes) {
        match outcome {
            Err(kube::Error::Api(status)) if status.code == 403 => {}
            other => panic!(
                "{verb} {what}: {:?}, want 403",
                other.map_err(|e| e.to_string())
            ),
        }
    }
}

/// A member of project B attacks project A of the same organization through kubectl: A's
/// AddonInstance named like B's own App, and A's App. Every get, change, annotation and delete
/// is refused (RBAC names objects per kind), and so are a delete and an annotation by a
/// Kubernetes user whom an RBAC Role lets delete and patch every App but who holds `deploy` on
/// no project (the admission policy checks deletes and metadata-only writes too). A's objects
/// are as they were.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_member_of_another_project_cannot_reach_a_projects_objects_through_kubectl() {
    use k8s_openapi::api::rbac::v1::{Role as KubeRole, RoleBinding};
    let admin = Client::admin().await;
    let kube = plane().kube().await;
    let org = org(&admin, "cross", json!([])).await;
    let namespace = format!("org-{org}");
    let registration = cluster(&admin, &org).await;
    let cluster_id = registration["cluster_id"].as_str().unwrap();
    let a = project(&admin, &org, cluster_id).await;
    let b = project(&admin, &org, cluster_id).await;
    let (a_name, b_name) = (a["name"].as_str().unwrap(), b["name"].as_str().unwrap());
    let mia = user(&admin, "mia").await;
    admin
        .expect(
            Method::PUT,
            &format!("/api/v1/projects/{}/members", b["id"].as_str().unwrap()),
            Some(json!({"user": mia, "role": "member"})),
            200,
        )
        .await;
    let mia_id = user_id(&mia).await;

    // B's App and A's AddonInstance share the name `twin`; A also has an App.
    let admin_apps: Api<App> = Api::namespaced(kube.clone(), &namespace);
    let admin_addons: Api<AddonInstance> = Api::namespaced(kube.clone(), &namespace);
    let web = json!([{"name": "web", "workload": {"image": "shop:1"}}]);
    admin_apps
        .create(
            &PostParams::default(),
            &app_object("twin", b_name, web.clone()),
        )
        .await
        .unwrap();
    admin_apps
        .create(&PostParams::default(), &app_object("a-web", a_name, web))
        .await
        .unwrap();
    let addon: AddonInstance = serde_json::from_value(json!({
        "apiVersion": "kubenest.io/v1alpha1", "kind": "AddonInstance",
        "metadata": {"name": "twin"},
        "spec": {"project": a_name, "definition": "postgres"},
    }))
    .unwrap();
    admin_addons
        .create(&PostParams::default(), &addon)
        .await
        .unwrap();
    let before_addon = admin_addons.get("twin").await.unwrap();
    let before_app = admin_apps.get("a-web").await.unwrap();

    // Mia reaches her own App once the controllers have written her project's Role.
    let mia_kube = as_user(&mia_id).await;
    let her_apps: Api<App> = Api::namespaced(mia_kube.clone(), &namespace);
    eventually("mia's project Role names her App", 60, async || {
        her_apps.get("twin").await.is_ok()
    })
    .await;
    let her_addons: Api<AddonInstance> = Api::namespaced(mia_kube, &namespace);
    all_forbidden(
        "A's AddonInstance",
        VERBS,
        attack(&her_addons, "twin").await,
    );
    all_forbidden("A's App", VERBS, attack(&her_apps, "a-web").await);

    // Ops may, by RBAC, patch and delete every App of the organization, but deploys nowhere.
    let role: KubeRole = serde_json::from_value(json!({
        "metadata": {"name": "ops-apps"},
        "rules": [{"apiGroups": ["kubenest.io"], "resources": ["apps", "addoninstances"],
                   "verbs": ["get", "patch", "update", "delete"]}],
    }))
    .unwrap();
    let binding: RoleBinding = serde_json::from_value(json!({
        "metadata": {"name": "ops-apps"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "ops-apps"},
        "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": "ops"}],
    }))
    .unwrap();
    Api::<KubeRole>::namespaced(kube.clone(), &namespace)
        .create(&PostParams::default(), &role)
        .await
        .unwrap();
    Api::<RoleBinding>::namespaced(kube.clone(), &namespace)
        .create(&PostParams::default(), &binding)
        .await
        .unwrap();
    let ops = as_kubernetes_user("ops").await;
    for (what, outcomes) in [
        (
            "A's App",
            attack(&Api::<App>::namespaced(ops.clone(), &namespace), "a-web").await,
        ),
        (
            "A's AddonInstance",
            attack(&Api::<AddonInstance>::namespaced(ops, &namespace), "twin").await,
        ),
    ] {
        let mut outcomes = outcomes.into_iter();
        // RBAC lets ops read; every write is the admission policy's to refuse.
        outcomes.next().unwrap().unwrap();
        all_forbidden(what, &["change", "annotate", "delete"], outcomes);
    }

    let after_addon = admin_addons.get("twin").await.unwrap();
    let after_app = admin_apps.get("a-web").await.unwrap();
    for (before, after) in [
        (before_addon.metadata.clone(), after_addon.metadata.clone()),
        (before_app.metadata.clone(), after_app.metadata.clone()),
    ] {
        assert!(after.deletion_timestamp.is_none(), "{after:?}");
        assert!(
            !after
                .annotations
                .unwrap_or_default()
                .contains_key("attacker.example/note"),
            "{before:?}"
        );
    }
    assert_eq!(before_addon.spec, after_addon.spec);
    assert_eq!(before_app.spec, after_app.spec);
}
