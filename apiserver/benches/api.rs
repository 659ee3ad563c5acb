//! The REST facade under load, against the management kube-apiserver it fronts, in the same run:
//!
//! - `GET /api/v1/apps?org=…&limit=100` with 1,000 Apps stored, against a direct list of the
//!   same Apps (`limit=100`) from the kube-apiserver;
//! - `POST /api/v1/apps` against a direct create of the same App object;
//! - SSE delivery: 1,000 subscribers (half on each replica; 63 viewers holding 16 streams each,
//!   the most one person may) of one App's events; a sample is the
//!   time from patching the App's status to a subscriber receiving the phase event, against the
//!   same number of kube-apiserver watches of that App receiving the same change;
//! - the same create by a person's kubectl (a kubenest member's Kubernetes identity), which goes
//!   through the admission webhooks, against the trusted create that skips them.
//!
//! Load is closed-loop with the same client code on both sides (the kube-apiserver needs client
//! certificates, which wrk and oha do not present). Both API server replicas, the controllers,
//! the management cluster and PostgreSQL are real processes or tasks on this machine.
//! `make bench BENCH=api`; the last line is JSON.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // a benchmark aborts on error

#[path = "../tests/it/common/mod.rs"]
mod common;

use std::sync::{Arc, LazyLock};
use std::time::{Duration, Instant};

use common::{Client, cluster, org, plane, project, web_app};
use futures::StreamExt;
use kube::api::{Api, Patch, PatchParams, PostParams};
use kubenest_apiserver::events::MAX_STREAMS_PER_USER;
use kubenest_crds::App;
use kubenest_testkit::bench::size;
use reqwest::Method;
use serde_json::{Value, json};
use tokio::sync::Mutex;

// Full size under `make bench`; tiny under `make test`, which only checks that every round
// still runs (kubenest_testkit::bench).
static STORED: LazyLock<usize> = LazyLock::new(|| size(1000, 20));
static CONCURRENCY: LazyLock<usize> = LazyLock::new(|| size(16, 2));
static ROUND: LazyLock<Duration> =
    LazyLock::new(|| size(Duration::from_secs(8), Duration::from_millis(300)));
static SUBSCRIBERS: LazyLock<usize> = LazyLock::new(|| size(1000, 40));
static CHANGES: LazyLock<usize> = LazyLock::new(|| size(20, 3));

fn percentile(sorted: &[f64], p: f64) -> f64 {
    let index = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[index.min(sorted.len() - 1)]
}

/// Requests per second and p99 (ms) of `call` run by `CONCURRENCY` workers for `ROUND`.
async fn load<F, Fut>(call: F) -> (f64, f64)
where
    F: Fn(usize) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = bool> + Send,
{
    let call = Arc::new(call);
    let latencies = Arc::new(Mutex::new(Vec::new()));
    let started = Instant::now();
    let workers: Vec<_> = (0..*CONCURRENCY)
        .map(|w| {
            let (call, latencies) = (call.clone(), latencies.clone());
            tokio::spawn(async move {
                let mut mine = Vec::new();
                let mut i = w;
                while started.elapsed() < *ROUND {
                    let t = Instant::now();
                    assert!(call(i).await, "a request failed");
                    mine.push(t.elapsed().as_secs_f64() * 1000.0);
                    i += *CONCURRENCY;
                }
                latencies.lock().await.extend(mine);
            })
        })
        .collect();
    for worker in workers {
        worker.await.unwrap();
    }
    let mut all = latencies.lock().await.clone();
    all.sort_by(f64::total_cmp);
    let rps = all.len() as f64 / started.elapsed().as_secs_f64();
    (rps, percentile(&all, 0.99))
}

fn app_object(name: &str, project: &str) -> App {
    serde_json::from_value(json!({
        "apiVersion": "kubenest.io/v1alpha1", "kind": "App",
        "metadata": {"name": name},
        "spec": {"project": project, "components": [{"name": "web",
            "workload": {"image": "bench:1", "replicas": 1, "port": 8080}}]}
    }))
    .unwrap()
}

#[tokio::main]
async fn main() {
    tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::new("warn"))
        .with_writer(std::io::stderr)
        .init();
    let plane = plane();
    let admin = Client::admin().await;
    let org = org(&admin, "bench", json!([])).await;
    let registration = cluster(&admin, &org).await;
    let project = project(&admin, &org, registration["cluster_id"].as_str().unwrap()).await;
    let project_id = project["id"].as_str().unwrap().to_owned();
    let project_name = project["name"].as_str().unwrap().to_owned();
    let kube = plane.kube().await;
    let apps: Api<App> = Api::namespaced(kube.clone(), &format!("org-{org}"));
    // API_BENCH_SSE_ONLY=1 measures only the event stream (for working on it).
    let sse_only = std::env::var_os("API_BENCH_SSE_ONLY").is_some();
    if sse_only {
        let watched = admin
            .expect(
                Method::POST,
                "/api/v1/apps",
                Some(web_app(&project_id, "watched", "bench:1")),
                202,
            )
            .await;
        let app_id = watched["id"].as_str().unwrap().to_owned();
        let (http, urls) = (reqwest::Client::new(), plane.urls.clone());
        let tokens = subscribers(&admin, &org).await;
        let sse = fan_out(Side::Sse, &http, &tokens, &urls, &app_id, &apps).await;
        let watch = fan_out(Side::Watch, &http, &tokens, &urls, &app_id, &apps).await;
        println!(
            "{}",
            json!({"sse_p50_ms": percentile(&sse, 0.5), "sse_p99_ms": percentile(&sse, 0.99),
            "kube_watch_p50_ms": percentile(&watch, 0.5), "kube_watch_p99_ms": percentile(&watch, 0.99)})
        );
        std::process::exit(0);
    }
    eprintln!("storing {} apps", *STORED);
    futures::stream::iter(0..*STORED)
        .for_each_concurrent(16, |i| {
            let (apps, project) = (apps.clone(), project_name.clone());
            async move {
                apps.create(
                    &PostParams::default(),
                    &app_object(&format!("stored-{i}"), &project),
                )
                .await
                .unwrap();
            }
        })
        .await;
    // Let the controllers take on the new Apps before measuring.
    tokio::time::sleep(size(Duration::from_secs(10), Duration::from_secs(1))).await;

    let http = reqwest::Client::new();
    let token = admin.token.clone().unwrap();
    let urls = plane.urls.clone();
    let get_path = format!("/api/v1/apps?org={org}&limit=100");
    let get_api = {
        let (http, token, urls, path) =
            (http.clone(), token.clone(), urls.clone(), get_path.clone());
        move |i: usize| {
            let request = http
                .get(format!("{}{path}", urls[i % 2]))
                .bearer_auth(&token);
            async move {
                let response = request.send().await.unwrap();
                let ok = response.status() == 200;
                let _ = response.bytes().await.unwrap();
                ok
            }
        }
    };
    let list_path = format!("/apis/kubenest.io/v1alpha1/namespaces/org-{org}/apps?limit=100");
    let get_kube = {
        let (kube, path) = (kube.clone(), list_path.clone());
        move |_| {
            let (kube, path) = (kube.clone(), path.clone());
            async move {
                let request = http::Request::get(path).body(Vec::new()).unwrap();
                kube.request_text(request).await.is_ok()
            }
        }
    };
    eprintln!("GET /apps");
    let (get_rps, get_p99) = load(get_api).await;
    let (kube_get_rps, kube_get_p99) = load(get_kube).await;

    let post_api_named = |prefix: &'static str| {
        let (http, token, urls, project_id) = (
            http.clone(),
            token.clone(),
            urls.clone(),
            project_id.clone(),
        );
        move |i: usize| {
            let request = http
                .post(format!("{}/api/v1/apps", urls[i % 2]))
                .bearer_auth(&token)
                .json(&web_app(&project_id, &format!("{prefix}-{i}"), "bench:1"));
            async move { request.send().await.unwrap().status() == 202 }
        }
    };
    let post_api = post_api_named("api");
    let post_kube = {
        let (apps, project) = (apps.clone(), project_name.clone());
        move |i: usize| {
            let (apps, app) = (apps.clone(), app_object(&format!("kube-{i}"), &project));
            async move { apps.create(&PostParams::default(), &app).await.is_ok() }
        }
    };
    // The same create by a person's kubectl: through the admission webhooks (the actor stamp,
    // the REST rules, the audit entry), against the trusted create above that skips them.
    let member = common::user(&admin, "bench-member").await;
    admin
        .expect(
            Method::PUT,
            &format!("/api/v1/orgs/{org}/members"),
            Some(json!({"user": member, "role": "member"})),
            200,
        )
        .await;
    let member_id = common::user_id(&member).await;
    let mut config = kube::Config::from_custom_kubeconfig(
        kube::config::Kubeconfig::read_from(&plane.kubeconfig).unwrap(),
        &Default::default(),
    )
    .await
    .unwrap();
    config.auth_info.impersonate = Some(kubenest_crds::common::kubernetes_user(&member_id));
    let door_apps: Api<App> = Api::namespaced(
        kube::Client::try_from(config).unwrap(),
        &format!("org-{org}"),
    );
    for _ in 0..300 {
        if door_apps.list(&Default::default()).await.is_ok() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let post_door = {
        let (apps, project) = (door_apps.clone(), project_name.clone());
        move |i: usize| {
            let (apps, app) = (apps.clone(), app_object(&format!("door-{i}"), &project));
            async move { apps.create(&PostParams::default(), &app).await.is_ok() }
        }
    };

    eprintln!("POST /apps");
    let (post_rps, post_p99) = load(post_api).await;
    let (kube_post_rps, kube_post_p99) = load(post_kube).await;
    let (door_post_rps, door_post_p99) = load(post_door).await;
    // The same creates once the organization has a budget and the project a quota (both far
    // from reached): each create is then checked against them, which reads the organization's
    // Apps to count their requests.
    admin
        .expect(
            Method::PATCH,
            &format!("/api/v1/orgs/{org}"),
            Some(json!({"budget": {"cpu": "100000", "memory": "100000Gi"}})),
            200,
        )
        .await;
    admin
        .expect(
            Method::PUT,
            &format!("/api/v1/projects/{project_id}/fences"),
            Some(json!({"quota": {"cpu": "100000"}})),
            200,
        )
        .await;
    let (fenced_rps, fenced_p99) = load(post_api_named("fenced")).await;

    eprintln!("SSE to {} subscribers", *SUBSCRIBERS);
    let watched = admin
        .expect(
            Method::POST,
            "/api/v1/apps",
            Some(web_app(&project_id, "watched", "bench:1")),
            202,
        )
        .await;
    let app_id = watched["id"].as_str().unwrap().to_owned();
    // One side at a time: both at once would share the two cores and slow each other.
    let tokens = subscribers(&admin, &org).await;
    let sse = fan_out(Side::Sse, &http, &tokens, &urls, &app_id, &apps).await;
    let kube_watch = fan_out(Side::Watch, &http, &tokens, &urls, &app_id, &apps).await;

    let ratio = |a: f64, b: f64| (a / b * 100.0).round() / 100.0;
    let round = |x: f64| (x * 10.0).round() / 10.0;
    let line = json!({
        "bench": "api",
        "stored_apps": *STORED,
        "concurrency": *CONCURRENCY,
        "get_apps_rps": round(get_rps), "get_apps_p99_ms": round(get_p99),
        "kube_list_rps": round(kube_get_rps), "kube_list_p99_ms": round(kube_get_p99),
        "get_ratio": ratio(get_rps, kube_get_rps),
        "post_apps_rps": round(post_rps), "post_apps_p99_ms": round(post_p99),
        "kube_create_rps": round(kube_post_rps), "kube_create_p99_ms": round(kube_post_p99),
        "post_ratio": ratio(post_rps, kube_post_rps),
        "post_apps_fenced_rps": round(fenced_rps), "post_apps_fenced_p99_ms": round(fenced_p99),
        "fenced_post_ratio": ratio(fenced_rps, kube_post_rps),
        "fenced_vs_unfenced": ratio(fenced_rps, post_rps),
        "kubectl_create_through_webhooks_rps": round(door_post_rps),
        "kubectl_create_through_webhooks_p99_ms": round(door_post_p99),
        "webhooks_ratio": ratio(door_post_rps, kube_post_rps),
        "sse_subscribers": *SUBSCRIBERS,
        "sse_p50_ms": round(percentile(&sse, 0.5)), "sse_p99_ms": round(percentile(&sse, 0.99)),
        "kube_watch_p50_ms": round(percentile(&kube_watch, 0.5)),
        "kube_watch_p99_ms": round(percentile(&kube_watch, 0.99)),
        "sse_target_p99_ms": 100,
    });
    println!("{line}");
    std::process::exit(0);
}

/// The bearer tokens of the stream's subscribers: viewers of `org`, each holding as many
/// streams as the API lets one person hold ([`MAX_STREAMS_PER_USER`]), as a team of people
/// watching one App would.
async fn subscribers(admin: &Client, org: &str) -> Vec<String> {
    let mut tokens = Vec::new();
    for _ in 0..SUBSCRIBERS.div_ceil(MAX_STREAMS_PER_USER) {
        let viewer = common::user(admin, "bench-viewer").await;
        admin
            .expect(
                Method::PUT,
                &format!("/api/v1/orgs/{org}/members"),
                Some(json!({"user": viewer, "role": "viewer"})),
                200,
            )
            .await;
        let client = Client::login(0, &viewer, common::PASSWORD).await;
        tokens.push(client.token.unwrap());
    }
    tokens
}

/// Who receives the changes.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Side {
    /// `SUBSCRIBERS` SSE streams, half on each replica.
    Sse,
    /// `SUBSCRIBERS` kube-apiserver watches of the App.
    Watch,
}

/// Delivery latencies (ms, sorted) of `CHANGES` phase changes to `side`.
async fn fan_out(
    side: Side,
    http: &reqwest::Client,
    tokens: &[String],
    urls: &[String; 2],
    app_id: &str,
    apps: &Api<App>,
) -> Vec<f64> {
    let sent: Arc<Mutex<Vec<(String, Instant)>>> = Arc::default();
    let sse = Arc::new(Mutex::new(Vec::new()));
    let kube_watch = Arc::new(Mutex::new(Vec::new()));
    let (ready_tx, mut ready_rx) = tokio::sync::mpsc::channel::<()>(*SUBSCRIBERS);
    let counts = Arc::new(Mutex::new(vec![0usize; *SUBSCRIBERS]));
    let seen_phases: Arc<Mutex<Vec<(usize, String)>>> = Arc::default();
    let tag = match side {
        Side::Sse => "Sse",
        Side::Watch => "Watch",
    };
    for i in (0..*SUBSCRIBERS).filter(|_| side == Side::Sse) {
        let url = format!("{}/api/v1/events/stream?app_id={app_id}", urls[i % 2]);
        let token = &tokens[i / MAX_STREAMS_PER_USER % tokens.len()];
        let request = http.get(url).bearer_auth(token);
        let (sent, sse, ready, counts, seen_phases) = (
            sent.clone(),
            sse.clone(),
            ready_tx.clone(),
            counts.clone(),
            seen_phases.clone(),
        );
        tokio::spawn(async move {
            let response = request.send().await.unwrap();
            assert_eq!(response.status(), 200);
            ready.send(()).await.unwrap();
            let mut stream = response.bytes_stream();
            let mut buffer = String::new();
            let mut seen = 0;
            while let Some(chunk) = stream.next().await {
                buffer.push_str(&String::from_utf8_lossy(&chunk.unwrap()));
                while let Some(end) = buffer.find("\n\n") {
                    let frame: String = buffer.drain(..end + 2).collect();
                    let Some(data) = frame.lines().find_map(|l| l.strip_prefix("data: ")) else {
                        continue;
                    };
                    let event: Value = serde_json::from_str(data).unwrap();
                    let Some(phase) = event["phase"].as_str() else {
                        continue;
                    };
                    // Delivered once parsed, as the watch side's events are.
                    let at = Instant::now();
                    let origin = sent
                        .lock()
                        .await
                        .iter()
                        .find(|(p, _)| p == phase)
                        .map(|(_, t)| *t);
                    if let Some(origin) = origin {
                        sse.lock().await.push((at - origin).as_secs_f64() * 1000.0);
                        counts.lock().await[i] += 1;
                        seen_phases.lock().await.push((i, phase.to_owned()));
                        seen += 1;
                        if seen == *CHANGES {
                            return;
                        }
                    }
                }
            }
            eprintln!(
                "subscriber {i} (replica {}): stream ended after {seen}",
                i % 2
            );
        });
    }
    for _ in (0..*SUBSCRIBERS).filter(|_| side == Side::Watch) {
        let (apps, sent, kube_watch, ready) = (
            apps.clone(),
            sent.clone(),
            kube_watch.clone(),
            ready_tx.clone(),
        );
        tokio::spawn(async move {
            let config = kube::runtime::watcher::Config::default().fields("metadata.name=watched");
            let mut events = kube::runtime::watcher::watcher(apps, config).boxed();
            let mut announced = false;
            let mut seen = 0;
            while let Some(event) = events.next().await {
                let at = Instant::now();
                match event.unwrap() {
                    kube::runtime::watcher::Event::InitDone if !announced => {
                        announced = true;
                        ready.send(()).await.unwrap();
                    }
                    kube::runtime::watcher::Event::Apply(app) => {
                        let phase = app.status.and_then(|s| s.phase).unwrap_or_default();
                        let origin = sent
                            .lock()
                            .await
                            .iter()
                            .find(|(p, _)| *p == phase)
                            .map(|(_, t)| *t);
                        if let Some(origin) = origin {
                            kube_watch
                                .lock()
                                .await
                                .push((at - origin).as_secs_f64() * 1000.0);
                            seen += 1;
                            if seen == *CHANGES {
                                return;
                            }
                        }
                    }
                    _ => {}
                }
            }
        });
    }
    for _ in 0..*SUBSCRIBERS {
        // A subscriber that cannot connect panics in its task; this one must not wait for it.
        tokio::time::timeout(Duration::from_secs(60), ready_rx.recv())
            .await
            .expect("a subscriber never connected (its task's panic is above)")
            .unwrap();
    }
    // Every receiver exists now (a stream's headers are sent once it is subscribed, a watch
    // announces itself once listed), but a watch client opens its watch only after its list:
    // a pause keeps the first changes from timing connection set-up on either side.
    tokio::time::sleep(size(Duration::from_secs(5), Duration::from_secs(1))).await;
    for n in 0..*CHANGES {
        let phase = format!("{tag}{n}");
        sent.lock().await.push((phase.clone(), Instant::now()));
        let patch = json!({"status": {"phase": phase}});
        apps.patch_status("watched", &PatchParams::default(), &Patch::Merge(&patch))
            .await
            .unwrap();
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    let deadline = Instant::now() + Duration::from_secs(30);
    let received = match side {
        Side::Sse => sse,
        Side::Watch => kube_watch,
    };
    while Instant::now() < deadline && received.lock().await.len() < *SUBSCRIBERS * *CHANGES {
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let mut all = received.lock().await.clone();
    eprintln!(
        "{side:?}: {} of {} delivered",
        all.len(),
        *SUBSCRIBERS * *CHANGES
    );
    // Diagnostics: how late the stragglers are, and who is missing what.
    tokio::time::sleep(size(Duration::from_secs(5), Duration::ZERO)).await;
    let later = received.lock().await.clone();
    let slow = later.iter().filter(|ms| **ms > 1000.0).count();
    let worst = later.iter().copied().fold(0.0, f64::max);
    eprintln!(
        "{side:?}: {} delivered 5 s later; {slow} took over 1 s, the slowest {worst:.0} ms",
        later.len()
    );
    if side == Side::Sse {
        let counts = counts.lock().await;
        let short: Vec<(usize, usize)> = counts
            .iter()
            .copied()
            .enumerate()
            .filter(|(_, c)| *c < *CHANGES)
            .collect();
        let on_replica = |r: usize| short.iter().filter(|(i, _)| i % 2 == r).count();
        let seen_phases = seen_phases.lock().await;
        let mut missing: std::collections::BTreeMap<String, usize> = Default::default();
        for (i, _) in &short {
            for n in 0..*CHANGES {
                let phase = format!("{tag}{n}");
                if !seen_phases.iter().any(|(j, p)| j == i && *p == phase) {
                    *missing.entry(phase).or_default() += 1;
                }
            }
        }
        eprintln!("missing phases: {missing:?}");
        eprintln!(
            "{} subscribers short ({} on replica 0, {} on 1); received: {:?}",
            short.len(),
            on_replica(0),
            on_replica(1),
            short.iter().map(|(_, c)| *c).take(20).collect::<Vec<_>>()
        );
    }
    // Checking (not measuring), every change must reach every receiver.
    assert!(
        kubenest_testkit::bench::measuring() || later.len() == *SUBSCRIBERS * *CHANGES,
        "{side:?}: {} of {} changes delivered",
        later.len(),
        *SUBSCRIBERS * *CHANGES
    );
    all.sort_by(f64::total_cmp);
    all
}
