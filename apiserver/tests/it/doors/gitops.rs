//! Objects kept in Git: not rewritten through REST, and applied by Flux through the same door.

use super::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn objects_kept_in_git_are_not_rewritten_through_rest_and_a_cluster_manifest_survives_rotation()
 {
    let (org, project, session, member_id) = setting("git").await;
    let admin = Client::admin().await;
    let namespace = format!("org-{org}");
    let project_name = project["name"].as_str().unwrap();

    // Flux applies an App from a Kustomization (its field manager, its tracking labels).
    let flux = PatchParams::apply("kustomize-controller").force();
    let manifest = json!({
        "apiVersion": "kubenest.io/v1alpha1", "kind": "App",
        "metadata": {"name": "gitapp", "labels": {
            "kustomize.toolkit.fluxcd.io/name": "apps",
            "kustomize.toolkit.fluxcd.io/namespace": "flux-system"}},
        "spec": {"project": project_name, "components": [
            {"name": "web", "workload": {"image": "shop:1", "port": 8080}}]},
    });
    let apps: Api<App> = Api::namespaced(as_user(&member_id).await, &namespace);
    let stored = apps
        .patch("gitapp", &flux, &Patch::Apply(&manifest))
        .await
        .unwrap();
    let path = format!("/api/v1/apps/{}", stored.metadata.uid.unwrap());
    let owner = "Flux Kustomization flux-system/apps";
    for (method, route, body, says) in [
        (
            Method::PATCH,
            path.clone(),
            Some(json!({"progress_deadline_seconds": 300})),
            "Change its manifest in Git",
        ),
        (
            Method::POST,
            format!("{path}/pause"),
            None,
            "Set spec.paused: true",
        ),
        (
            Method::POST,
            format!("{path}/rollback"),
            Some(json!({"deployment_id": uuid::Uuid::new_v4().to_string()})),
            "revert the commit",
        ),
        (
            Method::DELETE,
            path.clone(),
            None,
            "Remove its manifest from Git",
        ),
    ] {
        let (status, answer) = session.call(method.clone(), &route, body).await;
        assert_eq!(status, 409, "{method} {route}: {answer}");
        assert_eq!(answer["code"], "gitops_owned", "{answer}");
        let message = answer["detail"].as_str().unwrap();
        assert!(
            message.contains(owner) && message.contains(says),
            "{message}"
        );
    }
    // A redeploy does not fight Git (the spec stays as Git has it).
    session
        .expect(Method::POST, &format!("{path}/redeploy"), None, 202)
        .await;
    let unchanged = Api::<App>::namespaced(plane().kube().await, &namespace)
        .get("gitapp")
        .await
        .unwrap();
    assert_eq!(unchanged.spec.progress_deadline_seconds, 600);
    assert!(!unchanged.spec.paused);

    // An organization admin keeps the cluster's manifest in Git; a rotation through REST
    // raises the token version, and the manifest (still saying version 1) applies after it.
    let keeper = user(&admin, "keeper").await;
    admin
        .expect(
            Method::PUT,
            &format!("/api/v1/orgs/{org}/members"),
            Some(json!({"user": keeper, "role": "admin"})),
            200,
        )
        .await;
    let keeper_session = Client::login(0, &keeper, PASSWORD).await;
    let keeper_id = keeper_session.my_id().await;
    let cluster_id = session
        .get(&format!(
            "/api/v1/projects/{}",
            project["id"].as_str().unwrap()
        ))
        .await
        .1["cluster_id"]
        .as_str()
        .unwrap()
        .to_owned();
    let clusters: Api<kubenest_crds::cluster::Cluster> =
        Api::namespaced(as_user(&keeper_id).await, &namespace);
    let cluster_name = Api::<Project>::namespaced(plane().kube().await, &namespace)
        .get(project_name)
        .await
        .unwrap()
        .spec
        .cluster;
    let cluster_manifest = |display: &str| {
        json!({
            "apiVersion": "kubenest.io/v1alpha1", "kind": "Cluster",
            "metadata": {"name": cluster_name},
            "spec": {"displayName": display, "provider": "existing", "tokenVersion": 1},
        })
    };
    eventually("the keeper's binding", 30, async || {
        clusters
            .patch(
                &cluster_name,
                &flux,
                &Patch::Apply(cluster_manifest("from git")),
            )
            .await
            .is_ok()
    })
    .await;
    let rotated = admin
        .expect(
            Method::POST,
            &format!("/api/v1/clusters/{cluster_id}/rotate-token"),
            None,
            200,
        )
        .await;
    assert_eq!(rotated["token_version"], 2, "{rotated}");
    let applied = clusters
        .patch(
            &cluster_name,
            &flux,
            &Patch::Apply(cluster_manifest("from git, again")),
        )
        .await
        .unwrap();
    assert_eq!(applied.spec.token_version, 2);
    assert_eq!(
        applied.spec.display_name.as_deref(),
        Some("from git, again")
    );
}

/// A Flux object (GitRepository, Kustomization) in Flux's namespace, by the admin.
async fn flux_apply(kind: &str, group_version: &str, name: &str, spec: Value) {
    let (group, version) = group_version.split_once('/').unwrap();
    let resource =
        kube::api::ApiResource::from_gvk(&kube::api::GroupVersionKind::gvk(group, version, kind));
    let api: Api<kube::api::DynamicObject> = Api::namespaced_with(
        plane().kube().await,
        kubenest_testkit::flux::NAMESPACE,
        &resource,
    );
    let object = json!({
        "apiVersion": group_version, "kind": kind,
        "metadata": {"name": name, "namespace": kubenest_testkit::flux::NAMESPACE,
                     "annotations": {"reconcile.fluxcd.io/requestedAt": common::unique("now")}},
        "spec": spec,
    });
    api.patch(
        name,
        &PatchParams::apply("tests").force(),
        &Patch::Apply(&object),
    )
    .await
    .unwrap();
}

/// The Kustomization's Ready condition: (status, message).
async fn kustomization_ready(name: &str) -> (String, String) {
    let resource = kube::api::ApiResource::from_gvk(&kube::api::GroupVersionKind::gvk(
        "kustomize.toolkit.fluxcd.io",
        "v1",
        "Kustomization",
    ));
    let api: Api<kube::api::DynamicObject> = Api::namespaced_with(
        plane().kube().await,
        kubenest_testkit::flux::NAMESPACE,
        &resource,
    );
    let object = api.get(name).await.unwrap();
    let ready = object.data["status"]["conditions"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|c| c["type"] == "Ready")
        .cloned()
        .unwrap_or(Value::Null);
    (
        ready["status"].as_str().unwrap_or_default().to_owned(),
        ready["message"].as_str().unwrap_or_default().to_owned(),
    )
}

fn app_manifest(namespace: &str, name: &str, project: &str, component: Value) -> String {
    serde_json::to_string_pretty(&json!({
        "apiVersion": "kubenest.io/v1alpha1", "kind": "App",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"project": project, "components": [component]},
    }))
    .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn flux_applies_apps_from_git_through_the_same_door_and_rest_does_not_fight_it() {
    let (org, project, session, _) = setting("flux").await;
    let admin = Client::admin().await;
    let namespace = format!("org-{org}");
    let project_name = project["name"].as_str().unwrap();
    let flux_user = "system:serviceaccount:flux-system:kustomize-controller";
    let actor = format!("kubernetes:{flux_user}");
    let web = |image: &str| json!({"name": "web", "workload": {"image": image, "port": 8080}});

    let git = kubenest_testkit::GitServer::start().await.unwrap();
    git.commit(
        "fleet",
        &[(
            "apps/shop.yaml",
            Some(&app_manifest(
                &namespace,
                "shop",
                project_name,
                web("shop:1"),
            )),
        )],
        "shop 1",
    )
    .unwrap();
    let flux = kubenest_testkit::Flux::start(&plane().kubeconfig, flux_user)
        .await
        .unwrap();
    let reconcile = async || {
        flux_apply(
            "GitRepository",
            "source.toolkit.fluxcd.io/v1",
            "fleet",
            json!({"interval": "1m", "url": git.url("fleet"), "ref": {"branch": "main"}}),
        )
        .await;
        flux_apply(
            "Kustomization",
            "kustomize.toolkit.fluxcd.io/v1",
            "apps",
            json!({"interval": "1m", "path": "./apps", "prune": true,
                   "sourceRef": {"kind": "GitRepository", "name": "fleet"}}),
        )
        .await;
    };
    reconcile().await;

    // Flux applied the App; the door stamped Flux's identity and the gitops path.
    let apps: Api<App> = Api::namespaced(plane().kube().await, &namespace);
    let mut shop = None;
    eventually("Flux applies the App", 90, async || {
        shop = apps.get_opt("shop").await.unwrap();
        shop.is_some()
    })
    .await;
    let shop = shop.unwrap();
    let annotations = shop.annotations();
    assert_eq!(annotations["kubenest.io/actor"], actor, "{}", flux.logs(20));
    assert_eq!(annotations["kubenest.io/actor-path"], "gitops");
    let uid = shop.metadata.uid.clone().unwrap();

    // REST does not rewrite what Git holds.
    let (status, answer) = session
        .call(
            Method::PATCH,
            &format!("/api/v1/apps/{uid}"),
            Some(json!({"progress_deadline_seconds": 300})),
        )
        .await;
    assert_eq!(status, 409, "{answer}");
    assert!(
        answer["detail"]
            .as_str()
            .unwrap()
            .contains("Flux Kustomization flux-system/apps"),
        "{answer}"
    );

    // A change committed to Git is a deployment by Flux.
    git.commit(
        "fleet",
        &[(
            "apps/shop.yaml",
            Some(&app_manifest(
                &namespace,
                "shop",
                project_name,
                web("shop:2"),
            )),
        )],
        "shop 2",
    )
    .unwrap();
    reconcile().await;
    let history = format!("/api/v1/apps/{uid}/deployments");
    let mut rows = Value::Null;
    eventually("the change from Git is recorded", 90, async || {
        rows = admin.get(&history).await.1;
        rows.as_array()
            .is_some_and(|r| r.iter().any(|d| d["diff"].to_string().contains("shop:2")))
    })
    .await;
    assert!(
        rows.as_array()
            .unwrap()
            .iter()
            .all(|d| d["actor"] == actor.as_str()),
        "{rows}"
    );

    // A bad App committed to Git is refused at the door, and Flux says why.
    git.commit(
        "fleet",
        &[(
            "apps/bad.yaml",
            Some(&app_manifest(
                &namespace,
                "bad",
                project_name,
                json!({"name": "db", "addon": {"definition": "nosuchdb"}}),
            )),
        )],
        "a bad app",
    )
    .unwrap();
    reconcile().await;
    let mut ready = (String::new(), String::new());
    eventually("Flux reports the refusal", 90, async || {
        ready = kustomization_ready("apps").await;
        ready.0 == "False" && ready.1.contains("spec.components[0].addon.definition")
    })
    .await;
    assert!(ready.1.contains("rules.kubenest.io"), "{ready:?}");
    assert!(apps.get_opt("bad").await.unwrap().is_none());

    // The audit log has Flux's writes on the gitops path. (Flux tried the bad App as a
    // server-side dry run first, which the webhook refused without recording: a dry run stores
    // nothing, and the webhook declares no side effects on dry runs.)
    let audit = admin
        .expect(
            Method::GET,
            &format!("/api/v1/orgs/{org}/audit?path=gitops"),
            None,
            200,
        )
        .await;
    let shop_entries: Vec<(&str, &str)> = audit["items"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["resource_name"] == "shop" && e["actor"] == actor.as_str())
        .map(|e| {
            (
                e["action"].as_str().unwrap(),
                e["outcome"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        shop_entries,
        [("apps.update", "succeeded"), ("apps.create", "succeeded")],
        "{audit}"
    );
    drop(flux);
}
