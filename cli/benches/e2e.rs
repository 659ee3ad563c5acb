//! `make bench BENCH=e2e`: App create → Running through the whole path (REST → controllers →
//! hub → agent → Deployment Ready on the cluster → status back to the API), against applying the
//! same Deployment and Service directly to the same cluster and waiting for it to be Ready, in
//! the same run, alternating; then the time for 1,000 Apps across two clusters to converge.
//!
//! The system is the release programs started as `make dev` starts them (two hubs, two
//! controllers replicas, the API server, an agent per cluster registered through the API). Both
//! sides poll every 10 ms: the API's `GET /apps/{id}` for kubenest, the Deployment's status for
//! the direct apply (server-side apply through the same client library kubectl's apply uses on
//! the server, without kubectl's process start, so the peer is the stricter baseline).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::time::{Duration, Instant};

use futures::StreamExt as _;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{Namespace, Service};
use kube::api::{Api, Patch, PatchParams};
use kubenest_cli::api::Client;
use kubenest_cli::system::{Options, System};
use kubenest_testkit::{Binaries, Environment, NodePool};
use serde_json::{Value, json};

const ROUNDS: usize = 40;
const WARMUP: usize = 3;
const CONVERGE_APPS: usize = 1000;
const POLL: Duration = Duration::from_millis(10);
/// How long the 1,000 Apps get before the figure is reported as not reached.
const CONVERGE_CAP: Duration = Duration::from_secs(300);

fn main() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(bench());
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

/// One App through kubenest: POST, then poll until its revision is reported Running.
async fn through_kubenest(admin: &mut Client, project_id: &str, name: &str) -> f64 {
    let started = Instant::now();
    let app = admin
        .post("/api/v1/apps", &app_body(project_id, name))
        .await
        .unwrap();
    let path = format!("/api/v1/apps/{}", app["id"].as_str().unwrap());
    loop {
        let app = admin.get(&path).await.unwrap();
        if app["phase"] == "Running" && app["observed_revision"] == app["revision"] {
            return started.elapsed().as_secs_f64() * 1000.0;
        }
        tokio::time::sleep(POLL).await;
    }
}

/// The same workload applied directly: a Deployment and a Service, then poll until Ready.
async fn direct(client: &kube::Client, namespace: &str, name: &str) -> f64 {
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), namespace);
    let services: Api<Service> = Api::namespaced(client.clone(), namespace);
    let labels = json!({"app.kubernetes.io/name": name});
    let params = PatchParams::apply("bench-direct").force();
    let started = Instant::now();
    deployments
        .patch(
            name,
            &params,
            &Patch::Apply(json!({
                "apiVersion": "apps/v1", "kind": "Deployment",
                "metadata": {"name": name, "labels": labels},
                "spec": {"replicas": 1, "selector": {"matchLabels": labels},
                    "template": {"metadata": {"labels": labels}, "spec": {"containers": [
                        {"name": "web", "image": "nginx:1.27",
                         "ports": [{"containerPort": 8080}]}]}}}
            })),
        )
        .await
        .unwrap();
    services
        .patch(
            name,
            &params,
            &Patch::Apply(json!({
                "apiVersion": "v1", "kind": "Service",
                "metadata": {"name": name, "labels": labels},
                "spec": {"selector": labels, "ports": [{"port": 8080}]}
            })),
        )
        .await
        .unwrap();
    loop {
        let deployment = deployments.get(name).await.unwrap();
        let generation = deployment.metadata.generation;
        let status = deployment.status.unwrap_or_default();
        if status.observed_generation == generation
            && status.ready_replicas == Some(1)
            && status.updated_replicas == Some(1)
        {
            return started.elapsed().as_secs_f64() * 1000.0;
        }
        tokio::time::sleep(POLL).await;
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
                path.push_str(&format!("&continue={token}"));
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
    let direct_ns = "bench-direct";
    Api::<Namespace>::all(east.clone())
        .patch(
            direct_ns,
            &PatchParams::apply("bench-direct"),
            &Patch::Apply(json!({"apiVersion": "v1", "kind": "Namespace",
                "metadata": {"name": direct_ns}})),
        )
        .await
        .unwrap();
    let (mut kubenest, mut kubectl) = (Vec::new(), Vec::new());
    for round in 0..WARMUP + ROUNDS {
        let ours = through_kubenest(&mut admin, &east_project, &format!("lat-{round}")).await;
        let theirs = direct(&east, direct_ns, &format!("direct-{round}")).await;
        if round >= WARMUP {
            kubenest.push(ours);
            kubectl.push(theirs);
        }
    }
    kubenest.sort_by(f64::total_cmp);
    kubectl.sort_by(f64::total_cmp);
    let (k50, k99) = (percentile(&kubenest, 50.0), percentile(&kubenest, 99.0));
    let (d50, d99) = (percentile(&kubectl, 50.0), percentile(&kubectl, 99.0));
    eprintln!(
        "create → Running over {ROUNDS} rounds: kubenest p50 {k50:.0} ms p99 {k99:.0} ms; \
         direct apply p50 {d50:.0} ms p99 {d99:.0} ms"
    );

    // 1,000 Apps across both clusters: created 16 at a time, then until all run.
    let projects = [east_project.clone(), west_project.clone()];
    let started = Instant::now();
    let poster = admin.clone();
    let mut posts = futures::stream::iter((0..CONVERGE_APPS).map(|i| {
        let (mut client, project) = (poster.clone(), projects[i % 2].clone());
        async move {
            client
                .post("/api/v1/apps", &app_body(&project, &format!("fleet-{i}")))
                .await
                .unwrap();
        }
    }))
    .buffer_unordered(16);
    while posts.next().await.is_some() {}
    drop(posts);
    let created = started.elapsed().as_secs_f64();
    let mut last = 0;
    loop {
        let count = running(&mut admin, &projects).await;
        if count != last {
            eprintln!(
                "  {:>5.1}s: {} of {} Running",
                started.elapsed().as_secs_f64(),
                count.saturating_sub(WARMUP + ROUNDS),
                CONVERGE_APPS
            );
            last = count;
        }
        if count >= CONVERGE_APPS + WARMUP + ROUNDS || started.elapsed() > CONVERGE_CAP {
            break;
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    let fleet_running = last.saturating_sub(WARMUP + ROUNDS);
    let converge = (fleet_running >= CONVERGE_APPS).then(|| started.elapsed().as_secs_f64());
    match converge {
        Some(s) => eprintln!("1,000 Apps: created in {created:.1}s, all Running after {s:.1}s"),
        None => eprintln!(
            "1,000 Apps: created in {created:.1}s, only {fleet_running} Running after {}s",
            CONVERGE_CAP.as_secs()
        ),
    }

    let round = |v: f64| (v * 10.0).round() / 10.0;
    println!(
        "{}",
        json!({
            "bench": "e2e",
            "rounds": ROUNDS,
            "kubenest_p50_ms": round(k50),
            "kubenest_p99_ms": round(k99),
            "kubectl_p50_ms": round(d50),
            "kubectl_p99_ms": round(d99),
            "overhead_p50_ms": round(k50 - d50),
            "overhead_p99_ms": round(k99 - d99),
            "ratio_p50": (d50 / k50 * 100.0).round() / 100.0,
            "converge_1000_apps_s": converge.map(round),
            "running_at_cap": fleet_running,
            "create_1000_apps_s": round(created),
            "targets": {"overhead_p50_ms": 150, "overhead_p99_ms": 1000, "converge_1000_apps_s": 60},
        })
    );
    system.stop();
    drop(database);
}
