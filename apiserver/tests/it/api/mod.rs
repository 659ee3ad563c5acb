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

mod addons;
mod apps;
mod clusters;
mod dry_run;
mod errors;
mod events;
mod ingress_ca;
mod objects;
mod roles;
mod sessions;
mod templates;
mod verification;

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

fn forge(claims: Value, pem: &str, alg: jsonwebtoken::Algorithm) -> String {
    let key = jsonwebtoken::EncodingKey::from_ed_pem(pem.as_bytes()).unwrap();
    jsonwebtoken::encode(&jsonwebtoken::Header::new(alg), &claims, &key).unwrap()
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

/// What the runs check beyond their command line. A template's components are the App's with
/// `${slot}` strings allowed anywhere, and a slot must name one of the template's parameters: no
/// JSON Schema says that, so data the document allows there is not all data the API takes, and
/// `positive_data_acceptance` is off for the two operations that take components in that form
/// (tests/templates.rs checks them field by field). Likewise a project's fences: `allow_from`
/// must name another project of the organization, a default request must not exceed its limit
/// and an IPv6 block must parse, none of which a schema says (tests/doors/quotas.rs and
/// fence_admins.rs check them).
const SCHEMATHESIS_CONFIG: &str = r#"
[[operations]]
include-name = "PUT /api/v1/projects/{id}/fences"
checks.positive_data_acceptance.enabled = false

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
                "/(registry-credentials|ingress-ca|git-credentials|secret)$",
            ])
            .args(selection)
            .arg("--report-dir")
            .arg(report.path())
            // schemathesis keeps a cache in its working directory: not in the repository.
            .current_dir(report.path())
            // Every error it provokes must be an RFC 9457 problem (a check of its own).
            .env(
                "SCHEMATHESIS_HOOKS",
                concat!(env!("CARGO_MANIFEST_DIR"), "/tests/it/api/problem_shape.py"),
            )
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
        // Never delivered here (no agent): past the door, it has nothing to list yet.
        "app objects" => (
            Method::GET,
            format!("/api/v1/apps/{app}/objects"),
            None,
            409,
        ),
        "change app" => (
            Method::PATCH,
            format!("/api/v1/apps/{app}"),
            Some(json!({"progress_deadline_seconds": 300})),
            202,
        ),
        "verify app" => (
            Method::PATCH,
            format!("/api/v1/apps/{app}"),
            Some(json!({"verification": {"on_failure": "hold"}})),
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
