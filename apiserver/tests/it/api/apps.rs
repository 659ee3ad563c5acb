//! Apps: create, read, list (paged and filtered on the server), change, pause, and refusals while blocked.

use super::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_app_is_created_read_listed_changed_paused_and_refused_while_blocked() {
    let admin = Client::admin().await;
    let org = org(&admin, "apps", json!([])).await;
    let registration = cluster(&admin, &org).await;
    let project = project(&admin, &org, registration["cluster_id"].as_str().unwrap()).await;
    let project_id = project["id"].as_str().unwrap();

    let created = admin
        .expect(
            Method::POST,
            "/api/v1/apps",
            Some(web_app(project_id, "shop", "shop:1")),
            202,
        )
        .await;
    assert_eq!(created["phase"], "Pending");
    assert_eq!(created["components"][0]["workload_spec"]["image"], "shop:1");
    let id = created["id"].as_str().unwrap().to_owned();

    // The second replica reads it at once (by id, found through a list on an index miss).
    let other = Client::login(1, common::ADMIN, common::ADMIN_PASSWORD).await;
    let got = other
        .expect(Method::GET, &format!("/api/v1/apps/{id}"), None, 200)
        .await;
    assert_eq!(got["project_id"], project_id);
    let list = other
        .expect(Method::GET, &format!("/api/v1/apps?org={org}"), None, 200)
        .await;
    assert_eq!(list["items"].as_array().unwrap().len(), 1);

    // Validation errors name the field in the API's own terms.
    let mut bad = web_app(project_id, "bad", "shop:1");
    bad["components"][0]["workload_spec"]["env"] =
        json!([{"name": "DATABASE_URL", "export_ref": {"component": "db", "export": "dsn"}}]);
    let (status, body) = admin.post("/api/v1/apps", bad).await;
    assert_eq!(status, 422, "{body}");
    assert!(
        body["field"]
            .as_str()
            .unwrap()
            .starts_with("components[0].workload_spec.env"),
        "{body}"
    );
    let mut bad = web_app(project_id, "bad", "shop:1");
    bad["components"][0]["workload_spec"]["replicas"] = json!("two");
    let (status, body) = admin.post("/api/v1/apps", bad).await;
    assert_eq!(status, 400, "{body}");
    assert_eq!(body["field"], "components[0].workload_spec.replicas");
    let (status, _) = admin
        .post("/api/v1/apps", web_app(project_id, "shop", "shop:1"))
        .await;
    assert_eq!(status, 409);

    let changed = admin
        .expect(
            Method::PATCH,
            &format!("/api/v1/apps/{id}"),
            Some(json!({"components": [{"name": "web", "type": "workload",
                "workload_spec": {"image": "shop:2", "replicas": 3}}]})),
            202,
        )
        .await;
    assert_eq!(changed["components"][0]["workload_spec"]["replicas"], 3);
    let paused = admin
        .expect(Method::POST, &format!("/api/v1/apps/{id}/pause"), None, 202)
        .await;
    assert_eq!(paused["paused"], true);
    assert_eq!(
        admin
            .post(&format!("/api/v1/apps/{id}/pause"), json!({}))
            .await
            .0,
        409
    );
    admin
        .expect(
            Method::POST,
            &format!("/api/v1/apps/{id}/resume"),
            None,
            202,
        )
        .await;
    admin
        .expect(
            Method::POST,
            &format!("/api/v1/apps/{id}/redeploy"),
            None,
            202,
        )
        .await;
    // The request is the annotation the controller acts on, next to who asked.
    let object = Api::<App>::namespaced(plane().kube().await, &format!("org-{org}"))
        .get("shop")
        .await
        .unwrap();
    let annotations = object.metadata.annotations.unwrap();
    assert!(
        annotations.contains_key("kubenest.io/redeploy"),
        "{annotations:?}"
    );
    assert_eq!(annotations["kubenest.io/actor"], common::ADMIN);
    let (status, body) = admin
        .post(
            &format!("/api/v1/apps/{id}/rollback"),
            json!({"deployment_id": uuid::Uuid::new_v4()}),
        )
        .await;
    assert_eq!(
        (status.as_u16(), body["field"].as_str()),
        (404, Some("deployment_id"))
    );
    admin
        .expect(
            Method::GET,
            &format!("/api/v1/apps/{id}/deployments"),
            None,
            200,
        )
        .await;

    // Without an agent, a component secret cannot be confirmed: refused, nothing queued.
    let (status, body) = admin
        .call(
            Method::PUT,
            &format!("/api/v1/apps/{id}/components/web/secret"),
            Some(json!({"values": {"API_KEY": "s3cret"}})),
        )
        .await;
    assert_eq!(status, 503, "{body}");
    assert!(!body.to_string().contains("s3cret"));

    let kube = plane().kube().await;
    report_blocked(&kube, &org, "shop").await;
    for (method, path, body) in [
        (
            Method::PATCH,
            format!("/api/v1/apps/{id}"),
            Some(json!({"progress_deadline_seconds": 60})),
        ),
        (Method::POST, format!("/api/v1/apps/{id}/redeploy"), None),
    ] {
        let (status, answer) = admin.call(method.clone(), &path, body).await;
        assert_eq!(status, 409, "{method} {path}: {answer}");
        assert_eq!(answer["code"], "blocked_sync");
        assert!(
            answer["detail"]
                .as_str()
                .unwrap()
                .contains("ProgressDeadlineExceeded")
        );
    }
    let blocked = admin
        .expect(Method::GET, &format!("/api/v1/apps/{id}"), None, 200)
        .await;
    assert_eq!(blocked["sync"]["drift_class"], "blocked_sync");
    admin
        .expect(Method::DELETE, &format!("/api/v1/apps/{id}"), None, 202)
        .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_app_list_pages_through_a_project_an_organization_and_everything_once() {
    let admin = Client::admin().await;
    let (first, second) = (
        org(&admin, "pages", json!([])).await,
        org(&admin, "pages", json!([])).await,
    );
    let mut projects = Vec::new();
    for (org, count) in [(&first, 7), (&first, 4), (&second, 3)] {
        let registration = cluster(&admin, org).await;
        let project = project(&admin, org, registration["cluster_id"].as_str().unwrap()).await;
        let id = project["id"].as_str().unwrap().to_owned();
        let mut names = Vec::new();
        for i in 0..count {
            let name = format!("app-{}-{i}", projects.len());
            admin
                .expect(
                    Method::POST,
                    "/api/v1/apps",
                    Some(web_app(&id, &name, "web:1")),
                    202,
                )
                .await;
            names.push(name);
        }
        names.sort();
        projects.push((id, names));
    }
    let sorted = |mut v: Vec<String>| {
        v.sort();
        v
    };

    // A project's Apps are read with a field selector: full pages, only its own, each once,
    // though the organization holds more Apps than a page of another project's.
    for (id, names) in &projects {
        let got = all_pages(&admin, &format!("&project_id={id}")).await;
        assert_eq!(sorted(got), *names);
    }
    let in_first = all_pages(&admin, &format!("&org={first}")).await;
    let want: Vec<String> = projects[..2].iter().flat_map(|(_, n)| n.clone()).collect();
    assert_eq!(sorted(in_first), sorted(want));
    // Without a filter, every organization the caller sees, one after another: other tests'
    // Apps come too, but each of these exactly once.
    let everything = all_pages(&admin, "").await;
    for (_, names) in &projects {
        for name in names {
            let seen = everything.iter().filter(|n| *n == name).count();
            assert_eq!(seen, 1, "{name} listed {seen} times");
        }
    }
    // A project of another organization than the one asked for lists nothing.
    let none = admin
        .expect(
            Method::GET,
            &format!("/api/v1/apps?org={first}&project_id={}", projects[2].0),
            None,
            200,
        )
        .await;
    assert_eq!(none["items"], json!([]));

    // A token is the list's own: one of another organization, or made up, is refused by name.
    let page = admin
        .expect(
            Method::GET,
            &format!("/api/v1/apps?limit=3&org={first}"),
            None,
            200,
        )
        .await;
    let token = page["continue"].as_str().unwrap();
    for (query, token) in [
        (format!("org={second}"), token.to_owned()),
        (format!("org={first}"), "no-such-org/".to_owned()),
        (format!("org={first}"), "not a token".to_owned()),
        (format!("org={first}"), format!("{first}/garbage")),
    ] {
        let path = format!("/api/v1/apps?{query}&continue={}", encode(&token));
        let (status, body) = admin.get(&path).await;
        assert_eq!(status, 422, "{path}: {body}");
        assert_eq!(body["field"], "continue", "{body}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_app_list_filters_by_cluster_and_phase_on_the_server_across_pages() {
    let admin = Client::admin().await;
    let org = org(&admin, "filters", json!([])).await;
    let mut on = Vec::new();
    for count in [5, 2] {
        let registration = cluster(&admin, &org).await;
        let cluster_id = registration["cluster_id"].as_str().unwrap().to_owned();
        let project = project(&admin, &org, &cluster_id).await;
        let mut names = Vec::new();
        for i in 0..count {
            let name = format!("filtered-{}-{i}", on.len());
            let body = web_app(project["id"].as_str().unwrap(), &name, "web:1");
            admin
                .expect(Method::POST, "/api/v1/apps", Some(body), 202)
                .await;
            names.push(name);
        }
        on.push((cluster_id, names));
    }
    let sorted = |mut v: Vec<String>| {
        v.sort();
        v
    };
    // Each cluster's Apps in full pages of 3, though the organization lists the other's first
    // or in between: the API reads on until a page is full.
    for (cluster_id, names) in &on {
        let got = all_pages(&admin, &format!("&org={org}&cluster_id={cluster_id}")).await;
        assert_eq!(sorted(got), *names);
    }
    // No agent runs here, so every App is Pending: the phase filter passes all or none.
    let (cluster_id, names) = &on[0];
    let pending = all_pages(&admin, &format!("&cluster_id={cluster_id}&phase=Pending")).await;
    assert_eq!(sorted(pending), *names);
    let running = all_pages(&admin, &format!("&cluster_id={cluster_id}&phase=Running")).await;
    assert_eq!(running, Vec::<String>::new());

    // A phase that does not exist (422), or a cluster the caller does not see (404), is
    // refused by name.
    for (query, field, want) in [
        ("phase=running".to_owned(), "phase", 422),
        ("cluster_id=no-such-cluster".to_owned(), "cluster_id", 404),
    ] {
        let (status, body) = admin.get(&format!("/api/v1/apps?org={org}&{query}")).await;
        assert_eq!(status, want, "{query}: {body}");
        assert_eq!(body["field"], field, "{body}");
    }
    let outsider = user(&admin, "outsider").await;
    common::org(
        &admin,
        "elsewhere",
        json!([{"user": outsider, "role": "admin"}]),
    )
    .await;
    let stranger = Client::login(0, &outsider, PASSWORD).await;
    let (status, body) = stranger
        .get(&format!("/api/v1/apps?cluster_id={cluster_id}"))
        .await;
    assert_eq!(
        status, 404,
        "another organization's cluster is not seen: {body}"
    );
}
