//! The REST facade against a real management cluster, real PostgreSQL and the real controllers,
//! through two API server replicas.

use crate::common;

use std::time::Duration;

use crate::common::{
    Client, Level, Needs, PASSWORD, cluster, org, plane, project, redis_definition, unique, user,
    web_app,
};
use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use futures::StreamExt;
use kube::api::{Api, Patch, PatchParams};
use kubenest_crds::App;
use reqwest::Method;
use serde_json::{Value, json};

fn refresh_cookie(response: &reqwest::Response) -> Option<String> {
    response
        .headers()
        .get_all("set-cookie")
        .iter()
        .filter_map(|v| v.to_str().ok())
        .find_map(|v| v.strip_prefix("kubenest_refresh="))
        .map(|v| v.split(';').next().unwrap_or_default().to_owned())
}

async fn refresh(base: &str, cookie: &str) -> reqwest::Response {
    reqwest::Client::new()
        .post(format!("{base}/api/v1/refresh"))
        .header("cookie", format!("kubenest_refresh={cookie}"))
        .send()
        .await
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn login_refresh_rotation_reuse_and_logout_across_both_replicas() {
    let [a, b] = plane().urls.clone();
    let http = reqwest::Client::new();
    let login = http
        .post(format!("{a}/api/v1/login"))
        .json(&json!({"username": common::ADMIN, "password": common::ADMIN_PASSWORD}))
        .send()
        .await
        .unwrap();
    assert_eq!(login.status(), 200);
    let set_cookie = login.headers()["set-cookie"].to_str().unwrap().to_owned();
    assert!(set_cookie.contains("HttpOnly") && set_cookie.contains("SameSite=Strict"));
    assert!(set_cookie.contains("Max-Age=604800"), "{set_cookie}");
    let first = refresh_cookie(&login).unwrap();
    let body: Value = login.json().await.unwrap();
    assert_eq!(body["token_type"], "Bearer");
    assert!(body["expires_in"].as_i64().unwrap() > 1700);

    // Rotation on the other replica: a new cookie and a working access token.
    let rotated = refresh(&b, &first).await;
    assert_eq!(rotated.status(), 200);
    let second = refresh_cookie(&rotated).unwrap();
    assert_ne!(first, second);
    let token: Value = rotated.json().await.unwrap();
    let me = http
        .get(format!("{a}/api/v1/me"))
        .bearer_auth(token["access_token"].as_str().unwrap())
        .send()
        .await
        .unwrap();
    assert_eq!(me.status(), 200);

    // Reusing the first token revokes the family: the second stops working too.
    let reused = refresh(&a, &first).await;
    assert_eq!(reused.status(), 401);
    let body: Value = reused.json().await.unwrap();
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("already used")
    );
    assert_eq!(refresh(&b, &second).await.status(), 401);

    // Logout ends a fresh login's family.
    let again = http
        .post(format!("{b}/api/v1/login"))
        .json(&json!({"username": common::ADMIN, "password": common::ADMIN_PASSWORD}))
        .send()
        .await
        .unwrap();
    let cookie = refresh_cookie(&again).unwrap();
    let out = http
        .post(format!("{a}/api/v1/logout"))
        .header("cookie", format!("kubenest_refresh={cookie}"))
        .send()
        .await
        .unwrap();
    assert_eq!(out.status(), 204);
    assert!(
        out.headers()["set-cookie"]
            .to_str()
            .unwrap()
            .contains("Max-Age=0")
    );
    assert_eq!(refresh(&a, &cookie).await.status(), 401);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failed_logins_are_limited_per_user_and_address_on_every_replica() {
    let admin = Client::admin().await;
    let name = user(&admin, "guess").await;
    let [a, b] = plane().urls.clone();
    for i in 0..5 {
        let base = if i % 2 == 0 { &a } else { &b };
        let (status, body) = Client::anonymous(base)
            .post(
                "/api/v1/login",
                json!({"username": name, "password": "wrong password!"}),
            )
            .await;
        assert_eq!(status, 401, "{body}");
    }
    // Even the right password waits now at this address, on either replica.
    let (status, body) = Client::anonymous(&b)
        .post(
            "/api/v1/login",
            json!({"username": name, "password": PASSWORD}),
        )
        .await;
    assert_eq!(status, 429, "{body}");
    assert_eq!(body["error"]["code"], "rate_limited");
}

fn forge(claims: Value, pem: &str, alg: jsonwebtoken::Algorithm) -> String {
    let key = jsonwebtoken::EncodingKey::from_ed_pem(pem.as_bytes()).unwrap();
    jsonwebtoken::encode(&jsonwebtoken::Header::new(alg), &claims, &key).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tokens_that_are_expired_unsigned_foreign_or_for_another_audience_are_refused() {
    let plane = plane();
    let now = chrono::Utc::now().timestamp();
    // The admin's user id and token epoch, from a real token (every request checks both).
    let real = Client::admin().await.token.unwrap();
    let real: Value = serde_json::from_slice(
        &URL_SAFE_NO_PAD
            .decode(real.split('.').nth(1).unwrap())
            .unwrap(),
    )
    .unwrap();
    let claims = |aud: &str, exp: i64| {
        json!({"sub": "admin", "iss": "kubenest", "aud": aud, "iat": now - 10, "exp": exp,
               "jti": "x", "adm": true, "uid": real["uid"], "epo": real["epo"]})
    };
    let good = forge(
        claims("kubenest-api", now + 600),
        &plane.api_key_pem,
        jsonwebtoken::Algorithm::EdDSA,
    );
    let other_key = rcgen::KeyPair::generate_for(&rcgen::PKCS_ED25519)
        .unwrap()
        .serialize_pem();
    let header = URL_SAFE_NO_PAD.encode(br#"{"alg":"none","typ":"JWT"}"#);
    let payload = URL_SAFE_NO_PAD.encode(claims("kubenest-api", now + 600).to_string());
    let cases = [
        (
            "expired",
            forge(
                claims("kubenest-api", now - 120),
                &plane.api_key_pem,
                jsonwebtoken::Algorithm::EdDSA,
            ),
        ),
        ("alg none", format!("{header}.{payload}.")),
        (
            "wrong key",
            forge(
                claims("kubenest-api", now + 600),
                &other_key,
                jsonwebtoken::Algorithm::EdDSA,
            ),
        ),
        (
            "wrong audience",
            forge(
                claims("kubenest-hub", now + 600),
                &plane.api_key_pem,
                jsonwebtoken::Algorithm::EdDSA,
            ),
        ),
        ("garbage", "not.a.token".to_owned()),
    ];
    let mut client = Client::anonymous(&plane.urls[1]);
    client.token = Some(good);
    assert_eq!(client.get("/api/v1/orgs").await.0, 200);
    for (what, token) in cases {
        client.token = Some(token);
        let (status, body) = client.get("/api/v1/orgs").await;
        assert_eq!(status, 401, "{what}: {body}");
        assert_eq!(body["error"]["code"], "unauthenticated", "{what}");
    }
    client.token = None;
    assert_eq!(client.get("/api/v1/orgs").await.0, 401);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cluster_is_registered_rotated_refused_scaling_and_deleted_once_empty() {
    let admin = Client::admin().await;
    let org = org(&admin, "reg", json!([])).await;
    let registration = cluster(&admin, &org).await;
    let id = registration["cluster_id"].as_str().unwrap().to_owned();
    let token = registration["connection_token"].as_str().unwrap();
    let identity = plane()
        .cluster_verifier
        .verify(token, kubenest_contracts::ClientType::Cluster)
        .unwrap();
    assert!(format!("{identity:?}").contains(&id), "{identity:?}");
    let command = registration["helm_install_command"].as_str().unwrap();
    assert!(command.starts_with("helm install kubenest-agent charts/kubenest-agent"));
    let (line, stdin) = command.split_once("<<").unwrap();
    assert!(
        line.contains("--set hub.url=wss://hub.example.test") && !line.contains(token),
        "the token stays off the command line: {command}"
    );
    assert!(stdin.contains(token), "{command}");
    // Run as printed by a shell, with `helm template` rendering instead of installing: the token
    // reaches the release's Secret through the values on standard input.
    let helm = kubenest_testkit::Binaries::locate().unwrap().helm;
    let dry = command.replacen("helm install", &format!("{} template", helm.display()), 1);
    let rendered = std::process::Command::new("sh")
        .arg("-c")
        .arg(&dry)
        .current_dir(concat!(env!("CARGO_MANIFEST_DIR"), "/.."))
        .output()
        .unwrap();
    let manifest = String::from_utf8_lossy(&rendered.stdout);
    assert!(
        rendered.status.success(),
        "{manifest}{}",
        String::from_utf8_lossy(&rendered.stderr)
    );
    let encoded = base64::engine::general_purpose::STANDARD.encode(token);
    assert!(
        manifest.contains(&encoded) || manifest.contains(token),
        "the token is in the rendered Secret: {manifest}"
    );

    let got = admin
        .expect(Method::GET, &format!("/api/v1/clusters/{id}"), None, 200)
        .await;
    assert_eq!(got["state"], "pending");
    for field in [
        "cpu_total",
        "cpu_used",
        "mem_total",
        "mem_used",
        "node_count",
    ] {
        assert!(got[field].is_number(), "{field}: {got}");
    }

    let rotated = admin
        .expect(
            Method::POST,
            &format!("/api/v1/clusters/{id}/rotate-token"),
            None,
            200,
        )
        .await;
    assert_eq!(rotated["token_version"], 2);
    assert_ne!(
        rotated["connection_token"],
        registration["connection_token"]
    );

    let (status, body) = admin
        .post(
            &format!("/api/v1/clusters/{id}/scale"),
            json!({"desired_node_count": 3}),
        )
        .await;
    assert_eq!(status, 409, "{body}");
    assert_eq!(body["error"]["code"], "not_provisioned");
    let (status, body) = admin
        .post(
            &format!("/api/v1/clusters/{id}/scale"),
            json!({"desired_node_count": 0}),
        )
        .await;
    assert_eq!(status, 422, "{body}");
    assert_eq!(body["error"]["field"], "desired_node_count");

    // Validation names the field; unknown fields are refused.
    let (status, body) = admin
        .post(
            &format!("/api/v1/orgs/{org}/clusters"),
            json!({"name": "Not_A_Name"}),
        )
        .await;
    assert_eq!(
        (status.as_u16(), body["error"]["field"].as_str()),
        (422, Some("name"))
    );
    let (status, body) = admin
        .post(
            &format!("/api/v1/orgs/{org}/clusters"),
            json!({"name": "x", "colour": "red"}),
        )
        .await;
    assert_eq!(status, 400, "{body}");
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("colour"),
        "{body}"
    );

    let project = project(&admin, &org, &id).await;
    let (status, body) = admin
        .call(Method::DELETE, &format!("/api/v1/clusters/{id}"), None)
        .await;
    assert_eq!(status, 409, "{body}");
    assert_eq!(body["error"]["code"], "has_projects");
    admin
        .expect(
            Method::DELETE,
            &format!("/api/v1/projects/{}", project["id"].as_str().unwrap()),
            None,
            202,
        )
        .await;
    common::eventually("the project is gone", 30, async || {
        admin
            .get(&format!(
                "/api/v1/projects/{}",
                project["id"].as_str().unwrap()
            ))
            .await
            .0
            == 404
    })
    .await;
    admin
        .expect(Method::DELETE, &format!("/api/v1/clusters/{id}"), None, 202)
        .await;
}

/// Sets what the status router would write for an App (its drift report).
async fn report_blocked(client: &kube::Client, org: &str, name: &str) {
    let api: Api<App> = Api::namespaced(client.clone(), &format!("org-{org}"));
    let patch = json!({"status": {"sync": {"driftDetected": true, "driftClass": "blocked_sync",
        "driftDetails": [{"resource": "Deployment/web", "field": "status.conditions[Progressing]",
                          "desired": "progressing", "observed": "ProgressDeadlineExceeded"}]}}});
    api.patch_status(name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .unwrap();
}

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
        body["error"]["field"]
            .as_str()
            .unwrap()
            .starts_with("components[0].workload_spec.env"),
        "{body}"
    );
    let mut bad = web_app(project_id, "bad", "shop:1");
    bad["components"][0]["workload_spec"]["replicas"] = json!("two");
    let (status, body) = admin.post("/api/v1/apps", bad).await;
    assert_eq!(status, 400, "{body}");
    assert_eq!(
        body["error"]["field"],
        "components[0].workload_spec.replicas"
    );
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
        (status.as_u16(), body["error"]["field"].as_str()),
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
        assert_eq!(answer["error"]["code"], "blocked_sync");
        assert!(
            answer["error"]["message"]
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

/// One role × scope × verb expectation.
struct Case {
    who: &'static str,
    method: Method,
    path: String,
    body: Option<Value>,
    want: u16,
}

/// `value` as a query parameter's value.
fn encode(value: &str) -> String {
    form_urlencoded::byte_serialize(value.as_bytes()).collect()
}

/// Every page of `query` (limit 3), following `continue` to the end: the App names in order.
async fn all_pages(client: &Client, query: &str) -> Vec<String> {
    let mut names = Vec::new();
    let mut token: Option<String> = None;
    loop {
        let mut path = format!("/api/v1/apps?limit=3{query}");
        if let Some(token) = &token {
            path.push_str(&format!("&continue={}", encode(token)));
        }
        let page = client.expect(Method::GET, &path, None, 200).await;
        let items = page["items"].as_array().unwrap();
        assert!(items.len() <= 3, "{page}");
        names.extend(items.iter().map(|a| a["name"].as_str().unwrap().to_owned()));
        match page["continue"].as_str() {
            Some(next) => {
                assert_eq!(items.len(), 3, "only a full page says more follow: {page}");
                token = Some(next.to_owned());
            }
            None => return names,
        }
    }
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
        assert_eq!(body["error"]["field"], "continue", "{body}");
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
        assert_eq!(body["error"]["field"], field, "{body}");
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn roles_at_each_scope_allow_exactly_their_operations_and_other_orgs_do_not_exist() {
    let admin = Client::admin().await;
    let names: Vec<String> = futures::future::join_all(
        [
            "oadmin", "omember", "oviewer", "padmin", "pviewer", "cmember", "outsider",
        ]
        .iter()
        .map(|p| user(&admin, p)),
    )
    .await;
    let [oadmin, omember, oviewer, padmin, pviewer, cmember, outsider] =
        <[String; 7]>::try_from(names).unwrap();
    let acme = org(
        &admin,
        "acme",
        json!([
        {"user": oadmin, "role": "admin"}, {"user": omember, "role": "member"},
        {"user": oviewer, "role": "viewer"}]),
    )
    .await;
    let globex = org(
        &admin,
        "globex",
        json!([{"user": outsider, "role": "admin"}]),
    )
    .await;
    let c = cluster(&admin, &acme).await;
    let cluster_id = c["cluster_id"].as_str().unwrap().to_owned();
    let p = project(&admin, &acme, &cluster_id).await;
    let project_id = p["id"].as_str().unwrap().to_owned();
    let other_project = project(&admin, &acme, &cluster_id).await;
    admin
        .expect(
            Method::PUT,
            &format!("/api/v1/projects/{project_id}/members"),
            Some(json!({"user": padmin, "role": "admin"})),
            200,
        )
        .await;
    admin
        .expect(
            Method::PUT,
            &format!("/api/v1/projects/{project_id}/members"),
            Some(json!({"user": pviewer, "role": "viewer"})),
            200,
        )
        .await;
    admin
        .expect(
            Method::PUT,
            &format!("/api/v1/clusters/{cluster_id}/members"),
            Some(json!({"user": cmember, "role": "member"})),
            200,
        )
        .await;
    let app = admin
        .expect(
            Method::POST,
            "/api/v1/apps",
            Some(web_app(&project_id, "site", "site:1")),
            202,
        )
        .await;
    let app_id = app["id"].as_str().unwrap().to_owned();
    let g_cluster = cluster(&admin, &globex).await;
    let g_project = project(&admin, &globex, g_cluster["cluster_id"].as_str().unwrap()).await;
    let g_app = admin
        .expect(
            Method::POST,
            "/api/v1/apps",
            Some(web_app(g_project["id"].as_str().unwrap(), "rival", "r:1")),
            202,
        )
        .await;

    let mut clients = std::collections::HashMap::new();
    for (who, name) in [
        ("oadmin", &oadmin),
        ("omember", &omember),
        ("oviewer", &oviewer),
        ("padmin", &padmin),
        ("pviewer", &pviewer),
        ("cmember", &cmember),
        ("outsider", &outsider),
    ] {
        clients.insert(who, Client::login(0, name, PASSWORD).await);
    }
    let case = |who, method, path: String, body, want| Case {
        who,
        method,
        path,
        body,
        want,
    };
    let app_path = format!("/api/v1/apps/{app_id}");
    let patch = Some(json!({"progress_deadline_seconds": 120}));
    let mut cases = vec![
        // Reading the app: every role that reaches its project; outsiders and people of another
        // project do not see it at all.
        case("oadmin", Method::GET, app_path.clone(), None, 200),
        case("oviewer", Method::GET, app_path.clone(), None, 200),
        case("pviewer", Method::GET, app_path.clone(), None, 200),
        case("cmember", Method::GET, app_path.clone(), None, 200),
        case("outsider", Method::GET, app_path.clone(), None, 404),
        // Changing it: members and up.
        case(
            "oviewer",
            Method::PATCH,
            app_path.clone(),
            patch.clone(),
            403,
        ),
        case(
            "pviewer",
            Method::PATCH,
            app_path.clone(),
            patch.clone(),
            403,
        ),
        case(
            "omember",
            Method::PATCH,
            app_path.clone(),
            patch.clone(),
            202,
        ),
        case(
            "cmember",
            Method::PATCH,
            app_path.clone(),
            patch.clone(),
            202,
        ),
        case(
            "padmin",
            Method::PATCH,
            app_path.clone(),
            patch.clone(),
            202,
        ),
        case(
            "outsider",
            Method::PATCH,
            app_path.clone(),
            patch.clone(),
            404,
        ),
        // The other project of the same organization: only organization and cluster roles.
        case(
            "padmin",
            Method::GET,
            format!("/api/v1/projects/{}", other_project["id"].as_str().unwrap()),
            None,
            404,
        ),
        case(
            "cmember",
            Method::GET,
            format!("/api/v1/projects/{}", other_project["id"].as_str().unwrap()),
            None,
            200,
        ),
        // Destructive operations: admins only.
        case(
            "omember",
            Method::POST,
            format!("/api/v1/clusters/{cluster_id}/rotate-token"),
            None,
            403,
        ),
        case(
            "cmember",
            Method::POST,
            format!("/api/v1/clusters/{cluster_id}/rotate-token"),
            None,
            403,
        ),
        case(
            "padmin",
            Method::GET,
            format!("/api/v1/clusters/{cluster_id}"),
            None,
            404,
        ),
        case(
            "omember",
            Method::DELETE,
            format!("/api/v1/projects/{project_id}"),
            None,
            403,
        ),
        case(
            "cmember",
            Method::POST,
            format!("/api/v1/clusters/{cluster_id}/scale"),
            Some(json!({"desired_node_count": 2})),
            403,
        ),
        case(
            "oadmin",
            Method::POST,
            format!("/api/v1/clusters/{cluster_id}/scale"),
            Some(json!({"desired_node_count": 2})),
            409,
        ),
        case(
            "omember",
            Method::POST,
            format!("/api/v1/orgs/{acme}/clusters"),
            Some(json!({"name": "more"})),
            403,
        ),
        // Another organization's objects do not exist, by any path.
        case(
            "oadmin",
            Method::GET,
            format!("/api/v1/apps/{}", g_app["id"].as_str().unwrap()),
            None,
            404,
        ),
        case(
            "oadmin",
            Method::GET,
            format!("/api/v1/orgs/{globex}"),
            None,
            404,
        ),
        case(
            "oadmin",
            Method::GET,
            format!(
                "/api/v1/clusters/{}",
                g_cluster["cluster_id"].as_str().unwrap()
            ),
            None,
            404,
        ),
        case(
            "oadmin",
            Method::POST,
            "/api/v1/apps".into(),
            Some(web_app(g_project["id"].as_str().unwrap(), "sneak", "x:1")),
            404,
        ),
        case(
            "outsider",
            Method::GET,
            format!("/api/v1/apps/{app_id}/deployments"),
            None,
            404,
        ),
        case(
            "outsider",
            Method::GET,
            format!("/api/v1/orgs/{acme}/projects"),
            None,
            404,
        ),
        // Membership changes: admins of the scope.
        case(
            "omember",
            Method::PUT,
            format!("/api/v1/orgs/{acme}/members"),
            Some(json!({"user": outsider, "role": "viewer"})),
            403,
        ),
        case(
            "padmin",
            Method::PUT,
            format!("/api/v1/projects/{project_id}/members"),
            Some(json!({"user": omember, "role": "viewer"})),
            200,
        ),
    ];
    // Creating in the project: members and up.
    for (who, want) in [("pviewer", 403), ("padmin", 202), ("oviewer", 403)] {
        cases.push(case(
            who,
            Method::POST,
            "/api/v1/apps".into(),
            Some(web_app(&project_id, &unique(who), "x:1")),
            want,
        ));
    }
    for case in cases {
        let client = &clients[case.who];
        let (status, body) = client
            .call(case.method.clone(), &case.path, case.body)
            .await;
        assert_eq!(
            status.as_u16(),
            case.want,
            "{} {} {}: {body}",
            case.who,
            case.method,
            case.path
        );
    }
    // Lists show exactly what each may see.
    let seen = |list: &Value| -> Vec<String> {
        list["items"]
            .as_array()
            .unwrap()
            .iter()
            .map(|a| a["name"].as_str().unwrap().to_owned())
            .collect()
    };
    let outsider_apps = clients["outsider"]
        .expect(Method::GET, "/api/v1/apps", None, 200)
        .await;
    assert_eq!(seen(&outsider_apps), ["rival"]);
    let orgs = clients["pviewer"]
        .expect(Method::GET, "/api/v1/orgs", None, 200)
        .await;
    assert_eq!(orgs.as_array().unwrap().len(), 1);
}

/// An App `name` in a new project on a new cluster of `org`; its id.
async fn app_in_new_project(admin: &Client, org: &str, name: &str) -> String {
    let registration = cluster(admin, org).await;
    let project = project(admin, org, registration["cluster_id"].as_str().unwrap()).await;
    let created = admin
        .expect(
            Method::POST,
            "/api/v1/apps",
            Some(web_app(
                project["id"].as_str().unwrap(),
                name,
                &format!("{name}:1"),
            )),
            202,
        )
        .await;
    created["id"].as_str().unwrap().to_owned()
}

/// `client`'s event stream of App `app_id`, resuming after `last` when given.
async fn app_stream(
    client: &Client,
    app_id: &str,
    last: Option<&str>,
) -> impl futures::Stream<Item = reqwest::Result<bytes::Bytes>> + use<> {
    let mut request = client
        .http
        .get(format!(
            "{}/api/v1/events/stream?app_id={app_id}",
            client.base
        ))
        .bearer_auth(client.token.clone().unwrap());
    if let Some(last) = last {
        request = request.header("last-event-id", last);
    }
    let response = request.send().await.unwrap();
    assert_eq!(response.status(), 200);
    response.bytes_stream()
}

/// The next event (id and data) of a Server-Sent Events body, within 20 s (heartbeats do not
/// count).
async fn next_event(
    stream: &mut (dyn futures::Stream<Item = reqwest::Result<bytes::Bytes>> + Unpin),
    buffer: &mut String,
) -> (String, Value) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    loop {
        if let Some(end) = buffer.find("\n\n") {
            let frame: String = buffer.drain(..end + 2).collect();
            let id = frame
                .lines()
                .find_map(|l| l.strip_prefix("id: "))
                .map(str::to_owned);
            let data = frame
                .lines()
                .find_map(|l| l.strip_prefix("data: "))
                .map(str::to_owned);
            if let (Some(id), Some(data)) = (id, data) {
                return (id, serde_json::from_str(&data).unwrap());
            }
            continue;
        }
        let chunk = tokio::time::timeout_at(deadline, stream.next())
            .await
            .expect("an event in time")
            .unwrap()
            .unwrap();
        buffer.push_str(&String::from_utf8_lossy(&chunk));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stream_subscriber_that_falls_behind_catches_up_from_the_log_and_misses_nothing() {
    let admin = Client::admin().await;
    let org = org(&admin, "lag", json!([])).await;
    let app_id = app_in_new_project(&admin, &org, "burst").await;
    // The second replica's live channel holds one event: a burst leaves its subscribers behind.
    let reader = Client::login(1, common::ADMIN, common::ADMIN_PASSWORD).await;
    let mut stream = Box::pin(app_stream(&reader, &app_id, None).await);
    tokio::time::sleep(Duration::from_millis(300)).await;

    // Forty versions at once, each with a deployment of its own: forty events in a burst.
    let apps: Api<App> = Api::namespaced(plane().kube().await, &format!("org-{org}"));
    const BURST: usize = 40;
    futures::future::join_all((0..BURST).map(|i| {
        let apps = apps.clone();
        async move {
            let patch = json!({"status": {"deploymentId": format!("burst-{i}")}});
            apps.patch_status("burst", &PatchParams::default(), &Patch::Merge(&patch))
                .await
                .unwrap();
        }
    }))
    .await;

    let mut buffer = String::new();
    let mut seen = std::collections::HashSet::new();
    let mut last_id = 0;
    while seen.len() < BURST {
        let (id, event) = next_event(&mut stream, &mut buffer).await;
        let id = id.parse::<i64>().unwrap();
        assert!(
            id > last_id,
            "each event once, in order: {id} after {last_id}"
        );
        last_id = id;
        if let Some(deployment) = event["deployment_id"].as_str()
            && deployment.starts_with("burst-")
        {
            seen.insert(deployment.to_owned());
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_event_stream_delivers_what_the_caller_sees_and_resumes_from_last_event_id() {
    let admin = Client::admin().await;
    let viewer = user(&admin, "watcher").await;
    let org = org(
        &admin,
        "events",
        json!([{"user": viewer, "role": "viewer"}]),
    )
    .await;
    let app_id = app_in_new_project(&admin, &org, "feed").await;
    let watcher = Client::login(1, &viewer, PASSWORD).await;
    let kube = plane().kube().await;
    let apps: Api<App> = Api::namespaced(kube, &format!("org-{org}"));
    let phase = async |phase: &str| {
        let patch = json!({"status": {"phase": phase}});
        apps.patch_status("feed", &PatchParams::default(), &Patch::Merge(&patch))
            .await
            .unwrap();
    };

    let mut stream = Box::pin(app_stream(&watcher, &app_id, None).await);
    let mut buffer = String::new();
    // Give the subscription a moment to exist before the change.
    tokio::time::sleep(Duration::from_millis(300)).await;
    phase("Deploying").await;
    let (first_id, first) = loop {
        let (id, event) = next_event(&mut stream, &mut buffer).await;
        if event["kind"] == "app.phase" && event["phase"] == "Deploying" {
            break (id, event);
        }
    };
    assert_eq!(first["app_id"], app_id);
    assert_eq!(first["org"], org);
    drop(stream);

    // While disconnected: two changes. Resuming on the other replica replays them in order.
    phase("Running").await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    phase("Failed").await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    let mut resumed = Box::pin(app_stream(&watcher, &app_id, Some(&first_id)).await);
    let mut buffer = String::new();
    // (The App controller writes phases of its own in between; ours come in order.)
    let mut phases = Vec::new();
    let mut last_id = first_id.parse::<i64>().unwrap();
    while !phases.iter().any(|p| p == "Failed") {
        let (id, event) = next_event(&mut resumed, &mut buffer).await;
        let id = id.parse::<i64>().unwrap();
        assert!(id > last_id, "ids rise: {id} after {last_id}");
        last_id = id;
        if event["kind"] == "app.phase" {
            phases.push(event["phase"].as_str().unwrap().to_owned());
        }
    }
    let running = phases
        .iter()
        .position(|p| p == "Running")
        .expect("Running replayed");
    assert!(running < phases.len() - 1, "{phases:?}");

    // Someone with no role in the organization sees nothing of it.
    let stranger = Client::login(0, &user(&admin, "stranger").await, PASSWORD).await;
    let (status, _) = stranger
        .get(&format!("/api/v1/events/stream?org={org}"))
        .await;
    assert_eq!(status, 404);
}

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
    assert!(
        body["error"]["field"].as_str().unwrap().contains("image"),
        "{body}"
    );
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
    assert_eq!(body["error"]["field"], "chart", "{body}");
    assert_eq!(
        body["error"]["message"], "the chart cannot be read",
        "{body}"
    );
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
    assert!(
        body["error"]["message"].as_str().unwrap().contains("nope"),
        "{body}"
    );
    assert!(list.as_array().unwrap().len() >= 3);
}

/// A chart every test server below could serve, so only the API server's checks refuse it.
const WEBAPP_CHART: [(&str, &str); 2] = [
    (
        "Chart.yaml",
        "apiVersion: v2\nname: webapp\nversion: 0.3.0\n",
    ),
    ("values.yaml", "replicaCount: 1\n"),
];

/// `POST /templates/from-chart` into `project_id` of chart `webapp` 0.3.0 at `repository`.
async fn from_chart(client: &Client, project_id: &str, repository: &str) -> (u16, Value) {
    let (status, body) = client
        .post(
            "/api/v1/templates/from-chart",
            json!({"name": unique("chart"), "scope": "project", "project_id": project_id,
                   "chart": {"repository": repository, "name": "webapp", "version": "0.3.0"}}),
        )
        .await;
    (status.as_u16(), body)
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
        assert_eq!(body["error"]["field"], "chart", "{body}");
        assert_eq!(
            body["error"]["message"], "the chart cannot be read",
            "{body}"
        );
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
        assert_eq!(body["error"]["field"], "chart.repository", "{body}");
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
        assert_eq!(body["error"]["field"], "chart.repository", "{body}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn errors_have_one_shape_and_the_openapi_document_is_served() {
    let admin = Client::admin().await;
    let (status, body) = admin.get("/api/v1/nothing-here").await;
    assert_eq!(status, 404);
    assert_eq!(body["error"]["code"], "not_found");
    let response = reqwest::Client::new()
        .post(format!("{}/api/v1/apps", plane().urls[0]))
        .bearer_auth(admin.token.clone().unwrap())
        .header("content-type", "application/json")
        .body(vec![b'x'; kubenest_apiserver::MAX_BODY_BYTES + 1])
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 413);
    assert!(response.headers().contains_key("x-request-id"));
    let (status, document) = admin.get("/api/v1/openapi.json").await;
    assert_eq!(status, 200);
    assert_eq!(
        document,
        serde_json::to_value(kubenest_apiserver::openapi()).unwrap()
    );
    assert!(document["paths"]["/api/v1/apps/{id}/rollback"]["post"].is_object());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn standalone_addons_and_projects_take_their_progress_deadline_at_the_door() {
    redis_definition().await;
    let admin = Client::admin().await;
    let org = org(&admin, "deadlines", json!([])).await;
    let registration = cluster(&admin, &org).await;
    let cluster_id = registration["cluster_id"].as_str().unwrap();
    let projects = format!("/api/v1/orgs/{org}/projects");
    let (status, answer) = admin
        .post(
            &projects,
            json!({"name": "slow", "cluster_id": cluster_id, "progress_deadline_seconds": 5}),
        )
        .await;
    assert_eq!(
        (status.as_u16(), answer["error"]["field"].as_str()),
        (422, Some("progress_deadline_seconds")),
        "{answer}"
    );
    let project = admin
        .expect(
            Method::POST,
            &projects,
            Some(
                json!({"name": "slow", "cluster_id": cluster_id, "progress_deadline_seconds": 900}),
            ),
            201,
        )
        .await;
    assert_eq!(project["progress_deadline_seconds"], 900, "{project}");
    let addon = |deadline: u32| {
        json!({"project_id": project["id"], "name": "cache", "definition": "redis",
               "progress_deadline_seconds": deadline})
    };
    let (status, answer) = admin.post("/api/v1/addon-instances", addon(90_000)).await;
    assert_eq!(
        (status.as_u16(), answer["error"]["field"].as_str()),
        (422, Some("progress_deadline_seconds")),
        "{answer}"
    );
    let created = admin
        .expect(
            Method::POST,
            "/api/v1/addon-instances",
            Some(addon(120)),
            202,
        )
        .await;
    assert_eq!(created["progress_deadline_seconds"], 120, "{created}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_app_past_its_deadline_is_an_alert_event_on_the_organizations_stream() {
    let admin = Client::admin().await;
    let org = org(&admin, "alerting", json!([])).await;
    let app_id = app_in_new_project(&admin, &org, "late").await;
    let response = admin
        .http
        .get(format!("{}/api/v1/events/stream?org={org}", admin.base))
        .bearer_auth(admin.token.clone().unwrap())
        .send()
        .await
        .unwrap();
    let mut stream = Box::pin(response.bytes_stream());
    let mut buffer = String::new();
    tokio::time::sleep(Duration::from_millis(300)).await;
    // What the controllers write for an App whose rollout missed its deadline.
    let apps: Api<App> = Api::namespaced(plane().kube().await, &format!("org-{org}"));
    let failed = json!({"status": {"phase": "Failed", "conditions": [{
        "type": "Ready", "status": "False", "reason": "ProgressDeadlineExceeded",
        "message": "revision r1 was not running within 10s",
        "lastTransitionTime": "2026-12-01T00:00:00Z"}]}});
    apps.patch_status("late", &PatchParams::default(), &Patch::Merge(&failed))
        .await
        .unwrap();
    let alert = loop {
        let (_, event) = next_event(&mut stream, &mut buffer).await;
        if event["kind"] == "alert" {
            break event;
        }
    };
    assert_eq!(
        (alert["app_id"].as_str(), alert["state"].as_str()),
        (Some(app_id.as_str()), Some("open")),
        "{alert}"
    );
    assert_eq!(alert["org"], org.as_str(), "{alert}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_addon_is_recorded_soon_after_its_definition_reaches_the_catalog() {
    let admin = Client::admin().await;
    let org = org(&admin, "late-catalog", json!([])).await;
    let registration = cluster(&admin, &org).await;
    let project = project(&admin, &org, registration["cluster_id"].as_str().unwrap()).await;
    let kube = plane().kube().await;
    // The project as the status router leaves it once the agent took its namespace.
    let projects: Api<kubenest_crds::project::Project> =
        Api::namespaced(kube.clone(), &format!("org-{org}"));
    let name = project["name"].as_str().unwrap();
    let generation = projects
        .get(name)
        .await
        .unwrap()
        .metadata
        .generation
        .unwrap();
    let taken = json!({"status": {"clusterPhase": "Ready", "ensuredGeneration": generation}});
    projects
        .patch_status(name, &PatchParams::default(), &Patch::Merge(&taken))
        .await
        .unwrap();
    let path = format!("/api/v1/projects/{}", project["id"].as_str().unwrap());
    common::eventually("the project is Ready", 30, async || {
        admin.get(&path).await.1["phase"] == "Ready"
    })
    .await;
    // An addon in the organization's namespace of a definition that only comes later (an
    // organization's own catalog entry, written with kubectl after the addon).
    let addons: Api<kubenest_crds::addon::AddonInstance> =
        Api::namespaced(kube.clone(), &format!("org-{org}"));
    addons
        .create(
            &Default::default(),
            &serde_json::from_value(json!({
                "apiVersion": "kubenest.io/v1alpha1", "kind": "AddonInstance",
                "metadata": {"name": "queue"},
                "spec": {"project": name, "definition": "late-queue"}}))
            .unwrap(),
        )
        .await
        .unwrap();
    common::eventually("the addon waits for its definition", 30, async || {
        let addon = addons.get("queue").await.unwrap();
        addon.status.is_some_and(|s| s.phase.is_some())
    })
    .await;
    let definitions = Api::<kubenest_crds::addon::AddonDefinition>::namespaced(
        kube.clone(),
        &format!("org-{org}"),
    );
    definitions
        .patch(
            "late-queue",
            &PatchParams::apply("tests").force(),
            &Patch::Apply(json!({
                "apiVersion": "kubenest.io/v1alpha1", "kind": "AddonDefinition",
                "metadata": {"name": "late-queue"},
                "spec": {"displayName": "Queue",
                    "chart": {"repository": "charts/addons", "name": "redis", "version": "1.0.0"},
                    "exports": {"host": "{release}.{namespace}.svc"}}
            })),
        )
        .await
        .unwrap();
    // Before, the addon looked again after a minute; the definition's arrival now wakes it.
    common::eventually("revision 1 is recorded", 30, async || {
        let addon = addons.get("queue").await.unwrap();
        addon.status.and_then(|s| s.revision) == Some(1)
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_standalone_addons_phase_and_revisions_reach_the_event_stream() {
    redis_definition().await;
    let admin = Client::admin().await;
    let org = org(&admin, "addon-events", json!([])).await;
    let registration = cluster(&admin, &org).await;
    let project = project(&admin, &org, registration["cluster_id"].as_str().unwrap()).await;
    let response = admin
        .http
        .get(format!("{}/api/v1/events/stream?org={org}", admin.base))
        .bearer_auth(admin.token.clone().unwrap())
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    let mut stream = Box::pin(response.bytes_stream());
    let mut buffer = String::new();
    let created = admin
        .expect(
            Method::POST,
            "/api/v1/addon-instances",
            Some(json!({"project_id": project["id"], "name": "cache", "definition": "redis"})),
            202,
        )
        .await;
    let id = created["id"].as_str().unwrap().to_owned();
    // Each addon event names the addon, its project and cluster. No agent runs here: the
    // addon waits for its cluster (Pending), and then the test writes what a report of the
    // agent would make of it (Ready at revision 1), which is one more event.
    let mut until_phase = async |phase: &str| loop {
        let (_, event) = next_event(&mut stream, &mut buffer).await;
        if event["kind"] != "addon.changed" {
            continue;
        }
        assert_eq!(event["addon_id"], id.as_str(), "{event}");
        assert_eq!(event["project_id"], project["id"], "{event}");
        assert_eq!(event["cluster_id"], registration["cluster_id"], "{event}");
        if event["phase"] == phase {
            return event;
        }
    };
    until_phase("Pending").await;
    let addons: Api<kubenest_crds::addon::AddonInstance> =
        Api::namespaced(plane().kube().await, &format!("org-{org}"));
    let report = json!({"status": {"phase": "Ready", "revision": 1, "observedRevision": 1,
        "clusterPhase": "Ready"}});
    addons
        .patch_status("cache", &PatchParams::default(), &Patch::Merge(&report))
        .await
        .unwrap();
    let ready = until_phase("Ready").await;
    assert_eq!(
        (ready["previous"].as_str(), ready["revision"].as_u64()),
        (Some("Pending"), Some(1))
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn standalone_addons_check_values_against_the_catalog_and_change_by_revision() {
    redis_definition().await;
    let admin = Client::admin().await;
    let catalog = admin
        .expect(Method::GET, "/api/v1/addon-definitions/redis", None, 200)
        .await;
    assert_eq!(catalog["chart_version"], "1.0.0");
    let org = org(&admin, "addons", json!([])).await;
    let registration = cluster(&admin, &org).await;
    let project = project(&admin, &org, registration["cluster_id"].as_str().unwrap()).await;
    let body = |values: Value| {
        json!({"project_id": project["id"], "name": "cache",
        "definition": "redis", "values": values})
    };
    let (status, answer) = admin
        .post(
            "/api/v1/addon-instances",
            body(json!({"maxmemory": "lots"})),
        )
        .await;
    assert_eq!(status, 422, "{answer}");
    assert_eq!(answer["error"]["field"], "values.maxmemory");
    let (status, answer) = admin
        .post(
            "/api/v1/addon-instances",
            json!({"project_id": project["id"], "name": "x", "definition": "nosuch"}),
        )
        .await;
    assert_eq!(
        (status.as_u16(), answer["error"]["field"].as_str()),
        (404, Some("definition"))
    );
    let created = admin
        .expect(
            Method::POST,
            "/api/v1/addon-instances",
            Some(body(json!({"maxmemory": "64mb"}))),
            202,
        )
        .await;
    let id = created["id"].as_str().unwrap();
    let changed = admin
        .expect(
            Method::PATCH,
            &format!("/api/v1/addon-instances/{id}"),
            Some(json!({"version": "1.0.1", "values": {"maxmemory": "128mb"}})),
            202,
        )
        .await;
    assert_eq!(
        (changed["version"].as_str(), &changed["values"]),
        (Some("1.0.1"), &json!({"maxmemory": "128mb"}))
    );
    let (status, answer) = admin
        .call(
            Method::PATCH,
            &format!("/api/v1/addon-instances/{id}"),
            Some(json!({"version": "^1.0"})),
        )
        .await;
    assert_eq!(
        (status.as_u16(), answer["error"]["field"].as_str()),
        (422, Some("version"))
    );
    let read = admin
        .expect(
            Method::GET,
            &format!("/api/v1/addon-instances/{id}"),
            None,
            200,
        )
        .await;
    assert!(read["revisions"].is_array(), "{read}");
    let (status, answer) = admin
        .post(
            &format!("/api/v1/addon-instances/{id}/rollback"),
            json!({"revision": 99}),
        )
        .await;
    assert_eq!(
        (status.as_u16(), answer["error"]["field"].as_str()),
        (404, Some("revision"))
    );
    let listed = admin
        .expect(
            Method::GET,
            &format!("/api/v1/addon-instances?org={org}"),
            None,
            200,
        )
        .await;
    assert_eq!(listed.as_array().unwrap().len(), 1);
    admin
        .expect(
            Method::DELETE,
            &format!("/api/v1/addon-instances/{id}"),
            None,
            202,
        )
        .await;
}

/// schemathesis, as `tools/install-schemathesis.sh` installs it.
fn schemathesis() -> std::path::PathBuf {
    let cache = std::env::var_os("KUBENEST_CACHE").map_or_else(
        || std::path::PathBuf::from(std::env::var_os("HOME").unwrap()).join(".cache/kubenest"),
        std::path::PathBuf::from,
    );
    let version = kubenest_testkit::pinned_version("SCHEMATHESIS_VERSION").unwrap();
    let bin = cache
        .join("schemathesis")
        .join(version)
        .join("bin/schemathesis");
    assert!(
        bin.exists(),
        "{} missing: run tools/setup.sh (make test does)",
        bin.display()
    );
    bin
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_property_based_run_against_the_openapi_document_finds_no_server_error() {
    // Something to find: an organization with a cluster, a project and an app. The run acts as
    // that organization's admin, not a platform administrator, so that what it changes (it sets
    // passwords and deletes members, as it should try to) stays inside its organization and
    // does not disturb the tests running beside it.
    let admin = Client::admin().await;
    let fuzzer = user(&admin, "fuzzer").await;
    let org = org(&admin, "fuzz", json!([{"user": fuzzer, "role": "admin"}])).await;
    let registration = cluster(&admin, &org).await;
    let project = project(&admin, &org, registration["cluster_id"].as_str().unwrap()).await;
    admin
        .expect(
            Method::POST,
            "/api/v1/apps",
            Some(web_app(project["id"].as_str().unwrap(), "fuzzed", "f:1")),
            202,
        )
        .await;
    let base = &plane().urls[1];
    let fuzzer = Client::login(1, &fuzzer, PASSWORD).await;
    let token = fuzzer.token.clone().unwrap();
    let session_alive = async || {
        reqwest::Client::new()
            .get(format!("{base}/api/v1/me"))
            .bearer_auth(&token)
            .send()
            .await
            .unwrap()
            .status()
            == 200
    };
    // Everything but the fuzzer's own password: setting it (as it may, and does once it has
    // read its name from /me) ends the session, and every later request would be a 401 that
    // exercises nothing. The session must outlive that run; the password goes last, alone.
    let password = "/api/v1/users/{username}/password";
    let everything = schemathesis_run(base, &token, &["--exclude-path", password]).await;
    assert!(
        session_alive().await,
        "the fuzzer's session ended during the run: its requests were not authenticated"
    );
    schemathesis_run(base, &token, &["--include-path", password]).await;
    // The run really exercised the API.
    assert!(everything.contains("passed"), "{everything}");
}

/// What the runs check beyond their command line. A template's components are the App's with
/// `${slot}` strings allowed anywhere, and a slot must name one of the template's parameters: no
/// JSON Schema says that, so data the document allows there is not all data the API takes, and
/// `positive_data_acceptance` is off for the two operations that take components in that form
/// (tests/templates.rs checks them field by field).
const SCHEMATHESIS_CONFIG: &str = r#"
[[operations]]
include-name = "POST /api/v1/templates"
checks.positive_data_acceptance.enabled = false

[[operations]]
include-name = "POST /api/v1/templates/import"
checks.positive_data_acceptance.enabled = false
"#;

/// One schemathesis run against the API at `base` with `token` and `selection`; panics with
/// the failures it found (each with a curl to reproduce it), and returns what it printed. A
/// run that crashed inside schemathesis itself (a "Runtime Error" with no API failure, such as
/// CPython's "AST constructor recursion depth mismatch" in hypothesis) is run once more: it
/// says nothing about the API.
async fn schemathesis_run(base: &str, token: &str, selection: &[&str]) -> String {
    let mut attempts = 0;
    loop {
        attempts += 1;
        let report = tempfile::tempdir().unwrap();
        let config = report.path().join("schemathesis.toml");
        std::fs::write(&config, SCHEMATHESIS_CONFIG).unwrap();
        let output = tokio::process::Command::new(schemathesis())
            .arg("--config-file")
            .arg(&config)
            .arg("run")
            .arg(format!("{base}/api/v1/openapi.json"))
            .args(["--url", base])
            .args(["--header", &format!("Authorization: Bearer {token}")])
            .args(["--phases", "examples,coverage,fuzzing"])
            .args(["--max-examples", "12", "--seed", "7", "--workers", "2"])
            .args(["--request-timeout", "20"])
            // The stream never ends; its query parameters are checked by the tests above.
            .args(["--exclude-path", "/api/v1/events/stream"])
            // Secrets go to the cluster through the hub, fail-closed: this API server has no
            // hub, so they answer 503 by design. agent/tests/it/api.rs runs them with one.
            .args([
                "--exclude-path-regex",
                "/(registry-credentials|git-credentials|secret)$",
            ])
            .args(selection)
            .arg("--report-dir")
            .arg(report.path())
            // schemathesis keeps a cache in its working directory: not in the repository.
            .current_dir(report.path())
            .env("SCHEMATHESIS_HOOKS", "")
            .env("NO_COLOR", "1")
            .output()
            .await
            .unwrap();
        let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
        if output.status.success() {
            return stdout;
        }
        let crashed = !stdout.contains("FAILURES") && stdout.contains("Runtime Error");
        if crashed && attempts == 1 {
            eprintln!("schemathesis crashed on its own; running it again:\n{stdout}");
            continue;
        }
        // From the failures section on.
        let tail = stdout
            .find("FAILURES")
            .map_or(&stdout[..], |at| &stdout[at..]);
        panic!(
            "schemathesis found failures:\n{tail}\n{}",
            String::from_utf8_lossy(&output.stderr)
        );
    }
}

/// The ids of one place of the matrix: (cluster, project, app, addon).
type PlaceIds = (String, String, String, String);

/// A project with an App `app` and a standalone addon `addon` on cluster `cluster_id` of `org`.
async fn matrix_place(
    admin: &Client,
    org: &str,
    cluster_id: &str,
    app: &str,
    addon: &str,
) -> PlaceIds {
    let p = project(admin, org, cluster_id).await;
    let project_id = p["id"].as_str().unwrap().to_owned();
    let app = admin
        .expect(
            Method::POST,
            "/api/v1/apps",
            Some(web_app(&project_id, app, "m:1")),
            202,
        )
        .await;
    let addon = admin
        .expect(
            Method::POST,
            "/api/v1/addon-instances",
            Some(json!({"project_id": project_id, "name": addon, "definition": "redis"})),
            202,
        )
        .await;
    (
        cluster_id.to_owned(),
        project_id,
        app["id"].as_str().unwrap().to_owned(),
        addon["id"].as_str().unwrap().to_owned(),
    )
}

/// The REST request of a matrix row against one place's objects, and its success status.
fn rest_request(
    what: &str,
    org: &str,
    (cluster, project, app, addon): &PlaceIds,
    spare: &str,
) -> (Method, String, Option<Value>, u16) {
    match what {
        "get org" => (Method::GET, format!("/api/v1/orgs/{org}"), None, 200),
        "get cluster" => (
            Method::GET,
            format!("/api/v1/clusters/{cluster}"),
            None,
            200,
        ),
        "rotate token" => (
            Method::POST,
            format!("/api/v1/clusters/{cluster}/rotate-token"),
            None,
            200,
        ),
        "scale" => (
            Method::POST,
            format!("/api/v1/clusters/{cluster}/scale"),
            Some(json!({"desired_node_count": 2})),
            409,
        ),
        "get project" => (
            Method::GET,
            format!("/api/v1/projects/{project}"),
            None,
            200,
        ),
        // Refused while the project holds Apps: the role check comes first.
        "delete project" => (
            Method::DELETE,
            format!("/api/v1/projects/{project}"),
            None,
            409,
        ),
        "project member" => (
            Method::PUT,
            format!("/api/v1/projects/{project}/members"),
            Some(json!({"user": spare, "role": "viewer"})),
            200,
        ),
        "get app" => (Method::GET, format!("/api/v1/apps/{app}"), None, 200),
        "app history" => (
            Method::GET,
            format!("/api/v1/apps/{app}/deployments"),
            None,
            200,
        ),
        "change app" => (
            Method::PATCH,
            format!("/api/v1/apps/{app}"),
            Some(json!({"progress_deadline_seconds": 300})),
            202,
        ),
        "redeploy app" => (
            Method::POST,
            format!("/api/v1/apps/{app}/redeploy"),
            None,
            202,
        ),
        // A project the caller does not see is a 404 naming `project_id`.
        "create app" => (
            Method::POST,
            "/api/v1/apps".to_owned(),
            Some(web_app(project, &unique("n"), "n:1")),
            202,
        ),
        "get addon" => (
            Method::GET,
            format!("/api/v1/addon-instances/{addon}"),
            None,
            200,
        ),
        "change addon" => (
            Method::PATCH,
            format!("/api/v1/addon-instances/{addon}"),
            Some(json!({"values": {}})),
            202,
        ),
        "create addon" => (
            Method::POST,
            "/api/v1/addon-instances".to_owned(),
            Some(json!({"project_id": project, "name": unique("n"), "definition": "redis"})),
            202,
        ),
        other => panic!("the matrix row {other:?} has no REST request"),
    }
}

/// Every row of the shared role matrix ([`common::matrix`]) through the REST API: 404 where
/// the role does not reach the object, 403 where it reaches it with too weak a role.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_role_at_every_scope_against_every_resource_and_verb_in_two_organizations() {
    use crate::common::matrix::{Door, Place, rows};
    redis_definition().await;
    let admin = Client::admin().await;
    let roles = [
        ("admin", Needs::Admin),
        ("member", Needs::Member),
        ("viewer", Needs::Viewer),
    ];
    let levels = [Level::Org, Level::Cluster, Level::Project];
    let spare = user(&admin, "spare").await;
    // Organization A, where the roles are bound; organization B, which none of them belongs to.
    let a = org(&admin, "matrix-a", json!([])).await;
    let b = org(&admin, "matrix-b", json!([])).await;
    let cluster_of = async |org: &str| {
        cluster(&admin, org).await["cluster_id"]
            .as_str()
            .unwrap()
            .to_owned()
    };
    let cluster_a = cluster_of(&a).await;
    let cluster_b = cluster_of(&b).await;
    let mut ids = std::collections::HashMap::new();
    ids.insert(
        Place::OwnProject,
        matrix_place(&admin, &a, &cluster_a, "m", "mdb").await,
    );
    // Its addon is named like the own project's App.
    ids.insert(
        Place::OtherProject,
        matrix_place(&admin, &a, &cluster_a, "m2", "m").await,
    );
    ids.insert(
        Place::OtherOrg,
        matrix_place(&admin, &b, &cluster_b, "m", "mdb").await,
    );
    let project_a = ids[&Place::OwnProject].1.clone();
    let mut users = Vec::new();
    for (role, needs) in roles {
        for level in levels {
            let name = user(&admin, &format!("{role}-{level:?}").to_lowercase()).await;
            let binding = json!({"user": name, "role": role});
            let path = match level {
                Level::Org => format!("/api/v1/orgs/{a}/members"),
                Level::Cluster => format!("/api/v1/clusters/{cluster_a}/members"),
                Level::Project => format!("/api/v1/projects/{project_a}/members"),
            };
            admin.expect(Method::PUT, &path, Some(binding), 200).await;
            users.push((Client::login(0, &name, PASSWORD).await, needs, level));
        }
    }

    let mut checked = 0;
    let mut wrong = Vec::new();
    for (client, holds, bound) in &users {
        for place in Place::ALL {
            let org = if place == Place::OtherOrg { &b } else { &a };
            for row in rows(Door::Rest) {
                let (method, path, body, success) =
                    rest_request(row.what, org, &ids[&place], &spare);
                let want = if !row.reaches(*bound, place) {
                    404
                } else if *holds >= row.needs {
                    success
                } else {
                    403
                };
                let (status, answer) = client.call(method.clone(), &path, body).await;
                checked += 1;
                if status.as_u16() != want {
                    wrong.push(format!(
                        "{} ({holds:?} at {bound:?}) {} at {place:?}: {status}, want {want}: {answer}",
                        client.user, row.what,
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
    assert_eq!(checked, users.len() * 3 * rows(Door::Rest).count());
}

/// Every refusal is in the API's error shape, also those made before a handler runs: a query
/// value of the wrong type, an unknown query parameter, a method the path does not take, a
/// path that is no route, a body that is not JSON.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_refusal_before_a_handler_is_in_the_error_shape_naming_the_parameter() {
    let admin = Client::admin().await;
    let token = admin.token.clone().unwrap();
    let send = async |method: Method, path: &str, body: Option<&str>| {
        let mut request = admin
            .http
            .request(method, format!("{}{path}", admin.base))
            .bearer_auth(&token);
        if let Some(body) = body {
            request = request
                .header("content-type", "text/plain")
                .body(body.to_owned());
        }
        let response = request.send().await.unwrap();
        let status = response.status().as_u16();
        let allow = response
            .headers()
            .get("allow")
            .map(|v| v.to_str().unwrap().to_owned());
        let body: Value = response.json().await.unwrap_or(Value::Null);
        (status, body, allow)
    };
    for (query, parameter) in [
        ("limit=abc", "limit"),
        ("limit=-1", "limit"),
        ("colour=red", "colour"),
    ] {
        let (status, body, _) = send(Method::GET, &format!("/api/v1/apps?{query}"), None).await;
        assert_eq!(status, 400, "{query}: {body}");
        assert_eq!(body["error"]["code"], "bad_request", "{body}");
        assert_eq!(body["error"]["field"], parameter, "{query}: {body}");
    }
    // An operation that reads no query string refuses a parameter too, by the document's list.
    let (status, body, _) = send(Method::GET, "/api/v1/orgs?colour=red", None).await;
    assert_eq!(status, 400, "{body}");
    assert_eq!(body["error"]["field"], "colour", "{body}");
    // A value of the right type that is out of range is the handler's to refuse, as before.
    let (status, body, _) = send(Method::GET, "/api/v1/apps?limit=0", None).await;
    assert_eq!(
        (status, body["error"]["field"].as_str()),
        (422, Some("limit"))
    );

    let (status, body, allow) = send(Method::DELETE, "/api/v1/orgs", None).await;
    assert_eq!(status, 405, "{body}");
    assert_eq!(body["error"]["code"], "method_not_allowed", "{body}");
    let allow = allow.unwrap_or_default();
    assert!(allow.contains("GET") && allow.contains("POST"), "{allow}");

    let (status, body, _) = send(Method::GET, "/api/v1/no-such-thing", None).await;
    assert_eq!(
        (status, body["error"]["code"].as_str()),
        (404, Some("not_found"))
    );

    let (status, body, _) = send(Method::POST, "/api/v1/orgs", Some("name=x")).await;
    assert_eq!(status, 400, "{body}");
    assert_eq!(body["error"]["code"], "bad_request", "{body}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_projects_pod_security_level_is_chosen_by_organization_admins_only() {
    let admin = Client::admin().await;
    let (oadmin, omember) = (
        user(&admin, "psa-admin").await,
        user(&admin, "psa-member").await,
    );
    let org = org(
        &admin,
        "psa",
        json!([{"user": oadmin, "role": "admin"}, {"user": omember, "role": "member"}]),
    )
    .await;
    let registration = cluster(&admin, &org).await;
    let cluster_id = registration["cluster_id"].as_str().unwrap();
    let projects = format!("/api/v1/orgs/{org}/projects");
    let body = |name: &str, level: &str| json!({"name": name, "cluster_id": cluster_id, "pod_security": level});
    // A member may create a project at the default level, not choose another.
    let member = Client::login(0, &omember, PASSWORD).await;
    let (status, answer) = member.post(&projects, body("loose", "restricted")).await;
    assert_eq!(
        (status.as_u16(), answer["error"]["field"].as_str()),
        (403, Some("pod_security")),
        "{answer}"
    );
    let plain = member
        .expect(
            Method::POST,
            &projects,
            Some(body("plain", "baseline")),
            201,
        )
        .await;
    assert_eq!(plain["pod_security"], "baseline", "{plain}");
    // A level the platform does not have is refused for everyone.
    let (status, answer) = admin.post(&projects, body("open", "privileged")).await;
    assert_eq!(
        (status.as_u16(), answer["error"]["field"].as_str()),
        (400, Some("pod_security")),
        "{answer}"
    );
    // The organization's admin chooses `restricted`.
    let org_admin = Client::login(0, &oadmin, PASSWORD).await;
    let strict = org_admin
        .expect(
            Method::POST,
            &projects,
            Some(body("strict", "restricted")),
            201,
        )
        .await;
    assert_eq!(strict["pod_security"], "restricted", "{strict}");
}
