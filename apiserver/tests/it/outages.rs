//! Headers and outages: every answer carries HSTS and `nosniff` (API, errors, the console,
//! unknown paths), and when the management kube-apiserver or PostgreSQL is down a read and a
//! write answer 503 with `Retry-After`, never 500. Against a management cluster and a
//! PostgreSQL of this binary's own (they are stopped by the test), with a real API server on
//! loopback.

use std::time::Duration;

use kubenest_apiserver::limits::LimitsConfig;
use kubenest_apiserver::run::{Config, start};
use kubenest_apiserver::state::Settings;
use kubenest_store::DatabaseUrl;
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

const ADMIN: &str = "admin";
const ADMIN_PASSWORD: &str = "admin-password-for-tests";

struct Answer {
    status: StatusCode,
    headers: reqwest::header::HeaderMap,
    body: Value,
}

async fn call(
    base: &str,
    token: Option<&str>,
    method: Method,
    path: &str,
    body: Option<Value>,
) -> Answer {
    let mut request = reqwest::Client::new().request(method, format!("{base}{path}"));
    if let Some(token) = token {
        request = request.bearer_auth(token);
    }
    if let Some(body) = body {
        request = request.json(&body);
    }
    let response = request.send().await.unwrap();
    let status = response.status();
    let headers = response.headers().clone();
    let text = response.text().await.unwrap();
    let body = serde_json::from_str(&text).unwrap_or(Value::String(text));
    Answer {
        status,
        headers,
        body,
    }
}

fn assert_hardened(what: &str, answer: &Answer) {
    let header = |name: &str| {
        answer
            .headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
            .to_owned()
    };
    assert_eq!(
        header("strict-transport-security"),
        "max-age=31536000; includeSubDomains",
        "{what} ({})",
        answer.status
    );
    assert_eq!(header("x-content-type-options"), "nosniff", "{what}");
}

/// A 503 naming `code`, with a `Retry-After`.
fn assert_outage(what: &str, answer: &Answer, code: &str) {
    assert_eq!(
        answer.status,
        StatusCode::SERVICE_UNAVAILABLE,
        "{what}: {}",
        answer.body
    );
    assert_eq!(answer.body["code"], code, "{what}: {}", answer.body);
    let retry = answer
        .headers
        .get("retry-after")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    assert!(retry.is_some_and(|s| s > 0), "{what}: no Retry-After");
    assert_hardened(what, answer);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_answer_is_hardened_and_an_outage_is_a_503_to_retry() {
    let dir = tempfile::tempdir().unwrap();
    let env = kubenest_testkit::Environment::builder()
        .management("outage")
        .start()
        .await
        .unwrap();
    let mgmt = env.management().unwrap();
    let client = mgmt.client().await.unwrap();
    kubenest_controllers::ensure_crds(&client).await.unwrap();
    let postgres = kubenest_testkit::Postgres::start(dir.path()).await.unwrap();
    let console = dir.path().join("console");
    std::fs::create_dir_all(console.join("assets")).unwrap();
    std::fs::write(
        console.join("index.html"),
        "<!doctype html><title>kubenest</title>",
    )
    .unwrap();

    let api_key = rcgen::KeyPair::generate_for(&rcgen::PKCS_ED25519)
        .unwrap()
        .serialize_pem();
    let shutdown = CancellationToken::new();
    let config = Config {
        client: client.clone(),
        database_url: DatabaseUrl::new(postgres.url("postgres")),
        signing_key_pem: api_key,
        issuer: "kubenest".into(),
        admin: Some((ADMIN.into(), ADMIN_PASSWORD.into())),
        hub: None,
        settings: Settings {
            public_hub_url: "wss://hub.example.test/v1/connect".into(),
            agent_chart: "charts/kubenest-agent".into(),
            system_namespace: "kubenest-system".into(),
            secure_cookies: false,
            mint_timeout: Duration::from_secs(5),
            event_buffer: 64,
            console_dir: Some(console),
            charts: Default::default(),
        },
        limits: LimitsConfig {
            reads_per_second: 1000,
            writes_per_second: 1000,
            logins_per_minute_per_address: 1000,
            ..LimitsConfig::default()
        },
    };
    let state = start(config, &shutdown).await.unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let stop = shutdown.clone();
    tokio::spawn(kubenest_apiserver::serve(listener, state, async move {
        stop.cancelled().await
    }));

    let login = call(
        &base,
        None,
        Method::POST,
        "/api/v1/login",
        Some(json!({"username": ADMIN, "password": ADMIN_PASSWORD})),
    )
    .await;
    assert_eq!(login.status, StatusCode::OK, "{}", login.body);
    let token = login.body["access_token"].as_str().unwrap().to_owned();
    let token = Some(token.as_str());
    let created = call(
        &base,
        token,
        Method::POST,
        "/api/v1/orgs",
        Some(json!({"name": "acme", "display_name": "Acme"})),
    )
    .await;
    assert_eq!(created.status, StatusCode::CREATED, "{}", created.body);

    // The headers, on every kind of answer.
    let clusters = "/api/v1/orgs/acme/clusters";
    let answers = [
        (
            "an API answer",
            call(&base, token, Method::GET, clusters, None).await,
        ),
        (
            "an error",
            call(&base, None, Method::GET, clusters, None).await,
        ),
        (
            "the console's index",
            call(&base, None, Method::GET, "/", None).await,
        ),
        (
            "a console page",
            call(&base, None, Method::GET, "/apps/shop", None).await,
        ),
        (
            "an unknown API path",
            call(&base, token, Method::GET, "/api/v1/nowhere", None).await,
        ),
        (
            "a missing asset",
            call(&base, None, Method::GET, "/assets/none.js", None).await,
        ),
        (
            "the health check",
            call(&base, None, Method::GET, "/healthz", None).await,
        ),
    ];
    let statuses: Vec<u16> = answers.iter().map(|(_, a)| a.status.as_u16()).collect();
    assert_eq!(statuses, [200, 401, 200, 200, 404, 404, 200]);
    for (what, answer) in &answers {
        assert_hardened(what, answer);
    }

    // The management kube-apiserver goes away: a read and a write are 503s to retry.
    mgmt.stop();
    let read = call(&base, token, Method::GET, clusters, None).await;
    assert_outage(
        "a read without the kube-apiserver",
        &read,
        "management_unavailable",
    );
    let write = call(
        &base,
        token,
        Method::POST,
        clusters,
        Some(json!({"name": "west"})),
    )
    .await;
    assert_outage(
        "a write without the kube-apiserver",
        &write,
        "management_unavailable",
    );

    // PostgreSQL goes away: every signed-in request (its user is checked there) and a login
    // are 503s to retry.
    drop(postgres);
    let read = call(&base, token, Method::GET, "/api/v1/orgs/acme/audit", None).await;
    assert_outage("a read without PostgreSQL", &read, "database_unavailable");
    let write = call(
        &base,
        token,
        Method::POST,
        clusters,
        Some(json!({"name": "west"})),
    )
    .await;
    assert_outage("a write without PostgreSQL", &write, "database_unavailable");
    let login = call(
        &base,
        None,
        Method::POST,
        "/api/v1/login",
        Some(json!({"username": ADMIN, "password": ADMIN_PASSWORD})),
    )
    .await;
    assert_outage("a login without PostgreSQL", &login, "database_unavailable");
    shutdown.cancel();
}
