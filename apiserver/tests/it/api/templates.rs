//! StackTemplates: from an App, exported, imported, deployed, and from a chart (whose fetch stays off the server's network).

use super::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn templates_are_made_from_an_app_exported_imported_and_deployed_with_parameters() {
    let admin = Client::admin().await;
    let org = org(&admin, "tpl", json!([])).await;
    let registration = cluster(&admin, &org).await;
    let project = project(&admin, &org, registration["cluster_id"].as_str().unwrap()).await;
    let project_id = project["id"].as_str().unwrap();
    let template = admin
        .expect(
            Method::POST,
            "/api/v1/templates",
            Some(json!({
                "name": "web", "scope": "project", "project_id": project_id,
                "parameters": [{"name": "image", "type": "string", "required": true},
                               {"name": "replicas", "type": "integer", "default": "2"}],
                "components": [{"name": "web", "type": "workload",
                    "workload_spec": {"image": "${image}", "replicas": "${replicas}"}}]
            })),
            201,
        )
        .await;
    assert_eq!(template["valid"], true, "{template}");
    let id = template["id"].as_str().unwrap();
    let (status, body) = admin
        .post(
            &format!("/api/v1/templates/{id}/deploy"),
            json!({"project_id": project_id, "name": "from-tpl"}),
        )
        .await;
    assert_eq!(status, 422, "{body}");
    assert!(body["field"].as_str().unwrap().contains("image"), "{body}");
    let app = admin
        .expect(Method::POST, &format!("/api/v1/templates/{id}/deploy"),
            Some(json!({"project_id": project_id, "name": "from-tpl", "parameters": {"image": "web:7"}})), 202)
        .await;
    assert_eq!(app["components"][0]["workload_spec"]["image"], "web:7");
    assert_eq!(app["components"][0]["workload_spec"]["replicas"], 2);

    let exported = admin
        .expect(
            Method::GET,
            &format!("/api/v1/templates/{id}/export"),
            None,
            200,
        )
        .await;
    assert_eq!(exported["kind"], "StackTemplate");
    let imported = admin
        .expect(Method::POST, "/api/v1/templates/import", Some(json!({
            "name": "web-copy", "scope": "project", "project_id": project_id, "template": exported
        })), 201)
        .await;
    assert_eq!(imported["parameters"].as_array().unwrap().len(), 2);
    let copied = admin
        .expect(Method::POST, "/api/v1/templates/from-app", Some(json!({
            "app_id": app["id"], "name": "snapshot", "scope": "project", "project_id": project_id
        })), 201)
        .await;
    assert_eq!(copied["components"][0]["workload_spec"]["image"], "web:7");

    // From any Helm chart: its values become slots with the chart's defaults.
    let charts = &plane().charts;
    charts
        .publish(
            "webapp",
            &[
                ("Chart.yaml", "apiVersion: v2\nname: webapp\nversion: 0.3.0\n"),
                (
                    "values.yaml",
                    "replicaCount: 1\nimage:\n  repository: nginx\n  tag: \"1.27\"\nservice:\n  enabled: true\n",
                ),
                ("templates/cm.yaml", "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{ .Release.Name }}\n"),
            ],
        )
        .unwrap();
    let from_chart = admin
        .expect(
            Method::POST,
            "/api/v1/templates/from-chart",
            Some(json!({
                "name": "webapp", "scope": "project", "project_id": project_id,
                "chart": {"repository": charts.url(), "name": "webapp", "version": "0.3.0"}
            })),
            201,
        )
        .await;
    let slots: Vec<(String, String)> = from_chart["parameters"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| {
            (
                p["name"].as_str().unwrap().to_owned(),
                p["default"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    assert_eq!(
        slots,
        [
            ("image_repository".to_owned(), "nginx".to_owned()),
            ("image_tag".into(), "1.27".into()),
            ("replica_count".into(), "1".into()),
            ("service_enabled".into(), "true".into()),
        ]
    );
    let chart_id = from_chart["id"].as_str().unwrap();
    let from_chart_app = admin
        .expect(
            Method::POST,
            &format!("/api/v1/templates/{chart_id}/deploy"),
            Some(json!({"project_id": project_id, "name": "chart-app",
                        "parameters": {"replica_count": "3"}})),
            202,
        )
        .await;
    let values = &from_chart_app["components"][0]["workload_spec"]["helm"]["values"];
    assert_eq!(values["replicaCount"], 3, "{from_chart_app}");
    assert_eq!(values["image"]["tag"], "1.27");
    // A chart that is not there is refused, naming it.
    let (status, body) = admin
        .post(
            "/api/v1/templates/from-chart",
            json!({
            "name": "missing", "scope": "project", "project_id": project_id,
            "chart": {"repository": charts.url(), "name": "webapp", "version": "9.9.9"}}),
        )
        .await;
    assert_eq!(status, 404, "{body}");
    assert_eq!(body["field"], "chart", "{body}");
    assert_eq!(body["detail"], "the chart cannot be read", "{body}");
    let list = admin
        .expect(
            Method::GET,
            &format!("/api/v1/templates?org={org}"),
            None,
            200,
        )
        .await;
    let edited = admin
        .expect(
            Method::PATCH,
            &format!("/api/v1/templates/{id}"),
            Some(json!({"description": "the web tier"})),
            200,
        )
        .await;
    assert_eq!(edited["description"], "the web tier");
    let (status, body) = admin
        .call(
            Method::PATCH,
            &format!("/api/v1/templates/{id}"),
            Some(json!({"components": [{"name": "web", "type": "workload",
                "workload_spec": {"image": "${nope}"}}]})),
        )
        .await;
    assert_eq!(status, 422, "{body}");
    assert!(body["detail"].as_str().unwrap().contains("nope"), "{body}");
    assert!(list.as_array().unwrap().len() >= 3);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_template_from_a_chart_fetches_nothing_for_outsiders_nor_from_the_servers_own_network() {
    let admin = Client::admin().await;
    let [member, viewer, outsider, stranger] = [
        user(&admin, "member").await,
        user(&admin, "viewer").await,
        user(&admin, "outsider").await,
        user(&admin, "stranger").await,
    ];
    let acme = org(&admin, "ssrf", json!([])).await;
    let c = cluster(&admin, &acme).await;
    let cluster_id = c["cluster_id"].as_str().unwrap();
    let p = project(&admin, &acme, cluster_id).await;
    let project_id = p["id"].as_str().unwrap().to_owned();
    let other = project(&admin, &acme, cluster_id).await;
    for (who, project, role) in [
        (&member, project_id.as_str(), "member"),
        (&viewer, project_id.as_str(), "viewer"),
        (&outsider, other["id"].as_str().unwrap(), "admin"),
    ] {
        admin
            .expect(
                Method::PUT,
                &format!("/api/v1/projects/{project}/members"),
                Some(json!({"user": who, "role": role})),
                200,
            )
            .await;
    }
    let detour = &plane().detour;
    detour.publish("webapp", &WEBAPP_CHART).unwrap();

    // No write access to the placement: refused before the allowed repository hears of it.
    for who in [&viewer, &outsider, &stranger] {
        let client = Client::login(0, who, PASSWORD).await;
        let (status, body) = from_chart(&client, &project_id, detour.url()).await;
        assert!(status == 403 || status == 404, "{who}: {status} {body}");
    }
    assert_eq!(
        detour.requests(),
        0,
        "the repository was asked for a refused caller"
    );
    let member = Client::login(0, &member, PASSWORD).await;
    let (status, body) = from_chart(&member, &project_id, detour.url()).await;
    assert_eq!(status, 201, "{body}");
    assert!(detour.requests() >= 2, "index and package");

    // A server on loopback that is not on the allow-list is never reached, however written.
    let target = kubenest_testkit::ChartRepository::start(&plane().ca)
        .await
        .unwrap();
    target.publish("webapp", &WEBAPP_CHART).unwrap();
    let port = target.url().rsplit(':').next().unwrap().to_owned();
    let refused = |body: &Value| {
        assert_eq!(body["field"], "chart", "{body}");
        assert_eq!(body["detail"], "the chart cannot be read", "{body}");
    };
    for repository in [
        format!("https://127.0.0.1:{port}"),
        format!("https://localhost:{port}"),
        format!("https://[::ffff:127.0.0.1]:{port}"),
        format!("oci://127.0.0.1:{port}/charts"),
        format!("oci://localhost:{port}/charts"),
    ] {
        let (status, body) = from_chart(&member, &project_id, &repository).await;
        assert_eq!(status, 404, "{repository}: {body}");
        refused(&body);
    }
    // Shorthand addresses (`127.1`, `0x7f.1`) are not hosts the document's pattern admits:
    // refused at the door, naming the field.
    for repository in [
        format!("https://127.1:{port}"),
        format!("https://0x7f.1:{port}"),
    ] {
        let (status, body) = from_chart(&member, &project_id, &repository).await;
        assert_eq!(status, 422, "{repository}: {body}");
        assert_eq!(body["field"], "chart.repository", "{body}");
    }
    assert_eq!(target.requests(), 0, "a loopback server was reached");

    // An allowed repository cannot lead the fetch elsewhere: not by its index's chart URL...
    detour.index_at(target.url()).unwrap();
    let (status, body) = from_chart(&member, &project_id, detour.url()).await;
    assert_eq!(status, 404, "{body}");
    refused(&body);
    // ...nor by redirecting.
    detour.redirect_to(target.url());
    let (status, body) = from_chart(&member, &project_id, detour.url()).await;
    assert_eq!(status, 404, "{body}");
    refused(&body);
    assert_eq!(
        target.requests(),
        0,
        "an allowed server led the fetch to another"
    );

    // Plain HTTP and credentials in the URL are refused at the door, naming the field.
    for repository in [
        format!("http://127.0.0.1:{port}"),
        "https://user:secret@charts.example.test".to_owned(),
        format!("oci://user:secret@127.0.0.1:{port}/charts"),
    ] {
        let (status, body) = from_chart(&member, &project_id, &repository).await;
        assert_eq!(status, 422, "{repository}: {body}");
        assert_eq!(body["field"], "chart.repository", "{body}");
    }
}
