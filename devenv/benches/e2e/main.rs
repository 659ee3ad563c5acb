//! `make bench BENCH=e2e`: App create → Running through the whole path (REST → controllers →
//! hub → agent → Deployment Ready on the cluster → status back to the API), against applying the
//! same Deployment and Service directly to the same cluster and waiting for it to be Ready, in
//! the same run, alternating; then the time for 1,000 Apps across two clusters to converge.
//!
//! The system is the release programs started as `make dev` starts them (two hubs, two
//! controllers replicas, the API server, an agent per cluster registered through the API). Both
//! sides wait the way their clients do, on a watch: the API's event stream (`app.phase` Running)
//! for kubenest, a watch of the Deployment until Ready for the direct apply (server-side apply
//! through the same client library kubectl's apply uses, then what `kubectl rollout status`
//! does, without kubectl's process start, so the peer is the stricter baseline). Watches of both
//! clusters time each stage of the kubenest path, and `/proc` says what each round cost in CPU
//! by program.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
// The one line of figures is a `json!` of more keys than the macro recurses through by default.
#![recursion_limit = "256"]

use std::collections::HashMap;
use std::sync::{Arc, LazyLock, Mutex};
use std::time::{Duration, Instant};

use futures::StreamExt as _;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{Namespace, Service};
use kube::api::{Api, ApiResource, DynamicObject, Patch, PatchParams};
use kube::runtime::{WatchStreamExt as _, watcher};
use kubenest_cli::api::{Client, query_value};
use kubenest_devenv::system::{Options, System};
use kubenest_devenv::tour::EventStream;
use kubenest_testkit::bench::size;
use kubenest_testkit::{Binaries, Environment, NodePool};
use serde_json::{Value, json};

// Full size under `make bench`; tiny under `make test`, which only checks that the benchmark
// still runs (kubenest_testkit::bench).
static ROUNDS: LazyLock<usize> = LazyLock::new(|| size(40, 2));
static WARMUP: LazyLock<usize> = LazyLock::new(|| size(3, 1));
static CONVERGE_APPS: LazyLock<usize> = LazyLock::new(|| size(1000, 5));
/// Overrides [`CONVERGE_APPS`] (0 measures the latency alone), for looking into one part.
const CONVERGE_APPS_ENV: &str = "E2E_CONVERGE_APPS";
/// How long the 1,000 Apps get before the figure is reported as not reached.
const CONVERGE_CAP: Duration = Duration::from_secs(300);

mod cost;
mod direct;
mod stages;

use cost::*;
use direct::*;
use stages::*;

fn main() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(bench());
    // The stage watches still run; they are not waited for.
    runtime.shutdown_timeout(Duration::from_secs(5));
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

fn app_body(project_id: &str, name: &str) -> Value {
    json!({
        "project_id": project_id, "name": name,
        "components": [{"name": "web", "type": "workload",
            "workload_spec": {"image": "nginx:1.27", "replicas": 1, "port": 8080}}]
    })
}

async fn project(admin: &mut Client, org: &str, cluster_id: &str, name: &str) -> String {
    let project = admin
        .post(
            &format!("/api/v1/orgs/{org}/projects"),
            &json!({"name": name, "cluster_id": cluster_id}),
        )
        .await
        .unwrap();
    let id = project["id"].as_str().unwrap().to_owned();
    loop {
        if admin.get(&format!("/api/v1/projects/{id}")).await.unwrap()["phase"] == "Ready" {
            return id;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// One App through kubenest: POST, then wait for the API's event stream to say it runs. Returns
/// the total and each stage's share (ms since the stage before).
async fn through_kubenest(
    admin: &mut Client,
    stages: &Stages,
    project_id: &str,
    name: &str,
) -> (f64, [f64; STAGES]) {
    let started = Instant::now();
    let app = admin
        .post("/api/v1/apps", &app_body(project_id, name))
        .await
        .unwrap();
    let id = app["id"].as_str().unwrap().to_owned();
    stages.reached(&id, Stage::Streamed).await;
    let done = Instant::now();
    // What the stream said is what the API answers.
    let app = admin.get(&format!("/api/v1/apps/{id}")).await.unwrap();
    assert!(
        app["phase"] == "Running" && app["observed_revision"] == app["revision"],
        "streamed Running, but the API answers {app}"
    );
    (
        (done - started).as_secs_f64() * 1000.0,
        stage_shares(started, stages.get(&id)),
    )
}

/// Waits until each of `keys` reached `stage` as the watches see it and `confirm` (a list of
/// what is really there) counts them all, or [`CONVERGE_CAP`] passed. The watches only say when
/// to look: `confirm` runs once they say all are there, at the cap, and every 60 s meanwhile in
/// case an event was missed (a list of 1,000 Apps every 10 s was a load of its own on the
/// side it measured). Returns the seconds since `started` (none if not reached) and the last
/// count `confirm` gave.
async fn converged<F, Fut>(
    stages: &Stages,
    keys: &[String],
    stage: Stage,
    started: Instant,
    what: &str,
    mut confirm: F,
) -> (Option<f64>, usize)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = usize>,
{
    let (mut printed, mut last_confirm) = (0, Instant::now());
    loop {
        let seen = stages.count(keys, stage);
        if seen != printed && (seen == keys.len() || seen >= printed + keys.len() / 10) {
            eprintln!(
                "  {:>5.1}s: {seen} of {} {what}",
                started.elapsed().as_secs_f64(),
                keys.len()
            );
            printed = seen;
        }
        let capped = started.elapsed() > CONVERGE_CAP;
        if seen >= keys.len() || capped || last_confirm.elapsed() > Duration::from_secs(60) {
            let confirmed = confirm().await;
            last_confirm = Instant::now();
            if confirmed >= keys.len() {
                return (Some(started.elapsed().as_secs_f64()), confirmed);
            }
            if capped {
                return (None, confirmed);
            }
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Apps of `project_ids` whose revision is reported Running.
async fn running(admin: &mut Client, project_ids: &[String]) -> usize {
    let mut count = 0;
    for project in project_ids {
        let mut next: Option<String> = None;
        loop {
            let mut path = format!("/api/v1/apps?project_id={project}&limit=500");
            if let Some(token) = &next {
                path.push_str(&format!("&continue={}", query_value(token)));
            }
            let Ok(page) = admin.get(&path).await else {
                break;
            };
            count += page["items"]
                .as_array()
                .unwrap()
                .iter()
                .filter(|a| a["phase"] == "Running" && a["observed_revision"] == a["revision"])
                .count();
            match page["continue"].as_str() {
                Some(token) if !token.is_empty() => next = Some(token.to_owned()),
                _ => break,
            }
        }
    }
    count
}

async fn bench() {
    // Room for 500 pods on each cluster's three fake nodes.
    let pool = NodePool {
        count: 3,
        cpu: "64".into(),
        memory: "256Gi".into(),
        max_pods: 400,
    };
    let env = Environment::builder()
        .management("mgmt")
        .workload("east", pool.clone())
        .workload("west", pool)
        .postgres()
        .start()
        .await
        .unwrap();
    let database = env.postgres().unwrap().fresh_database("e2e").await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let options = Options {
        heartbeat_seconds: 5,
        api_reads_per_second: 10_000,
        api_writes_per_second: 10_000,
        ..Options::default()
    };
    let progress = |line: &str| eprintln!("  {line}");
    let mut system = System::start(&env, &database.url, dir.path(), options, &progress)
        .await
        .unwrap();
    system.ensure_org().await.unwrap();
    let bins = Binaries::locate().unwrap();
    let mut cluster_ids = Vec::new();
    for cluster in env.workloads() {
        cluster_ids.push(system.register(cluster, &bins).await.unwrap());
    }
    system
        .wait_connected(Duration::from_secs(120))
        .await
        .unwrap();
    let org = system.options().org.clone();
    let mut admin = system.admin().await.unwrap();
    let east_project = project(&mut admin, &org, &cluster_ids[0], "bench-east").await;
    let west_project = project(&mut admin, &org, &cluster_ids[1], "bench-west").await;

    // Latency, alternating the two sides on the same cluster.
    let east = env.cluster("east").unwrap().client().await.unwrap();
    direct_namespace(&east).await;
    let management = env.management().unwrap().client().await.unwrap();
    let stages = track(management.clone(), east.clone());
    stages.stream(&admin, &east_project).await;
    let (mut kubenest, mut kubectl) = (Vec::new(), Vec::new());
    let mut shares: Vec<Vec<f64>> = vec![Vec::new(); STAGES];
    let (mut cpu_ours, mut cpu_theirs) = (HashMap::new(), HashMap::new());
    // The management cluster's requests over each side's rounds: what an App costs it, and
    // what it serves anyway (leases, heartbeats) while the direct side runs.
    let (mut requests_ours, mut requests_idle) = (HashMap::new(), HashMap::new());
    // The same on the workload cluster, where both sides apply.
    let (mut workload_ours, mut workload_theirs) = (HashMap::new(), HashMap::new());
    // Request counts are read between the sides, outside both CPU windows, and are followed
    // by a pause: a scrape of `/metrics` is megabytes the API servers make and this bench
    // parses, and it must not weigh on the round that follows.
    let mut served = counts(&management, &east).await;
    for round in 0..*WARMUP + *ROUNDS {
        let before = cpu_by_program();
        let (ours, parts) =
            through_kubenest(&mut admin, &stages, &east_project, &format!("lat-{round}")).await;
        // What the round set going settles before the other side is measured.
        tokio::time::sleep(Duration::from_millis(300)).await;
        let after_ours = cpu_by_program();
        let served_middle = counts(&management, &east).await;
        let middle = cpu_by_program();
        let theirs = direct(&east, &stages, DIRECT_NS, &format!("direct-{round}")).await;
        tokio::time::sleep(Duration::from_millis(300)).await;
        let after_theirs = cpu_by_program();
        let served_after = counts(&management, &east).await;
        if round >= *WARMUP {
            add_growth(&mut cpu_ours, &before, &after_ours);
            add_growth(&mut cpu_theirs, &middle, &after_theirs);
            add_growth(&mut requests_ours, &served.0, &served_middle.0);
            add_growth(&mut requests_idle, &served_middle.0, &served_after.0);
            add_growth(&mut workload_ours, &served.1, &served_middle.1);
            add_growth(&mut workload_theirs, &served_middle.1, &served_after.1);
            kubenest.push(ours);
            kubectl.push(theirs);
            for (all, part) in shares.iter_mut().zip(parts) {
                all.push(part);
            }
        }
        served = served_after;
    }
    let stage_p50 = stage_percentile(&shares, 50.0);
    let stage_p99 = stage_percentile(&shares, 99.0);
    eprintln!("median ms per stage (each since the one before): {stage_p50:?}");
    let (cpu_ours, cpu_theirs) = (
        per_sample(&cpu_ours, *ROUNDS),
        per_sample(&cpu_theirs, *ROUNDS),
    );
    eprintln!("CPU ms per App through kubenest: {cpu_ours:?}");
    eprintln!("CPU ms per direct apply: {cpu_theirs:?}");
    let (requests_ours, requests_idle) = (
        largest_per_sample(&requests_ours, *ROUNDS, 1.0, 0.1),
        largest_per_sample(&requests_idle, *ROUNDS, 1.0, 0.1),
    );
    eprintln!("management API requests per App: {requests_ours:?}");
    eprintln!("management API requests meanwhile per direct apply: {requests_idle:?}");
    let (workload_ours, workload_theirs) = (
        largest_per_sample(&workload_ours, *ROUNDS, 1.0, 0.1),
        largest_per_sample(&workload_theirs, *ROUNDS, 1.0, 0.1),
    );
    eprintln!("workload API requests per App: {workload_ours:?}");
    eprintln!("workload API requests per direct apply: {workload_theirs:?}");
    kubenest.sort_by(f64::total_cmp);
    kubectl.sort_by(f64::total_cmp);
    let (k50, k99) = (percentile(&kubenest, 50.0), percentile(&kubenest, 99.0));
    let (d50, d99) = (percentile(&kubectl, 50.0), percentile(&kubectl, 99.0));
    eprintln!(
        "create → Running over {} rounds: kubenest p50 {k50:.0} ms p99 {k99:.0} ms; \
         direct apply p50 {d50:.0} ms p99 {d99:.0} ms",
        *ROUNDS
    );

    let fleet = std::env::var(CONVERGE_APPS_ENV)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(*CONVERGE_APPS);
    // The peer first: the same objects applied directly, half on each cluster.
    let west = env.cluster("west").unwrap().client().await.unwrap();
    direct_namespace(&west).await;
    // What each fleet cost in CPU, by program: on two cores, the floor of its converge time
    // is the total over two.
    let before_direct = cpu_by_program();
    let (direct_converge, direct_ready_at_cap) =
        direct_fleet(&[east.clone(), west.clone()], fleet).await;
    let mut fleet_cpu_direct = HashMap::new();
    add_growth(&mut fleet_cpu_direct, &before_direct, &cpu_by_program());

    // 1,000 Apps across both clusters: created 16 at a time, then until all run. The
    // latency rounds' watches stop first (the peer's watch would only load the fleet); the
    // fleet's own stages are watched on both clusters.
    stages.stop();
    let projects = [east_project.clone(), west_project.clone()];
    let streams = track_apps(management.clone(), &[east.clone(), west]);
    for project in &projects {
        streams.stream(&admin, project).await;
    }
    let changes = StatusChanges::watch(management.clone());
    let served_before_fleet = counts(&management, &east).await;
    let before_fleet = cpu_by_program();
    let started = Instant::now();
    let poster = admin.clone();
    let mut posts = futures::stream::iter((0..fleet).map(|i| {
        let (mut client, project) = (poster.clone(), projects[i % 2].clone());
        async move {
            let posted = Instant::now();
            let app = client
                .post("/api/v1/apps", &app_body(&project, &format!("fleet-{i}")))
                .await
                .unwrap();
            (app["id"].as_str().unwrap().to_owned(), posted)
        }
    }))
    .buffer_unordered(16);
    let mut ids = Vec::with_capacity(fleet);
    let mut posted_at = HashMap::with_capacity(fleet);
    let mut post_ms = Vec::with_capacity(fleet);
    while let Some((id, posted)) = posts.next().await {
        post_ms.push(posted.elapsed().as_secs_f64() * 1000.0);
        posted_at.insert(id.clone(), posted);
        ids.push(id);
    }
    post_ms.sort_by(f64::total_cmp);
    drop(posts);
    let created = started.elapsed().as_secs_f64();
    let lister = admin.clone();
    let (converge, fleet_running) =
        converged(&streams, &ids, Stage::Streamed, started, "Running", || {
            let (mut lister, projects) = (lister.clone(), projects.clone());
            async move {
                running(&mut lister, &projects)
                    .await
                    .saturating_sub(*WARMUP + *ROUNDS)
            }
        })
        .await;
    streams.stop();
    let mut fleet_cpu = HashMap::new();
    add_growth(&mut fleet_cpu, &before_fleet, &cpu_by_program());
    let mut fleet_requests = HashMap::new();
    add_growth(
        &mut fleet_requests,
        &served_before_fleet.0,
        &counts(&management, &east).await.0,
    );
    let fleet_requests = largest_per_sample(&fleet_requests, fleet, 1.0, 0.1);
    // The latency rounds' Apps are in the count too (their versions while the fleet ran).
    let status_changes = changes.stop(fleet);
    eprintln!("fleet: App status versions and changes of each field per App {status_changes:?}");
    eprintln!("fleet: management API requests and watch events per App {fleet_requests:?}");
    let (fleet_cpu, fleet_cpu_direct) = (
        per_sample(&fleet_cpu, fleet),
        per_sample(&fleet_cpu_direct, fleet),
    );
    eprintln!("fleet: CPU ms per App by program {fleet_cpu:?}");
    eprintln!("fleet: CPU ms per direct apply by program {fleet_cpu_direct:?}");
    // Where each App's time went, from its POST, and when the last App seen Running got there
    // (past the cap too: how far the fleet got, and how fast).
    let mut fleet_shares: Vec<Vec<f64>> = vec![Vec::new(); STAGES];
    let mut last_running: Option<f64> = None;
    for id in &ids {
        let seen = streams.get(id);
        for (all, part) in fleet_shares
            .iter_mut()
            .zip(stage_shares(posted_at[id], seen))
        {
            all.push(part);
        }
        if let Some(at) = seen[Stage::Streamed as usize] {
            let s = at.saturating_duration_since(started).as_secs_f64();
            last_running = Some(last_running.map_or(s, |l: f64| l.max(s)));
        }
    }
    let fleet_p50 = stage_percentile(&fleet_shares, 50.0);
    let fleet_p99 = stage_percentile(&fleet_shares, 99.0);
    eprintln!("fleet: ms per stage p50 {fleet_p50:?}");
    eprintln!("fleet: ms per stage p99 {fleet_p99:?}");
    match converge {
        Some(s) => eprintln!("{fleet} Apps: created in {created:.1}s, all Running after {s:.1}s"),
        None => eprintln!(
            "{fleet} Apps: created in {created:.1}s, only {fleet_running} Running after {}s",
            CONVERGE_CAP.as_secs()
        ),
    }

    let round = |v: f64| (v * 10.0).round() / 10.0;
    println!(
        "{}",
        json!({
            "bench": "e2e",
            "rounds": *ROUNDS,
            "kubenest_p50_ms": round(k50),
            "kubenest_p99_ms": round(k99),
            "kubectl_p50_ms": round(d50),
            "kubectl_p99_ms": round(d99),
            "overhead_p50_ms": round(k50 - d50),
            "overhead_p99_ms": round(k99 - d99),
            "ratio_p50": (d50 / k50 * 100.0).round() / 100.0,
            "converge_1000_apps_s": converge.map(round),
            "direct_converge_1000_s": direct_converge.map(round),
            "direct_ready_at_cap": direct_ready_at_cap,
            "converge_ratio": converge.zip(direct_converge).map(|(ours, theirs)| (theirs / ours * 100.0).round() / 100.0),
            "stage_p50_ms": stage_p50,
            "stage_p99_ms": stage_p99,
            "fleet_stage_p50_ms": fleet_p50,
            "fleet_stage_p99_ms": fleet_p99,
            "fleet_last_running_s": last_running.map(round),
            "fleet_post_p50_ms": round(percentile(&post_ms, 50.0)),
            "fleet_post_p99_ms": round(percentile(&post_ms, 99.0)),
            "fleet_mgmt_requests_per_app": fleet_requests,
            "fleet_app_status_changes_per_app": status_changes,
            "fleet_cpu_ms_per_app": fleet_cpu,
            "fleet_cpu_ms_per_app_total": round(total(&fleet_cpu)),
            "fleet_cpu_ms_per_direct": fleet_cpu_direct,
            "fleet_cpu_ms_per_direct_total": round(total(&fleet_cpu_direct)),
            "cpu_ms_per_app": cpu_ours,
            "cpu_ms_per_direct": cpu_theirs,
            "mgmt_requests_per_app": requests_ours,
            "mgmt_requests_per_direct": requests_idle,
            "workload_requests_per_app": workload_ours,
            "workload_requests_per_direct": workload_theirs,
            "fleet_apps": fleet,
            "running_at_cap": fleet_running,
            "create_1000_apps_s": round(created),
            "mgmt_requests_per_app_total": round(total(&requests_ours)),
            "mgmt_requests_per_direct_total": round(total(&requests_idle)),
            "workload_requests_per_app_total": round(total(&workload_ours)),
            "workload_requests_per_direct_total": round(total(&workload_theirs)),
            "targets": {"overhead_p50_ms": 50, "overhead_p99_ms": 100, "converge_ratio": 0.67,
                "mgmt_requests_per_app_total": 6},
        })
    );
    system.stop();
    drop(database);
}
