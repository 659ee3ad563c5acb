//! Verified deployments through REST: an App's `verification` set, read, changed and removed;
//! every bad value refused naming its field with nothing written; the organization's default,
//! which only its admins change and only those who see the organization read.

use super::*;
use kube::api::{ApiResource, DynamicObject};
use kubenest_crds::organization::Organization;

/// The spec of App `name` in `org` as the management cluster stores it (camelCase).
async fn stored_app_spec(org: &str, name: &str) -> Value {
    let kube = plane().kube().await;
    let api: Api<DynamicObject> =
        Api::namespaced_with(kube, &format!("org-{org}"), &ApiResource::erase::<App>(&()));
    api.get(name).await.unwrap().data["spec"].clone()
}

/// The spec of organization `org` as the management cluster stores it (camelCase).
async fn stored_org_spec(org: &str) -> Value {
    let kube = plane().kube().await;
    let api: Api<DynamicObject> = Api::all_with(kube, &ApiResource::erase::<Organization>(&()));
    api.get(org).await.unwrap().data["spec"].clone()
}

/// Bad verifications and the field each is refused by.
fn bad_verifications() -> Vec<(Value, &'static str)> {
    let long = format!("/{}", "a".repeat(256));
    vec![
        (json!({"window_seconds": 29}), "verification.window_seconds"),
        (
            json!({"window_seconds": 3601}),
            "verification.window_seconds",
        ),
        (
            json!({"on_failure": "sometimes"}),
            "verification.on_failure",
        ),
        (json!({"on_failure": "Rollback"}), "verification.on_failure"),
        (json!({"metrics": {"port": 0}}), "verification.metrics.port"),
        (
            json!({"metrics": {"port": 65536}}),
            "verification.metrics.port",
        ),
        (
            json!({"metrics": {"port": 9090, "path": "metrics"}}),
            "verification.metrics.path",
        ),
        (
            json!({"metrics": {"port": 9090, "path": "/metrics?x=1"}}),
            "verification.metrics.path",
        ),
        (
            json!({"metrics": {"port": 9090, "path": "/a/../../x"}}),
            "verification.metrics.path",
        ),
        (
            json!({"metrics": {"port": 9090, "path": "//metrics"}}),
            "verification.metrics.path",
        ),
        (
            json!({"metrics": {"port": 9090, "path": "/metrics."}}),
            "verification.metrics.path",
        ),
        (
            json!({"metrics": {"port": 9090, "path": long}}),
            "verification.metrics.path",
        ),
        (
            json!({"metrics": {"port": 9090, "requests_metric": "http-requests"}}),
            "verification.metrics.requests_metric",
        ),
        (
            json!({"metrics": {"port": 9090, "latency_metric": "a".repeat(201)}}),
            "verification.metrics.latency_metric",
        ),
    ]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_apps_verification_is_read_with_its_defaults_changed_and_removed() {
    let admin = Client::admin().await;
    let org = org(&admin, "verify", json!([])).await;
    let registration = cluster(&admin, &org).await;
    let project = project(&admin, &org, registration["cluster_id"].as_str().unwrap()).await;
    let mut body = web_app(project["id"].as_str().unwrap(), "shop", "shop:1");
    body["verification"] = json!({"on_failure": "hold",
                                  "metrics": {"port": 9090, "requests_metric": "shop_requests"}});
    let created = admin
        .expect(Method::POST, "/api/v1/apps", Some(body), 202)
        .await;
    let filled = json!({"window_seconds": 180, "on_failure": "hold",
                        "metrics": {"port": 9090, "path": "/metrics",
                                    "requests_metric": "shop_requests",
                                    "latency_metric": "http_request_duration_seconds"}});
    assert_eq!(created["verification"], filled, "{created}");
    let app = format!("/api/v1/apps/{}", created["id"].as_str().unwrap());
    let got = admin.expect(Method::GET, &app, None, 200).await;
    assert_eq!(got["verification"], filled, "{got}");
    assert_eq!(
        stored_app_spec(&org, "shop").await["verification"],
        json!({"windowSeconds": 180, "onFailure": "hold",
               "metrics": {"port": 9090, "path": "/metrics", "requestsMetric": "shop_requests"}})
    );

    // Metrics given again without a name drop the stored one.
    let renamed = admin
        .expect(
            Method::PATCH,
            &app,
            Some(json!({"verification": {"metrics": {"port": 9090}}})),
            202,
        )
        .await;
    assert_eq!(
        renamed["verification"]["metrics"]["requests_metric"], "http_requests_total",
        "{renamed}"
    );
    assert_eq!(
        stored_app_spec(&org, "shop").await["verification"]["metrics"],
        json!({"port": 9090, "path": "/metrics"})
    );

    // A change replaces the whole verification: the metrics it leaves out are gone.
    let changed = admin
        .expect(
            Method::PATCH,
            &app,
            Some(json!({"verification": {"window_seconds": 600}})),
            202,
        )
        .await;
    assert_eq!(
        changed["verification"],
        json!({"window_seconds": 600, "on_failure": "rollback", "metrics": null}),
        "{changed}"
    );
    assert_eq!(
        stored_app_spec(&org, "shop").await["verification"],
        json!({"windowSeconds": 600, "onFailure": "rollback"})
    );
    // A change of something else leaves it as it is.
    let other = admin
        .expect(
            Method::PATCH,
            &app,
            Some(json!({"progress_deadline_seconds": 300})),
            202,
        )
        .await;
    assert_eq!(other["verification"]["window_seconds"], 600, "{other}");

    // `null` removes it: the organization's default applies again.
    let cleared = admin
        .expect(
            Method::PATCH,
            &app,
            Some(json!({"verification": null})),
            202,
        )
        .await;
    assert_eq!(cleared["verification"], Value::Null, "{cleared}");
    let spec = stored_app_spec(&org, "shop").await;
    assert!(spec.get("verification").is_none(), "{spec}");
    let got = admin.expect(Method::GET, &app, None, 200).await;
    assert_eq!(got["verification"], Value::Null, "{got}");
    assert_eq!(got["progress_deadline_seconds"], 300, "{got}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_bad_verification_is_refused_naming_its_field_and_nothing_is_written() {
    let admin = Client::admin().await;
    let org = org(&admin, "badverify", json!([])).await;
    let registration = cluster(&admin, &org).await;
    let project = project(&admin, &org, registration["cluster_id"].as_str().unwrap()).await;
    let project_id = project["id"].as_str().unwrap();
    let mut good = web_app(project_id, "good", "good:1");
    good["verification"] = json!({"metrics": {"port": 9090, "path": "/stats"}});
    let created = admin
        .expect(Method::POST, "/api/v1/apps", Some(good), 202)
        .await;
    let app = format!("/api/v1/apps/{}", created["id"].as_str().unwrap());
    let before = stored_app_spec(&org, "good").await;
    let kube = plane().kube().await;
    let apps: Api<App> = Api::namespaced(kube, &format!("org-{org}"));
    let org_path = format!("/api/v1/orgs/{org}");

    for (i, (verification, field)) in bad_verifications().into_iter().enumerate() {
        let name = format!("bad-{i}");
        let mut body = web_app(project_id, &name, "bad:1");
        body["verification"] = verification.clone();
        let patch = json!({"verification": verification});
        for (what, (status, answer)) in [
            ("create", admin.post("/api/v1/apps", body).await),
            (
                "change",
                admin.call(Method::PATCH, &app, Some(patch.clone())).await,
            ),
            (
                "org default",
                admin.call(Method::PATCH, &org_path, Some(patch)).await,
            ),
        ] {
            assert_eq!(
                (status.as_u16(), answer["field"].as_str()),
                (422, Some(field)),
                "{what} with {verification}: {answer}"
            );
            assert_eq!(answer["code"], "validation_failed");
        }
        assert!(apps.get_opt(&name).await.unwrap().is_none(), "{name}");
    }
    assert_eq!(stored_app_spec(&org, "good").await, before);
    assert!(stored_org_spec(&org).await.get("verification").is_none());

    // Unknown fields and a change that changes nothing are refused too.
    for unknown in [
        json!({"verification": {"window": 60}}),
        json!({"verification": {"metrics": {"port": 9090, "scheme": "https"}}}),
    ] {
        let (status, answer) = admin.call(Method::PATCH, &app, Some(unknown)).await;
        assert_eq!(status, 400, "{answer}");
        assert!(
            answer["detail"].as_str().unwrap().contains("unknown field"),
            "{answer}"
        );
    }
    // A value of the wrong type, or an array where an object belongs, names its field.
    for (wrong, field) in [
        (
            json!({"verification": {"window_seconds": "long"}}),
            "verification.window_seconds",
        ),
        (
            json!({"verification": {"metrics": [9090]}}),
            "verification.metrics",
        ),
        (json!({"verification": [600]}), "verification"),
    ] {
        let (status, answer) = admin.call(Method::PATCH, &app, Some(wrong)).await;
        assert_eq!(
            (status.as_u16(), answer["field"].as_str()),
            (400, Some(field)),
            "{answer}"
        );
    }
    let (status, answer) = admin.call(Method::PATCH, &org_path, Some(json!({}))).await;
    assert_eq!(status, 400, "{answer}");
    assert_eq!(stored_app_spec(&org, "good").await, before);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_organization_admins_set_the_default_and_other_organizations_do_not_see_it() {
    let admin = Client::admin().await;
    let names: Vec<String> = futures::future::join_all(
        ["vadmin", "vmember", "vviewer", "voutsider"]
            .iter()
            .map(|p| user(&admin, p)),
    )
    .await;
    let [oadmin, pmember, pviewer, outsider] = <[String; 4]>::try_from(names).unwrap();
    let org = org(&admin, "vorg", json!([{"user": oadmin, "role": "admin"}])).await;
    let other_org = org_with_default(&admin, &outsider).await;
    let registration = cluster(&admin, &org).await;
    let project = project(&admin, &org, registration["cluster_id"].as_str().unwrap()).await;
    let project_id = project["id"].as_str().unwrap();
    for (who, role) in [(&pmember, "member"), (&pviewer, "viewer")] {
        admin
            .expect(
                Method::PUT,
                &format!("/api/v1/projects/{project_id}/members"),
                Some(json!({"user": who, "role": role})),
                200,
            )
            .await;
    }
    let created = admin
        .expect(
            Method::POST,
            "/api/v1/apps",
            Some(web_app(project_id, "shop", "shop:1")),
            202,
        )
        .await;
    let app = format!("/api/v1/apps/{}", created["id"].as_str().unwrap());
    let org_path = format!("/api/v1/orgs/{org}");
    let default = json!({"verification": {"window_seconds": 300,
                                          "metrics": {"port": 9100, "path": "/stats"}}});
    let shown = json!({"window_seconds": 300, "on_failure": "rollback",
                       "metrics": {"port": 9100, "path": "/stats",
                                   "requests_metric": "http_requests_total",
                                   "latency_metric": "http_request_duration_seconds"}});
    let [oadmin, pmember, pviewer, outsider] = [
        Client::login(0, &oadmin, PASSWORD).await,
        Client::login(1, &pmember, PASSWORD).await,
        Client::login(0, &pviewer, PASSWORD).await,
        Client::login(1, &outsider, PASSWORD).await,
    ];

    // A project member sees the organization but may not change it; a project viewer may not
    // change the App's verification; another organization's admin reaches neither.
    let refused = [
        (
            &pmember,
            Method::PATCH,
            org_path.clone(),
            Some(default.clone()),
            403,
        ),
        (
            &pviewer,
            Method::PATCH,
            org_path.clone(),
            Some(default.clone()),
            403,
        ),
        (
            &pviewer,
            Method::PATCH,
            app.clone(),
            Some(default.clone()),
            403,
        ),
        (&outsider, Method::GET, org_path.clone(), None, 404),
        (
            &outsider,
            Method::PATCH,
            org_path.clone(),
            Some(default.clone()),
            404,
        ),
        (
            &outsider,
            Method::PATCH,
            app.clone(),
            Some(default.clone()),
            404,
        ),
    ];
    for (client, method, path, body, want) in refused {
        let (status, answer) = client.call(method.clone(), &path, body).await;
        assert_eq!(
            status.as_u16(),
            want,
            "{method} {path} as {}: {answer}",
            client.user
        );
    }
    assert!(stored_org_spec(&org).await.get("verification").is_none());
    assert!(
        stored_app_spec(&org, "shop")
            .await
            .get("verification")
            .is_none()
    );
    // Nor does another organization's own default leak into this one's.
    let got = pmember.expect(Method::GET, &org_path, None, 200).await;
    assert_eq!(got["verification"], Value::Null, "{got}");

    // The organization's admin sets it; whoever sees the organization reads it.
    let set = oadmin
        .expect(Method::PATCH, &org_path, Some(default.clone()), 200)
        .await;
    assert_eq!(set["verification"], shown, "{set}");
    assert_eq!(
        stored_org_spec(&org).await["verification"],
        json!({"windowSeconds": 300, "onFailure": "rollback",
               "metrics": {"port": 9100, "path": "/stats"}})
    );
    for client in [&pmember, &pviewer] {
        let got = client.expect(Method::GET, &org_path, None, 200).await;
        assert_eq!(got["verification"], shown, "{got}");
    }
    let listed = pmember.expect(Method::GET, "/api/v1/orgs", None, 200).await;
    assert_eq!(listed[0]["verification"], shown, "{listed}");
    // The App's own stays unset: the default is the organization's.
    let got = pviewer.expect(Method::GET, &app, None, 200).await;
    assert_eq!(got["verification"], Value::Null, "{got}");
    // A project member sets the App's own.
    let own = pmember
        .expect(
            Method::PATCH,
            &app,
            Some(json!({"verification": {"on_failure": "none"}})),
            202,
        )
        .await;
    assert_eq!(own["verification"]["on_failure"], "none", "{own}");

    // The outsider's organization kept its own default, and the admin removes this one.
    let theirs = outsider
        .expect(Method::GET, &format!("/api/v1/orgs/{other_org}"), None, 200)
        .await;
    assert_eq!(theirs["verification"]["on_failure"], "hold", "{theirs}");
    let cleared = oadmin
        .expect(
            Method::PATCH,
            &org_path,
            Some(json!({"verification": null})),
            200,
        )
        .await;
    assert_eq!(cleared["verification"], Value::Null, "{cleared}");
    assert!(stored_org_spec(&org).await.get("verification").is_none());
}

/// An organization created with a default (by the platform's admin) whose admin is `owner`;
/// its name.
async fn org_with_default(admin: &Client, owner: &str) -> String {
    let name = common::unique("vother");
    let created = admin
        .expect(
            Method::POST,
            "/api/v1/orgs",
            Some(json!({"name": name, "display_name": "Other",
                        "members": [{"user": owner, "role": "admin"}],
                        "verification": {"on_failure": "hold"}})),
            201,
        )
        .await;
    assert_eq!(
        created["verification"],
        json!({"window_seconds": 180, "on_failure": "hold", "metrics": null}),
        "{created}"
    );
    name
}
