//! A verification's metrics path becomes part of the URL through which the agent reaches the
//! pods: one with `..` is refused at REST and at kubectl (by the resources' schema), on an App
//! and on an organization's default, naming the same field; so are the other values out of
//! bounds.

use super::*;
use kubenest_crds::organization::Organization;

/// App `name` of `project` with one web workload and `verification` (the resource's spelling).
fn verified_app(name: &str, project: &str, verification: Value) -> App {
    serde_json::from_value(json!({
        "apiVersion": "kubenest.io/v1alpha1", "kind": "App",
        "metadata": {"name": name},
        "spec": {"project": project,
                 "components": [{"name": "web", "workload": {"image": "shop:1", "port": 8080}}],
                 "verification": verification},
    }))
    .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_metrics_path_climbing_out_is_refused_at_both_doors_with_the_field() {
    let (org, project, session, id) = setting("verifydoor").await;
    let project_name = project["name"].as_str().unwrap();
    let apps: Api<App> = Api::namespaced(as_user(&id).await, &format!("org-{org}"));
    let cases = [
        (
            json!({"metrics": {"port": 9090, "path": "/../x"}}),
            json!({"metrics": {"port": 9090, "path": "/../x"}}),
            "verification.metrics.path",
        ),
        (
            json!({"window_seconds": 10}),
            json!({"windowSeconds": 10}),
            "verification.window_seconds",
        ),
        (
            json!({"metrics": {"port": 0}}),
            json!({"metrics": {"port": 0}}),
            "verification.metrics.port",
        ),
        (
            json!({"metrics": {"port": 9090, "requests_metric": "http-requests"}}),
            json!({"metrics": {"port": 9090, "requestsMetric": "http-requests"}}),
            "verification.metrics.requests_metric",
        ),
    ];
    for (i, (rest_value, crd_value, field)) in cases.into_iter().enumerate() {
        let name = format!("shop-{i}");
        let (status, body) = session
            .post(
                "/api/v1/apps",
                json!({"project_id": project["id"], "name": name, "verification": rest_value,
                       "components": [{"name": "web", "type": "workload",
                                       "workload_spec": {"image": "shop:1", "port": 8080}}]}),
            )
            .await;
        let rest = rest_refusal(status, &body);
        assert_eq!(
            (rest.status, rest.field.as_deref()),
            (422, Some(field)),
            "{body}"
        );
        let object = verified_app(&name, project_name, crd_value);
        let kube = kube_refusal(
            apps.create(&PostParams::default(), &object)
                .await
                .unwrap_err(),
        );
        assert_eq!(
            (kube.status, kube.field.as_deref()),
            (422, Some(field)),
            "{kube:?}"
        );
        assert!(apps.get_opt(&name).await.unwrap().is_none(), "{name}");
    }

    // A path with single dots is one the agent may ask for.
    let dotted = json!({"metrics": {"port": 9090, "path": "/.well-known/prometheus.v1"}});
    apps.create(
        &PostParams::default(),
        &verified_app("dotted", project_name, dotted.clone()),
    )
    .await
    .unwrap();
    let stored = apps.get("dotted").await.unwrap();
    assert_eq!(
        stored.spec.verification.unwrap().metrics.unwrap().path,
        "/.well-known/prometheus.v1"
    );

    // An organization's default, changed by a platform operator with every Kubernetes power
    // and by the platform's admin through REST.
    let operator = impersonating("platform-operator", &["system:masters"]).await;
    let orgs: Api<Organization> = Api::all(operator);
    let climbing =
        json!({"spec": {"verification": {"metrics": {"port": 9090, "path": "/a/../../x"}}}});
    let kube = kube_refusal(
        orgs.patch(&org, &PatchParams::default(), &Patch::Merge(&climbing))
            .await
            .unwrap_err(),
    );
    let admin = Client::admin().await;
    let (status, body) = admin
        .call(
            Method::PATCH,
            &format!("/api/v1/orgs/{org}"),
            Some(json!({"verification": {"metrics": {"port": 9090, "path": "/a/../../x"}}})),
        )
        .await;
    let rest = rest_refusal(status, &body);
    assert_eq!(
        (rest.status, rest.field.as_deref()),
        (422, Some("verification.metrics.path")),
        "{body}"
    );
    assert_eq!((kube.status, kube.field), (rest.status, rest.field));
    let stored = Api::<Organization>::all(plane().kube().await)
        .get(&org)
        .await
        .unwrap();
    assert_eq!(stored.spec.verification, None);
}
