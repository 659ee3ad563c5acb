//! Container logs through the hub, end to end on the release programs: an App on a kwok
//! cluster (kwok's ClusterLogs gives every container the log file the test appends to), read
//! through `GET /api/v1/apps/{id}/logs` as text and as Server-Sent Events and through the
//! `kubenest apps logs` binary. A reader that leaves stops the agent's stream; bad parameters
//! are refused naming the field; a viewer may read, a user of another organization may not.

use std::io::Write;
use std::path::{Path, PathBuf};

use crate::common::{CONVERGE, Expect, Fixture, converged, create, eventually, fixture, run};
use kubenest_cli::api::Client;
use serde_json::{Value, json};

const PASSWORD: &str = "a-long-enough-password";

/// Appends a line to every kwok container's log (CRI log format).
fn append(file: &Path, text: &str) {
    let mut log = std::fs::OpenOptions::new().append(true).open(file).unwrap();
    let at = chrono::Utc::now().format("%Y-%m-%dT%H:%M:%S%.9fZ");
    writeln!(log, "{at} stdout F {text}").unwrap();
}

/// The sum of the samples of `metric` in a Prometheus text page.
fn sample(text: &str, metric: &str) -> f64 {
    text.lines()
        .filter(|line| !line.starts_with('#'))
        .filter_map(|line| {
            let (series, value) = line.rsplit_once(' ')?;
            let name = series.split_once('{').map_or(series, |(n, _)| n);
            (name == metric)
                .then(|| value.parse::<f64>().ok())
                .flatten()
        })
        .sum()
}

/// `metric` summed over the programs whose admin name starts with `program`.
async fn metric(f: &Fixture, program: &str, metric: &str) -> f64 {
    let mut total = 0.0;
    for (name, url) in f.system.admin_urls() {
        if name.starts_with(program) {
            let text = reqwest::get(format!("{url}/metrics"))
                .await
                .unwrap()
                .text()
                .await
                .unwrap();
            total += sample(&text, metric);
        }
    }
    total
}

/// A new user with `role` in `org` (or in a new organization of their own); logged in.
pub(crate) async fn user(f: &Fixture, admin: &mut Client, role: &str, org: Option<&str>) -> Client {
    let name = format!(
        "logs-{role}-{}",
        &uuid::Uuid::new_v4().simple().to_string()[..6]
    );
    admin
        .post(
            "/api/v1/users",
            &json!({"username": name, "password": PASSWORD}),
        )
        .await
        .unwrap();
    match org {
        Some(org) => {
            admin
                .call(
                    reqwest::Method::PUT,
                    &format!("/api/v1/orgs/{org}/members"),
                    Some(&json!({"user": name, "role": role})),
                )
                .await
                .unwrap();
        }
        None => {
            admin
                .post(
                    "/api/v1/orgs",
                    &json!({"name": format!("o{}", &name[5..]).replace('-', ""),
                        "display_name": "other", "members": [{"user": name, "role": "admin"}]}),
                )
                .await
                .unwrap();
        }
    }
    let mut client = Client::new(&f.system.api_url());
    client.login(&name, PASSWORD).await.unwrap();
    client
}

fn token(client: &Client) -> String {
    client.session().unwrap().access_token.clone()
}

pub(crate) async fn get(
    client: &Client,
    base: &str,
    path: &str,
    accept: &str,
) -> reqwest::Response {
    reqwest::Client::new()
        .get(format!("{base}{path}"))
        .bearer_auth(token(client))
        .header("Accept", accept)
        .send()
        .await
        .unwrap()
}

/// Reads `response` until `done` holds for what arrived (or the stream ends); returns it all.
async fn read_until(response: &mut reqwest::Response, done: impl Fn(&str) -> bool) -> String {
    let mut seen = String::new();
    let outcome = tokio::time::timeout(CONVERGE, async {
        while !done(&seen) {
            match response.chunk().await.unwrap() {
                Some(chunk) => seen.push_str(&String::from_utf8_lossy(&chunk)),
                None => break,
            }
        }
    })
    .await;
    assert!(
        outcome.is_ok(),
        "the stream did not show it in time; got:\n{seen}"
    );
    seen
}

/// An App `name` of nginx on `east`, running; the admin's session and the App's id.
pub(crate) async fn running_app(f: &mut Fixture, name: &str) -> (Client, String) {
    let (project, namespace) = f.project("east", name).await;
    let mut admin = f.admin().await;
    let app_id = create(&mut admin, &project, name, "nginx:1.27").await;
    let expected = [Expect {
        app_id: &app_id,
        name,
        image: "nginx:1.27",
        operations: &["create"],
    }];
    converged(f, "east", &namespace, &expected).await;
    (admin, app_id)
}

fn cli_binary() -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    exe.ancestors()
        .skip(1)
        .take(2)
        .map(|d| d.join("kubenest"))
        .find(|p| p.is_file())
        .expect("the kubenest CLI is not built: run `cargo build -p kubenest-cli`")
}

#[test]
fn log_lines_reach_rest_and_the_cli_through_the_hub_and_stop_when_the_reader_leaves() {
    run(async {
        let mut f = fixture().await;
        let (mut admin, app_id) = running_app(&mut f, "logs").await;
        let log_file = f.env.cluster("east").unwrap().kwok_log_file().unwrap();
        let base = f.system.api_url();
        let path = format!("/api/v1/apps/{app_id}/logs");
        let marker = format!("hello-{}", uuid::Uuid::new_v4().simple());
        append(&log_file, &marker);

        // Text, not followed: every line tagged pod/container, then the end and why.
        let mut text = get(&admin, &base, &format!("{path}?tail=1000"), "text/plain").await;
        assert_eq!(text.status(), 200);
        let body = read_until(&mut text, |s| s.contains("# end of logs")).await;
        let line = body
            .lines()
            .find(|l| l.ends_with(&marker))
            .unwrap_or_else(|| panic!("no line with {marker}:\n{body}"));
        assert!(
            line.starts_with("logs-web-") && line.contains("/web "),
            "{line}"
        );
        assert!(body.contains("# end of logs (pod_ended)"), "{body}");

        // Server-Sent Events, followed: a line written now arrives while the stream is open.
        let mut events = get(
            &admin,
            &base,
            &format!("{path}?component=web&follow=true&since=1h"),
            "text/event-stream",
        )
        .await;
        assert_eq!(events.status(), 200);
        assert_eq!(
            events.headers()["content-type"].to_str().unwrap(),
            "text/event-stream"
        );
        let first = read_until(&mut events, |s| s.contains(&marker)).await;
        assert!(first.contains("event: log\ndata: {"), "{first}");
        let later = format!("later-{}", uuid::Uuid::new_v4().simple());
        append(&log_file, &later);
        let more = read_until(&mut events, |s| s.contains(&later)).await;
        let data: Value = more
            .lines()
            .filter_map(|l| l.strip_prefix("data: "))
            .map(|d| serde_json::from_str::<Value>(d).unwrap())
            .find(|d| d["line"] == later.as_str())
            .unwrap();
        assert_eq!(data["container"], "web", "{data}");
        assert!(
            data["pod"].as_str().unwrap().starts_with("logs-web-"),
            "{data}"
        );
        eventually("the agent serves the stream", CONVERGE, async || {
            metric(&f, "agent-east", "kubenest_agent_log_streams").await == 1.0
        })
        .await;

        // The reader leaves: the agent's stream ends, and the API server forgets it.
        drop(events);
        eventually("the agent stops the stream", CONVERGE, async || {
            metric(&f, "agent-east", "kubenest_agent_log_streams").await == 0.0
        })
        .await;
        eventually("the API server has no reader left", CONVERGE, async || {
            metric(&f, "apiserver", "kubenest_apiserver_log_readers").await == 0.0
        })
        .await;

        // The CLI binary prints `pod/container line`.
        let session = tempfile::NamedTempFile::new().unwrap();
        let session_json = json!({
            "api": base,
            "username": f.system.options().admin_user,
            "access_token": token(&admin),
        });
        std::fs::write(session.path(), session_json.to_string()).unwrap();
        let output = tokio::process::Command::new(cli_binary())
            .arg("--session")
            .arg(session.path())
            .args(["--org", &f.system.options().org])
            .args(["apps", "logs", &app_id, "-c", "web", "--tail", "1000"])
            .output()
            .await
            .unwrap();
        let stdout = String::from_utf8_lossy(&output.stdout);
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(output.status.success(), "kubenest apps logs: {stderr}");
        assert!(
            stdout
                .lines()
                .any(|l| l.starts_with("logs-web-") && l.ends_with(&format!("/web {later}"))),
            "{stdout}"
        );

        // Bad parameters are refused at the door, naming the field.
        for (query, field) in [
            ("tail=0", "tail"),
            ("since=yesterday", "since"),
            ("follow=maybe", "follow"),
            ("component=nope", "component"),
        ] {
            let refused = get(&admin, &base, &format!("{path}?{query}"), "text/plain").await;
            assert_eq!(refused.status(), 422, "{query}");
            let body: Value = refused.json().await.unwrap();
            assert_eq!(body["field"], field, "{query}: {body}");
        }

        // A viewer may read logs; a user of another organization may not see the App.
        let org = f.system.options().org.clone();
        let viewer = user(&f, &mut admin, "viewer", Some(&org)).await;
        let mut read = get(&viewer, &base, &format!("{path}?tail=10"), "text/plain").await;
        assert_eq!(read.status(), 200);
        let body = read_until(&mut read, |s| s.contains("# end of logs")).await;
        assert!(body.contains("/web "), "{body}");
        let outsider = user(&f, &mut admin, "admin", None).await;
        let refused = get(&outsider, &base, &format!("{path}?tail=10"), "text/plain").await;
        assert!(
            [403, 404].contains(&refused.status().as_u16()),
            "{}",
            refused.status()
        );
    });
}

#[test]
fn a_reader_is_told_when_the_agents_session_drops_and_then_refused_until_it_is_back() {
    run(async {
        let mut f = fixture().await;
        let (admin, app_id) = running_app(&mut f, "logdrop").await;
        let log_file = f.env.cluster("east").unwrap().kwok_log_file().unwrap();
        let base = f.system.api_url();
        let path = format!("/api/v1/apps/{app_id}/logs");
        let marker = format!("drop-{}", uuid::Uuid::new_v4().simple());
        append(&log_file, &marker);
        let mut events = get(
            &admin,
            &base,
            &format!("{path}?follow=true"),
            "text/event-stream",
        )
        .await;
        assert_eq!(events.status(), 200);
        read_until(&mut events, |s| s.contains(&marker)).await;

        // The agent goes away mid-stream: the hub tells the reader why the stream ended.
        f.system.agent("east").unwrap().service.kill();
        let rest = read_until(&mut events, |s| s.contains("event: end")).await;
        let end: Value = rest
            .split("event: end\ndata: ")
            .nth(1)
            .and_then(|d| d.lines().next())
            .map(|d| serde_json::from_str(d).unwrap())
            .unwrap();
        assert_eq!(end["reason"], "session_dropped", "{rest}");

        // Without the agent nothing is queued: a new reader is refused at once.
        let refused = get(&admin, &base, &format!("{path}?tail=5"), "text/plain").await;
        assert_eq!(refused.status(), 503);

        f.system.agent("east").unwrap().service.start().unwrap();
        f.system.wait_connected(CONVERGE).await.unwrap();
        eventually("logs readable again", CONVERGE, async || {
            get(&admin, &base, &format!("{path}?tail=5"), "text/plain")
                .await
                .status()
                == 200
        })
        .await;
    });
}

/// The `reason` of a stream's `event: end`, reading until it comes.
async fn end_reason(response: &mut reqwest::Response) -> String {
    let rest = read_until(response, |s| s.contains("event: end\ndata: ")).await;
    let end: Value = rest
        .split("event: end\ndata: ")
        .nth(1)
        .and_then(|d| d.lines().next())
        .map(|d| serde_json::from_str(d).unwrap())
        .unwrap();
    end["reason"].as_str().unwrap_or_default().to_owned()
}

#[test]
fn one_reader_cannot_take_every_stream_and_readers_are_cut_when_their_access_or_hub_goes() {
    run(async {
        let mut f = fixture().await;
        let (mut admin, app_id) = running_app(&mut f, "logfair").await;
        let base = f.system.api_url();
        let follow = format!("/api/v1/apps/{app_id}/logs?follow=true");
        let org = f.system.options().org.clone();
        let viewer = user(&f, &mut admin, "viewer", Some(&org)).await;

        // A viewer holds as many follow streams as one user may; one more is a 429.
        let mut held = Vec::new();
        // kubenest_apiserver::logs::MAX_STREAMS_PER_USER (the system runs the binary, not the library).
        for _ in 0..8 {
            let stream = get(&viewer, &base, &follow, "text/event-stream").await;
            assert_eq!(stream.status(), 200);
            held.push(stream);
        }
        let refused = get(&viewer, &base, &follow, "text/event-stream").await;
        assert_eq!(refused.status(), 429);
        assert!(refused.headers().contains_key("retry-after"));
        // The cluster's streams are not all theirs: another reader still reads.
        let mut other = get(&admin, &base, &follow, "text/event-stream").await;
        assert_eq!(other.status(), 200);

        // The viewer leaves the organization: every stream of theirs ends, `forbidden`.
        let name = viewer.session().unwrap().username.clone();
        admin
            .call(
                reqwest::Method::DELETE,
                &format!("/api/v1/orgs/{org}/members/{name}"),
                None,
            )
            .await
            .unwrap();
        for stream in &mut held {
            assert_eq!(end_reason(stream).await, "forbidden");
        }

        // The hub replica carrying the cluster's session dies without a word: the reader
        // still following is told, instead of waiting for ever.
        let index = f.hub_holding("east").await;
        f.system.hubs[index].service.kill();
        assert_eq!(end_reason(&mut other).await, "session_dropped");
        f.system.hubs[index].service.start().unwrap();
        f.system.wait_connected(CONVERGE).await.unwrap();
    });
}

#[test]
fn a_builds_credentials_are_taken_out_of_its_log_lines() {
    run(async {
        let f = fixture().await;
        let (project, _) = f.project("east", "logbuild").await;
        let mut admin = f.admin().await;
        let app = admin
            .post(
                "/api/v1/apps",
                &json!({"project_id": project, "name": "logbuild", "components": [
                    {"name": "web", "type": "workload", "workload_spec": {
                        "git": {"repository": "https://git.example.test/shop.git",
                                "ref": "main", "mode": "dockerfile"},
                        "port": 8080}}]}),
            )
            .await
            .unwrap();
        let app_id = app["id"].as_str().unwrap().to_owned();
        let password = format!("pw-{}", uuid::Uuid::new_v4().simple());
        admin
            .call(
                reqwest::Method::PUT,
                &format!("/api/v1/apps/{app_id}/components/web/git-credentials"),
                Some(&json!({"username": "builder", "password": password})),
            )
            .await
            .unwrap();
        // Stored as credentials, which no chart's pod may read (agent/src/confine.rs).
        let east = f.env.cluster("east").unwrap().client().await.unwrap();
        let shown = admin
            .get(&format!("/api/v1/projects/{project}"))
            .await
            .unwrap();
        let namespace = shown["namespace"].as_str().unwrap().to_owned();
        let stored = kube::Api::<k8s_openapi::api::core::v1::Secret>::namespaced(east, &namespace)
            .get(kubenest_contracts::git_secret("logbuild", "web").as_str())
            .await
            .unwrap();
        assert_eq!(
            stored
                .metadata
                .labels
                .unwrap_or_default()
                .get(kubenest_crds::names::labels::CREDENTIALS)
                .map(String::as_str),
            Some("true")
        );
        // What the build prints (kwok gives every container the test's log file).
        let log_file = f.env.cluster("east").unwrap().kwok_log_file().unwrap();
        append(&log_file, &format!("fetching as builder:{password} now"));
        let base = f.system.api_url();
        let path = format!("/api/v1/apps/{app_id}/logs?component=web&tail=1000");
        eventually("the build's pod has logs", CONVERGE, async || {
            get(&admin, &base, &path, "text/plain").await.status() == 200
        })
        .await;
        let mut text = get(&admin, &base, &path, "text/plain").await;
        let body = read_until(&mut text, |s| s.contains("# end of logs")).await;
        assert!(
            body.contains("fetching as builder:[redacted] now"),
            "{body}"
        );
        assert!(!body.contains(&password), "{body}");
    });
}
