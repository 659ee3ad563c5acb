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

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::StreamExt as _;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{Namespace, Service};
use kube::api::{Api, ApiResource, DynamicObject, Patch, PatchParams};
use kube::runtime::{WatchStreamExt as _, watcher};
use kubenest_cli::api::{Client, query_value};
use kubenest_devenv::system::{Options, System};
use kubenest_devenv::tour::EventStream;
use kubenest_testkit::{Binaries, Environment, NodePool};
use serde_json::{Value, json};

const ROUNDS: usize = 40;
const WARMUP: usize = 3;
const CONVERGE_APPS: usize = 1000;
/// Overrides [`CONVERGE_APPS`] (0 measures the latency alone), for looking into one part.
const CONVERGE_APPS_ENV: &str = "E2E_CONVERGE_APPS";
/// How long the 1,000 Apps get before the figure is reported as not reached.
const CONVERGE_CAP: Duration = Duration::from_secs(300);

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

/// Where an App's time goes, as watches of the management and the workload cluster see it.
#[derive(Debug, Clone, Copy)]
enum Stage {
    /// The App object exists on the management cluster.
    Stored,
    /// The agent stored its StackDeploy on the workload cluster.
    Accepted,
    /// The agent created the Deployment.
    Applied,
    /// The Deployment is Ready (scheduled, kwok's pod Ready, the ReplicaSet and Deployment
    /// controllers caught up).
    Ready,
    /// The App's status says Running on the management cluster.
    Reported,
    /// The API's event stream said so.
    Streamed,
}

/// When each App reached each stage, by App id.
#[derive(Debug, Clone, Default)]
struct Stages {
    seen: Arc<Mutex<HashMap<String, [Option<Instant>; 6]>>>,
    changed: Arc<tokio::sync::Notify>,
    /// The watches and streams marking stages.
    tasks: Arc<Mutex<Vec<tokio::task::JoinHandle<()>>>>,
}

impl Stages {
    fn mark(&self, app_id: &str, stage: Stage) {
        let mut seen = self.seen.lock().unwrap();
        seen.entry(app_id.to_owned()).or_default()[stage as usize].get_or_insert_with(Instant::now);
        self.changed.notify_waiters();
    }

    fn get(&self, app_id: &str) -> [Option<Instant>; 6] {
        self.seen
            .lock()
            .unwrap()
            .get(app_id)
            .copied()
            .unwrap_or_default()
    }

    /// How many of `keys` reached `stage`.
    fn count(&self, keys: &[String], stage: Stage) -> usize {
        let seen = self.seen.lock().unwrap();
        keys.iter()
            .filter(|k| seen.get(*k).is_some_and(|s| s[stage as usize].is_some()))
            .count()
    }

    fn keep(&self, task: tokio::task::JoinHandle<()>) {
        self.tasks.lock().unwrap().push(task);
    }

    /// Stops every watch and stream marking stages.
    fn stop(&self) {
        for task in self.tasks.lock().unwrap().drain(..) {
            task.abort();
        }
    }

    /// Waits until `app_id` reaches `stage`.
    async fn reached(&self, app_id: &str, stage: Stage) {
        loop {
            let changed = self.changed.notified();
            if self.get(app_id)[stage as usize].is_some() {
                return;
            }
            let _ = tokio::time::timeout(Duration::from_secs(1), changed).await;
        }
    }

    /// Marks [`Stage::Streamed`] from the API's event stream of a project, resuming after the
    /// last event it saw if the stream ends, as a console's `EventSource` does.
    async fn stream(&self, admin: &Client, project_id: &str) {
        let mut events = EventStream::open_filtered(admin.base(), admin, "project_id", project_id)
            .await
            .unwrap();
        let (this, admin, project_id) = (self.clone(), admin.clone(), project_id.to_owned());
        self.keep(tokio::spawn(async move {
            let mut last: Option<String> = None;
            loop {
                while let Ok(event) = events.next().await {
                    if event.id.is_some() {
                        last.clone_from(&event.id);
                    }
                    if event.kind == "app.phase"
                        && event.data["phase"] == "Running"
                        && let Some(app_id) = event.data["app_id"].as_str()
                    {
                        this.mark(app_id, Stage::Streamed);
                    }
                }
                eprintln!("  the event stream of {project_id} ended; resuming after {last:?}");
                loop {
                    tokio::time::sleep(Duration::from_millis(500)).await;
                    let resumed = EventStream::resume_filtered(
                        admin.base(),
                        &admin,
                        "project_id",
                        &project_id,
                        last.as_deref(),
                    );
                    if let Ok(resumed) = resumed.await {
                        events = resumed;
                        break;
                    }
                }
            }
        }));
    }

    /// Watches `resource` on `client`, marking what `stages` says of each object.
    fn watch(
        &self,
        client: kube::Client,
        resource: ApiResource,
        config: watcher::Config,
        stages: fn(&DynamicObject) -> Vec<(String, Stage)>,
    ) {
        let this = self.clone();
        self.keep(tokio::spawn(async move {
            let api: Api<DynamicObject> = Api::all_with(client, &resource);
            // With a backoff: once the clusters stop, errors must not spin.
            let mut events = watcher(api, config).default_backoff().boxed();
            while let Some(event) = events.next().await {
                if let Ok(watcher::Event::Apply(object) | watcher::Event::InitApply(object)) = event
                {
                    for (app_id, stage) in stages(&object) {
                        this.mark(&app_id, stage);
                    }
                }
            }
        }));
    }

    /// Marks [`Stage::Ready`] for the peer's Deployments on `client`.
    fn watch_direct(&self, client: kube::Client) {
        self.watch(
            client,
            ApiResource::erase::<Deployment>(&()),
            watcher::Config::default().fields(&format!("metadata.namespace={DIRECT_NS}")),
            direct_stages,
        );
    }
}

fn app_stages(app: &DynamicObject) -> Vec<(String, Stage)> {
    let Some(uid) = app.metadata.uid.clone() else {
        return Vec::new();
    };
    let mut stages = vec![(uid.clone(), Stage::Stored)];
    if app.data["status"]["phase"] == "Running" {
        stages.push((uid, Stage::Reported));
    }
    stages
}

fn stack_deploy_stages(object: &DynamicObject) -> Vec<(String, Stage)> {
    object
        .metadata
        .labels
        .as_ref()
        .and_then(|l| l.get(kubenest_crds::names::labels::APP_ID))
        .map(|id| vec![(id.clone(), Stage::Accepted)])
        .unwrap_or_default()
}

fn deployment_stages(object: &DynamicObject) -> Vec<(String, Stage)> {
    let Some(id) = object
        .metadata
        .labels
        .as_ref()
        .and_then(|l| l.get(kubenest_crds::names::labels::APP_ID))
    else {
        return Vec::new();
    };
    let mut stages = vec![(id.clone(), Stage::Applied)];
    let status = &object.data["status"];
    if status["readyReplicas"] == 1
        && status["updatedReplicas"] == 1
        && status["observedGeneration"].as_i64() == object.metadata.generation
    {
        stages.push((id.clone(), Stage::Ready));
    }
    stages
}

/// CPU seconds every process on the machine has used so far, by program name (this benchmark
/// is the machine's only load, so the difference over a round is what the round cost).
fn cpu_by_program() -> HashMap<String, f64> {
    let mut used = HashMap::new();
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return used;
    };
    for entry in entries.flatten() {
        let Ok(stat) = std::fs::read_to_string(entry.path().join("stat")) else {
            continue;
        };
        // `pid (comm) state ppid ...`: the name may hold spaces, the fields after it do not.
        let (Some(open), Some(close)) = (stat.find('('), stat.rfind(')')) else {
            continue;
        };
        let mut name = stat[open + 1..close].to_owned();
        let fields: Vec<&str> = stat[close + 1..].split_whitespace().collect();
        // Kernel threads (children of kthreadd) rename themselves as they work: not ours.
        if fields.get(1) == Some(&"2") || name == "kthreadd" {
            continue;
        }
        // One API server per cluster: named by the cluster its etcd prefix holds.
        if name == "kube-apiserver"
            && let Ok(cmdline) = std::fs::read(entry.path().join("cmdline"))
            && let Some(cluster) = String::from_utf8_lossy(&cmdline)
                .split('\0')
                .find_map(|a| a.strip_prefix("--etcd-prefix=/clusters/"))
        {
            name = format!("kube-apiserver {cluster}");
        }
        // utime and stime are the 14th and 15th fields, the 12th and 13th after the name.
        let ticks: f64 = fields
            .get(11..13)
            .map(|t| t.iter().filter_map(|v| v.parse::<f64>().ok()).sum())
            .unwrap_or(0.0);
        *used.entry(name).or_default() += ticks / 100.0;
    }
    used
}

/// Adds how much each counter grew between two readings to `total` (CPU seconds by program,
/// requests by kind).
fn add_growth(
    total: &mut HashMap<String, f64>,
    before: &HashMap<String, f64>,
    after: &HashMap<String, f64>,
) {
    for (name, now) in after {
        let spent = now - before.get(name).copied().unwrap_or(0.0);
        if spent > 0.0 {
            *total.entry(name.clone()).or_default() += spent;
        }
    }
}

/// CPU milliseconds per sample by program, the busiest first, leaving out the idle ones.
fn per_sample(total: &HashMap<String, f64>, samples: usize) -> serde_json::Map<String, Value> {
    largest_per_sample(total, samples, 1000.0, 0.5)
}

/// Each counter's growth × `scale` per sample, the largest first, leaving out those under
/// `floor` (rounded to a tenth).
fn largest_per_sample(
    total: &HashMap<String, f64>,
    samples: usize,
    scale: f64,
    floor: f64,
) -> serde_json::Map<String, Value> {
    let mut all: Vec<(&String, f64)> = total
        .iter()
        .map(|(name, v)| (name, v * scale / samples as f64))
        .filter(|(_, v)| *v >= floor)
        .collect();
    all.sort_by(|a, b| b.1.total_cmp(&a.1));
    all.into_iter()
        .map(|(name, v)| (name.clone(), json!((v * 10.0).round() / 10.0)))
        .collect()
}

/// Requests a kube-apiserver has served so far, by verb and resource (`PATCH apps/status`),
/// from its `apiserver_request_total` metric.
async fn requests_served(client: &kube::Client) -> HashMap<String, f64> {
    let mut served = HashMap::new();
    let request = http::Request::get("/metrics").body(Vec::new()).unwrap();
    let Ok(text) = client.request_text(request).await else {
        return served;
    };
    for line in text.lines() {
        let Some(rest) = line.strip_prefix("apiserver_request_total{") else {
            continue;
        };
        let Some((labels, value)) = rest.rsplit_once("} ") else {
            continue;
        };
        let label = |name: &str| {
            labels
                .split("\",")
                .find_map(|pair| pair.strip_prefix(name)?.strip_prefix("=\""))
                .map(|v| v.trim_end_matches('"').to_owned())
                .unwrap_or_default()
        };
        let (resource, subresource) = (label("resource"), label("subresource"));
        let what = if subresource.is_empty() {
            resource
        } else {
            format!("{resource}/{subresource}")
        };
        let count: f64 = value.trim().parse().unwrap_or(0.0);
        *served
            .entry(format!("{} {what}", label("verb")))
            .or_default() += count;
    }
    served
}

/// [`requests_served`] by the management and the workload API server, then a pause of 100 ms.
async fn counts(
    management: &kube::Client,
    workload: &kube::Client,
) -> (HashMap<String, f64>, HashMap<String, f64>) {
    let served = (
        requests_served(management).await,
        requests_served(workload).await,
    );
    tokio::time::sleep(Duration::from_millis(100)).await;
    served
}

/// Creates [`DIRECT_NS`] on a workload cluster.
async fn direct_namespace(client: &kube::Client) {
    Api::<Namespace>::all(client.clone())
        .patch(
            DIRECT_NS,
            &PatchParams::apply("bench-direct"),
            &Patch::Apply(json!({"apiVersion": "v1", "kind": "Namespace",
                "metadata": {"name": DIRECT_NS}})),
        )
        .await
        .unwrap();
}

/// Where the peer applies its Deployments.
const DIRECT_NS: &str = "bench-direct";

/// The peer's Deployments, by name, once Ready.
fn direct_stages(object: &DynamicObject) -> Vec<(String, Stage)> {
    let ready = object.data["status"]["readyReplicas"] == 1
        && object.data["status"]["updatedReplicas"] == 1
        && object.data["status"]["observedGeneration"].as_i64() == object.metadata.generation;
    match &object.metadata.name {
        Some(name) if ready && object.metadata.namespace.as_deref() == Some(DIRECT_NS) => {
            vec![(name.clone(), Stage::Ready)]
        }
        _ => Vec::new(),
    }
}

/// Starts the watches behind [`Stages`].
fn track(management: kube::Client, workload: kube::Client) -> Stages {
    let stages = Stages::default();
    let kubenest = |kind: &str, plural: &str| ApiResource {
        group: "kubenest.io".into(),
        version: "v1alpha1".into(),
        api_version: "kubenest.io/v1alpha1".into(),
        kind: kind.into(),
        plural: plural.into(),
    };
    stages.watch(
        management,
        kubenest("App", "apps"),
        watcher::Config::default(),
        app_stages,
    );
    let labelled = watcher::Config::default().labels(kubenest_crds::names::labels::APP_ID);
    stages.watch(
        workload.clone(),
        kubenest("StackDeploy", "stackdeploys"),
        labelled.clone(),
        stack_deploy_stages,
    );
    stages.watch(
        workload.clone(),
        ApiResource::erase::<Deployment>(&()),
        labelled,
        deployment_stages,
    );
    stages.watch_direct(workload);
    stages
}

/// One App through kubenest: POST, then wait for the API's event stream to say it runs. Returns
/// the total and each stage's share (ms since the stage before).
async fn through_kubenest(
    admin: &mut Client,
    stages: &Stages,
    project_id: &str,
    name: &str,
) -> (f64, [f64; 6]) {
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
    let mut shares = [f64::NAN; 6];
    let mut before = started;
    for (share, at) in shares.iter_mut().zip(stages.get(&id)) {
        if let Some(at) = at {
            *share = at.saturating_duration_since(before).as_secs_f64() * 1000.0;
            before = before.max(at);
        }
    }
    ((done - started).as_secs_f64() * 1000.0, shares)
}

/// The same workload applied directly: a Deployment and a Service, then wait on the watch of
/// [`direct_stages`] (open before the apply, as the API's event stream is) until it is Ready.
async fn direct(client: &kube::Client, stages: &Stages, namespace: &str, name: &str) -> f64 {
    let started = Instant::now();
    apply_direct(client, namespace, name).await;
    stages.reached(name, Stage::Ready).await;
    started.elapsed().as_secs_f64() * 1000.0
}

/// Server-side applies the Deployment and Service kubenest renders for the benchmark's App.
async fn apply_direct(client: &kube::Client, namespace: &str, name: &str) {
    let labels = json!({"app.kubernetes.io/name": name});
    let deployment = json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": name, "labels": labels},
        "spec": {"replicas": 1, "selector": {"matchLabels": labels},
            "template": {"metadata": {"labels": labels}, "spec": {"containers": [
                {"name": "web", "image": "nginx:1.27", "ports": [{"containerPort": 8080}]}]}}}
    });
    let service = json!({
        "apiVersion": "v1", "kind": "Service",
        "metadata": {"name": name, "labels": labels},
        "spec": {"selector": labels, "ports": [{"port": 8080}]}
    });
    let params = PatchParams::apply("bench-direct").force();
    for (resource, object) in [
        (ApiResource::erase::<Deployment>(&()), deployment),
        (ApiResource::erase::<Service>(&()), service),
    ] {
        Api::<DynamicObject>::namespaced_with(client.clone(), namespace, &resource)
            .patch(name, &params, &Patch::Apply(object))
            .await
            .unwrap();
    }
}

/// Deployments in [`DIRECT_NS`] named `fleet-…` that are Ready, on `clients`.
async fn direct_ready(clients: &[kube::Client]) -> usize {
    let mut count = 0;
    for client in clients {
        let Ok(list) = Api::<Deployment>::namespaced(client.clone(), DIRECT_NS)
            .list(&Default::default())
            .await
        else {
            continue;
        };
        count += list
            .items
            .iter()
            .filter(|d| {
                d.metadata
                    .name
                    .as_deref()
                    .is_some_and(|n| n.starts_with("fleet-"))
            })
            .filter(|d| {
                let status = d.status.clone().unwrap_or_default();
                status.observed_generation == d.metadata.generation
                    && status.ready_replicas == Some(1)
                    && status.updated_replicas == Some(1)
            })
            .count();
    }
    count
}

/// `fleet` Deployments and Services applied directly, half on each of `clients`, 16 at a time;
/// then until all are Ready. Returns the seconds (none if not within [`CONVERGE_CAP`]) and how
/// many were Ready at the end.
async fn direct_fleet(clients: &[kube::Client; 2], fleet: usize) -> (Option<f64>, usize) {
    let stages = Stages::default();
    for client in clients {
        stages.watch_direct(client.clone());
    }
    let names: Vec<String> = (0..fleet).map(|i| format!("fleet-{i}")).collect();
    let started = Instant::now();
    let mut applies = futures::stream::iter(names.iter().enumerate().map(|(i, name)| {
        let client = clients[i % 2].clone();
        async move { apply_direct(&client, DIRECT_NS, name).await }
    }))
    .buffer_unordered(16);
    while applies.next().await.is_some() {}
    drop(applies);
    let applied = started.elapsed().as_secs_f64();
    let (done, ready) = converged(&stages, &names, Stage::Ready, started, "Ready", || {
        direct_ready(clients)
    })
    .await;
    stages.stop();
    eprintln!(
        "direct: {fleet} applied in {applied:.1}s, {ready} Ready after {:.1}s",
        started.elapsed().as_secs_f64()
    );
    (done, ready)
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
    let mut shares: Vec<Vec<f64>> = vec![Vec::new(); 6];
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
    for round in 0..WARMUP + ROUNDS {
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
        if round >= WARMUP {
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
    let stage_names = [
        "stored", "accepted", "applied", "ready", "reported", "streamed",
    ];
    let mut stage_p50 = serde_json::Map::new();
    for (name, mut all) in stage_names.into_iter().zip(shares) {
        all.retain(|v| v.is_finite());
        all.sort_by(f64::total_cmp);
        if !all.is_empty() {
            stage_p50.insert(
                name.to_owned(),
                json!((percentile(&all, 50.0) * 10.0).round() / 10.0),
            );
        }
    }
    eprintln!("median ms per stage (each since the one before): {stage_p50:?}");
    let (cpu_ours, cpu_theirs) = (
        per_sample(&cpu_ours, ROUNDS),
        per_sample(&cpu_theirs, ROUNDS),
    );
    eprintln!("CPU ms per App through kubenest: {cpu_ours:?}");
    eprintln!("CPU ms per direct apply: {cpu_theirs:?}");
    let (requests_ours, requests_idle) = (
        largest_per_sample(&requests_ours, ROUNDS, 1.0, 0.1),
        largest_per_sample(&requests_idle, ROUNDS, 1.0, 0.1),
    );
    eprintln!("management API requests per App: {requests_ours:?}");
    eprintln!("management API requests meanwhile per direct apply: {requests_idle:?}");
    let (workload_ours, workload_theirs) = (
        largest_per_sample(&workload_ours, ROUNDS, 1.0, 0.1),
        largest_per_sample(&workload_theirs, ROUNDS, 1.0, 0.1),
    );
    eprintln!("workload API requests per App: {workload_ours:?}");
    eprintln!("workload API requests per direct apply: {workload_theirs:?}");
    kubenest.sort_by(f64::total_cmp);
    kubectl.sort_by(f64::total_cmp);
    let (k50, k99) = (percentile(&kubenest, 50.0), percentile(&kubenest, 99.0));
    let (d50, d99) = (percentile(&kubectl, 50.0), percentile(&kubectl, 99.0));
    eprintln!(
        "create → Running over {ROUNDS} rounds: kubenest p50 {k50:.0} ms p99 {k99:.0} ms; \
         direct apply p50 {d50:.0} ms p99 {d99:.0} ms"
    );

    let fleet = std::env::var(CONVERGE_APPS_ENV)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(CONVERGE_APPS);
    // The peer first: the same objects applied directly, half on each cluster.
    let west = env.cluster("west").unwrap().client().await.unwrap();
    direct_namespace(&west).await;
    let (direct_converge, direct_ready_at_cap) = direct_fleet(&[east.clone(), west], fleet).await;

    // 1,000 Apps across both clusters: created 16 at a time, then until all run. The
    // latency rounds' watches stop first: they time stages, and would only load the fleet.
    stages.stop();
    let projects = [east_project.clone(), west_project.clone()];
    let streams = Stages::default();
    for project in &projects {
        streams.stream(&admin, project).await;
    }
    let started = Instant::now();
    let poster = admin.clone();
    let mut posts = futures::stream::iter((0..fleet).map(|i| {
        let (mut client, project) = (poster.clone(), projects[i % 2].clone());
        async move {
            let app = client
                .post("/api/v1/apps", &app_body(&project, &format!("fleet-{i}")))
                .await
                .unwrap();
            app["id"].as_str().unwrap().to_owned()
        }
    }))
    .buffer_unordered(16);
    let mut ids = Vec::with_capacity(fleet);
    while let Some(id) = posts.next().await {
        ids.push(id);
    }
    drop(posts);
    let created = started.elapsed().as_secs_f64();
    let lister = admin.clone();
    let (converge, fleet_running) =
        converged(&streams, &ids, Stage::Streamed, started, "Running", || {
            let (mut lister, projects) = (lister.clone(), projects.clone());
            async move {
                running(&mut lister, &projects)
                    .await
                    .saturating_sub(WARMUP + ROUNDS)
            }
        })
        .await;
    streams.stop();
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
            "rounds": ROUNDS,
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
            "cpu_ms_per_app": cpu_ours,
            "cpu_ms_per_direct": cpu_theirs,
            "mgmt_requests_per_app": requests_ours,
            "mgmt_requests_per_direct": requests_idle,
            "workload_requests_per_app": workload_ours,
            "workload_requests_per_direct": workload_theirs,
            "fleet_apps": fleet,
            "running_at_cap": fleet_running,
            "create_1000_apps_s": round(created),
            "targets": {"overhead_p50_ms": 150, "overhead_p99_ms": 1000, "converge_1000_apps_s": 60},
        })
    );
    system.stop();
    drop(database);
}
