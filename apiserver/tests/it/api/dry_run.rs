//! `?dryRun=true`: a write is judged as it would be — the API's checks, the caller's role, the
//! management API server's schema and rules — and nothing is kept: no object, no audit entry,
//! no App in the lists. A write without a dry run refuses one by name rather than doing it.

use super::*;

/// The status, the `kubenest-dry-run` header and the body of a request as `client`.
async fn send(
    client: &Client,
    method: Method,
    path: &str,
    body: Option<Value>,
) -> (u16, bool, Value) {
    let mut request = client
        .http
        .request(method, format!("{}{path}", client.base))
        .bearer_auth(client.token.clone().unwrap());
    if let Some(body) = body {
        request = request.json(&body);
    }
    let response = request.send().await.unwrap();
    let status = response.status().as_u16();
    let dry = response.headers().get("kubenest-dry-run").is_some();
    let body = response.json().await.unwrap_or(Value::Null);
    (status, dry, body)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dry_run_judges_the_write_as_it_would_be_and_keeps_nothing() {
    let admin = Client::admin().await;
    let [owner, viewer, outsider] = [
        user(&admin, "dry-owner").await,
        user(&admin, "dry-viewer").await,
        user(&admin, "dry-outsider").await,
    ];
    let org = org(
        &admin,
        "dry",
        json!([{"user": owner, "role": "admin"}, {"user": viewer, "role": "viewer"}]),
    )
    .await;
    let other = super::org(
        &admin,
        "dry-other",
        json!([{"user": outsider, "role": "admin"}]),
    )
    .await;
    let registration = cluster(&admin, &org).await;
    let cluster_id = registration["cluster_id"].as_str().unwrap().to_owned();
    let project = project(&admin, &org, &cluster_id).await;
    let project_id = project["id"].as_str().unwrap().to_owned();
    let owner = Client::login(0, &owner, PASSWORD).await;
    let viewer = Client::login(1, &viewer, PASSWORD).await;
    let outsider = Client::login(0, &outsider, PASSWORD).await;

    // A create: the answer it would have, and no App afterwards.
    let app = web_app(&project_id, "tried", "tried:1");
    let (status, dry, body) = send(
        &owner,
        Method::POST,
        "/api/v1/apps?dryRun=true",
        Some(app.clone()),
    )
    .await;
    assert_eq!((status, dry), (202, true), "{body}");
    assert_eq!(body["name"], "tried", "{body}");
    let (status, _) = owner
        .get(&format!("/api/v1/apps/{}", body["id"].as_str().unwrap()))
        .await;
    assert_eq!(status, 404, "a dry run's App was kept");
    let listed = all_pages(&owner, &format!("&project_id={project_id}")).await;
    assert!(!listed.contains(&"tried".to_owned()), "{listed:?}");

    // What the real write refuses, the dry run refuses the same way.
    let mut bad = app.clone();
    bad["name"] = json!("Not_A_Label");
    let (status, dry, body) =
        send(&owner, Method::POST, "/api/v1/apps?dryRun=true", Some(bad)).await;
    assert_eq!(
        (status, dry, body["field"].as_str()),
        (422, true, Some("name")),
        "{body}"
    );

    // The caller's role counts as for the real write: a viewer may not, another
    // organization's admin does not even see the project.
    let (status, _, body) = send(
        &viewer,
        Method::POST,
        "/api/v1/apps?dryRun=true",
        Some(app.clone()),
    )
    .await;
    assert_eq!(status, 403, "{body}");
    let (status, _, body) = send(
        &outsider,
        Method::POST,
        "/api/v1/apps?dryRun=true",
        Some(app.clone()),
    )
    .await;
    assert_eq!(status, 404, "{body}");

    // A change and a delete of a real App leave it as it was.
    let (status, _, created) = send(&owner, Method::POST, "/api/v1/apps", Some(app)).await;
    assert_eq!(status, 202, "{created}");
    let id = created["id"].as_str().unwrap().to_owned();
    let path = format!("/api/v1/apps/{id}");
    let components = json!({"components": [{"name": "web", "type": "workload",
        "workload_spec": {"image": "tried:2", "replicas": 1, "port": 8080}}]});
    let (status, dry, body) = send(
        &owner,
        Method::PATCH,
        &format!("{path}?dryRun=true"),
        Some(components),
    )
    .await;
    assert_eq!((status, dry), (202, true), "{body}");
    assert_eq!(
        body["components"][0]["workload_spec"]["image"], "tried:2",
        "{body}"
    );
    let (status, dry, body) =
        send(&owner, Method::DELETE, &format!("{path}?dryRun=true"), None).await;
    assert!(dry && status < 300, "{status}: {body}");
    let (status, kept) = owner.get(&path).await;
    assert_eq!(status, 200, "a dry run deleted the App: {kept}");
    assert_eq!(
        kept["components"][0]["workload_spec"]["image"], "tried:1",
        "a dry run changed the App: {kept}"
    );

    // A project: the answer, and no project.
    let (status, dry, body) = send(
        &owner,
        Method::POST,
        &format!("/api/v1/orgs/{org}/projects?dryRun=true"),
        Some(json!({"name": "tried-project", "cluster_id": cluster_id})),
    )
    .await;
    assert_eq!((status, dry), (201, true), "{body}");
    let (_, projects) = owner.get(&format!("/api/v1/orgs/{org}/projects")).await;
    assert!(
        !projects.to_string().contains("tried-project"),
        "a dry run's project was kept: {projects}"
    );

    // The audit log tells the dry runs from the real create, refused ones included.
    let (_, audit) = owner
        .get(&format!("/api/v1/orgs/{org}/audit?limit=100"))
        .await;
    let count = |action: &str, outcome: &str| {
        audit["items"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|e| e["action"] == action && e["outcome"] == outcome)
            .count()
    };
    assert_eq!(count("POST /api/v1/apps", "succeeded"), 1, "{audit}");
    assert_eq!(
        count("POST /api/v1/apps (dry run)", "succeeded"),
        1,
        "{audit}"
    );
    assert!(
        count("POST /api/v1/apps (dry run)", "refused") >= 1,
        "{audit}"
    );

    // A value that is not a boolean, a write without a dry run, and a read, each refused by
    // the parameter's name; the write without one did not happen.
    let (status, _, body) = send(
        &owner,
        Method::POST,
        &format!("/api/v1/apps/{id}/pause?dryRun=yes"),
        None,
    )
    .await;
    assert_eq!(
        (status, body["field"].as_str()),
        (422, Some("dryRun")),
        "{body}"
    );
    let (status, _, body) = send(
        &admin,
        Method::POST,
        "/api/v1/users?dryRun=true",
        Some(json!({"username": unique("dry-nobody"), "password": PASSWORD})),
    )
    .await;
    assert_eq!(
        (status, body["field"].as_str()),
        (422, Some("dryRun")),
        "{body}"
    );
    assert!(
        body["detail"].as_str().unwrap().contains("has no dry run"),
        "{body}"
    );
    let (status, _, body) = send(&owner, Method::GET, "/api/v1/apps?dryRun=true", None).await;
    assert_eq!(
        (status, body["field"].as_str()),
        (400, Some("dryRun")),
        "{body}"
    );
    let _ = other;
}
