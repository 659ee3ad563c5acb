//! An ingress with `tls` and no `tls_secret` takes its certificate from the project's ingress
//! CA: while the project has none, the App is refused alike through REST and kubectl (and so
//! Git, which applies through the same webhook), naming the ingress's `tls`; once it has one,
//! or with a certificate's Secret of the user's own, it is taken.

use super::*;

/// A web workload with `ingress`, in the REST and in the CRD spelling.
fn with_ingress(rest_ingress: Value, crd_ingress: Value) -> (Value, Value) {
    (
        json!([{"name": "web", "type": "workload",
                "workload_spec": {"image": "shop:1", "port": 8080, "ingress": rest_ingress}}]),
        json!([{"name": "web", "workload": {"image": "shop:1", "port": 8080,
                "ingress": crd_ingress}}]),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tls_without_a_certificate_is_refused_alike_until_the_project_has_an_ingress_ca() {
    let (org, project, session, id) = setting("ingressca").await;
    let namespace = format!("org-{org}");
    let project_name = project["name"].as_str().unwrap();
    let project_id = project["id"].as_str().unwrap();
    let apps: Api<App> = Api::namespaced(as_user(&id).await, &namespace);
    let field = "components[0].workload_spec.ingress.tls";
    let (rest_tls, crd_tls) = with_ingress(
        json!({"host": "shop.example.test", "tls": true}),
        json!({"host": "shop.example.test", "path": "/", "tls": true}),
    );

    // REST and kubectl refuse it alike, naming the field and both ways on.
    let (status, body) = session
        .post(
            "/api/v1/apps",
            json!({"project_id": project_id, "name": "shop", "components": rest_tls}),
        )
        .await;
    let rest = rest_refusal(status, &body);
    assert_eq!(
        (rest.status, rest.field.as_deref()),
        (422, Some(field)),
        "{body}"
    );
    for needed in [
        "has no ingress CA",
        &format!("PUT /api/v1/projects/{project_id}/ingress-ca"),
        "kubenest projects ingress-ca set",
        "tls_secret",
    ] {
        assert!(rest.reason.contains(needed), "{needed}: {}", rest.reason);
    }
    let object = app_object("shop", project_name, crd_tls.clone());
    let kube = kube_refusal(
        apps.create(&PostParams::default(), &object)
            .await
            .unwrap_err(),
    );
    assert_eq!(kube, rest);
    assert!(apps.get_opt("shop").await.unwrap().is_none());

    // A change that turns tls on is refused the same way on both paths.
    let (plain_rest, _) = with_ingress(
        json!({"host": "shop.example.test"}),
        json!({"host": "shop.example.test", "path": "/"}),
    );
    let created = session
        .expect(
            Method::POST,
            "/api/v1/apps",
            Some(json!({"project_id": project_id, "name": "plain", "components": plain_rest})),
            202,
        )
        .await;
    let (status, body) = session
        .call(
            Method::PATCH,
            &format!("/api/v1/apps/{}", created["id"].as_str().unwrap()),
            Some(json!({"components": rest_tls})),
        )
        .await;
    assert_eq!(rest_refusal(status, &body), rest, "{body}");
    let patch = json!({"spec": {"components": crd_tls}});
    let kube = kube_refusal(
        apps.patch("plain", &PatchParams::default(), &Patch::Merge(&patch))
            .await
            .unwrap_err(),
    );
    assert_eq!(kube, rest);
    let tls = async || {
        let stored = apps.get("plain").await.unwrap();
        let workload = stored.spec.components[0].workload.clone().unwrap();
        workload.ingress.unwrap().tls
    };
    assert!(!tls().await);

    // A certificate of the user's own needs no CA.
    let (own_rest, own_crd) = with_ingress(
        json!({"host": "own.example.test", "tls": true, "tls_secret": "own-cert"}),
        json!({"host": "own.example.test", "path": "/", "tls": true, "tlsSecret": "own-cert"}),
    );
    session
        .expect(
            Method::POST,
            "/api/v1/apps",
            Some(json!({"project_id": project_id, "name": "own", "components": own_rest})),
            202,
        )
        .await;
    apps.create(
        &PostParams::default(),
        &app_object("own-kube", project_name, own_crd),
    )
    .await
    .unwrap();

    // Once the project has a CA (its manifest says so, as Git would keep it), both doors take
    // tls without a certificate of its own.
    let projects: Api<Project> = Api::namespaced(plane().kube().await, &namespace);
    projects
        .patch(
            project_name,
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"ingressCa": true}})),
        )
        .await
        .unwrap();
    session
        .expect(
            Method::POST,
            "/api/v1/apps",
            Some(json!({"project_id": project_id, "name": "shop", "components": rest_tls})),
            202,
        )
        .await;
    apps.patch("plain", &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .unwrap();
    assert!(tls().await);
}

/// A certificate's Secret name reaches a manifest: one DNS label of the App's own namespace,
/// never a path, a flag, another namespace's Secret or one of kubenest's. Each such value is
/// refused alike by REST and kubectl, naming `tls_secret`, and by the hub's door.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hostile_tls_secret_is_refused_at_every_door_naming_it() {
    let (org, project, session, id) = setting("tlssecret").await;
    let project_name = project["name"].as_str().unwrap();
    let project_id = project["id"].as_str().unwrap();
    let apps: Api<App> = Api::namespaced(as_user(&id).await, &format!("org-{org}"));
    let field = "components[0].workload_spec.ingress.tls_secret";
    let long = "a".repeat(64);
    let hostile = [
        "-x",
        "--all",
        "../ca",
        "kube-system/tls",
        "a/b",
        "Upper",
        "a.b",
        "x\n",
        "x\0y",
        "",
        long.as_str(),
        "kubenest-ingress-ca",
        "kubenest-exports",
    ];
    for value in hostile {
        let (rest_tls, crd_tls) = with_ingress(
            json!({"host": "shop.example.test", "tls": true, "tls_secret": value}),
            json!({"host": "shop.example.test", "path": "/", "tls": true, "tlsSecret": value}),
        );
        let (status, body) = session
            .post(
                "/api/v1/apps",
                json!({"project_id": project_id, "name": "shop", "components": rest_tls}),
            )
            .await;
        let rest = rest_refusal(status, &body);
        assert_eq!(
            (rest.status, rest.field.as_deref()),
            (422, Some(field)),
            "REST took {value:?}: {body}"
        );
        let object = app_object("shop", project_name, crd_tls);
        let kube = kube_refusal(
            apps.create(&PostParams::default(), &object)
                .await
                .unwrap_err(),
        );
        assert_eq!(
            (kube.status, kube.field.as_deref()),
            (422, Some(field)),
            "kubectl took {value:?}: {kube:?}"
        );
    }
    assert!(apps.get_opt("shop").await.unwrap().is_none());
    // The wire's own door: the same values in an `app.deploy` the hub and agent check.
    let fixture = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../contracts/fixtures/app.deploy/pass/git-and-helm-sources.json"
    );
    let frame: Value = serde_json::from_str(&std::fs::read_to_string(fixture).unwrap()).unwrap();
    for value in hostile {
        let mut payload = frame["payload"].clone();
        payload["components"][0]["port"] = json!(8080);
        payload["components"][0]["ingress"] =
            json!({"host": "shop.example.test", "path": "/", "tls": true, "tls_secret": value});
        let deploy: kubenest_contracts::AppDeploy = serde_json::from_value(payload).unwrap();
        let refused = kubenest_domain::app::validate_deploy(&deploy).unwrap_err();
        assert_eq!(
            refused.pointer, "/components/0/ingress/tls_secret",
            "the hub took {value:?}"
        );
    }
}
