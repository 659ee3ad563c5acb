//! Deployment rows recorded per second while the controllers take on 1,000 new Apps, against
//! pgbench's insert rate on the same PostgreSQL server in the same run.
//!
//! A real hub and the controllers register a cluster (its scripted agent answers like a
//! well-behaved agent) and a project; then the controllers stop, 1,000 Apps are created, and a
//! fresh set of controllers starts. The clock runs from the controllers' first App reconcile
//! (the span `reconcile` of the App controller, seen by a tracing layer in this process) to the
//! 1,000th deployment row in PostgreSQL: from taking on the first App to recording the last, the
//! start-up before it (leader election, listing) left out. Rows commit in batches, so the first
//! row is no clock to start from: a burst recorded in one batch would take no time at all. Each row costs the controllers the placement lookups on the management API
//! server, the row itself (insert plus superseding older pending rows, one transaction), the
//! dispatch through the hub and a status write. pgbench inserts rows of the same width (a JSONB
//! spec snapshot) with as many clients as the controllers have database connections.
//! `make bench BENCH=history`; the last line is JSON.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // a benchmark aborts on error

#[path = "../tests/it/common/mod.rs"]
mod common;

use std::sync::{Arc, LazyLock, Mutex};
use std::time::{Duration, Instant};

use common::agent::Agent;
use common::{Hub, SYSTEM_NAMESPACE as SYSTEM};
use kube::api::{Api, PostParams};
use kubenest_contracts::Message;
use kubenest_contracts::TokenSigner;
use kubenest_crds::app::App;
use kubenest_crds::project::{Project, ProjectPhase, ProjectSpec};
use kubenest_store::{DatabaseUrl, History, NewDeployment, Operation};
use kubenest_testkit::bench::size;
use tokio_util::sync::CancellationToken;

// Full size under `make bench`; tiny under `make test`, which only checks that the benchmark
// still runs (kubenest_testkit::bench).
static APPS: LazyLock<usize> = LazyLock::new(|| size(1000, 10));
const CONNECTIONS: u32 = 8;

/// When the App controller's first reconcile began, once cleared.
#[derive(Clone, Default)]
struct FirstReconcile(Arc<Mutex<Option<Instant>>>);

impl FirstReconcile {
    fn clear(&self) {
        *self.0.lock().unwrap() = None;
    }

    fn at(&self) -> Option<Instant> {
        *self.0.lock().unwrap()
    }
}

impl<S: tracing::Subscriber> tracing_subscriber::Layer<S> for FirstReconcile {
    fn on_new_span(
        &self,
        attributes: &tracing::span::Attributes<'_>,
        _: &tracing::span::Id,
        _: tracing_subscriber::layer::Context<'_, S>,
    ) {
        let mut controller = Controller(false);
        attributes.record(&mut controller);
        if controller.0 {
            self.0.lock().unwrap().get_or_insert_with(Instant::now);
        }
    }
}

/// Whether a `reconcile` span's `controller` field is the App controller's.
struct Controller(bool);

impl tracing::field::Visit for Controller {
    fn record_str(&mut self, field: &tracing::field::Field, value: &str) {
        if field.name() == "controller" {
            self.0 = value == APP_CONTROLLER;
        }
    }

    fn record_debug(&mut self, field: &tracing::field::Field, value: &dyn std::fmt::Debug) {
        if field.name() == "controller" {
            self.0 = format!("{value:?}").trim_matches('"') == APP_CONTROLLER;
        }
    }
}

/// The App controller's name in its `reconcile` spans (`Reconciles::measure("app", ...)`).
const APP_CONTROLLER: &str = "app";

/// Sees only the `reconcile` spans every controller runs in (every other call site stays
/// disabled); [`FirstReconcile`] keeps the App controller's first.
fn watch_reconciles() -> FirstReconcile {
    use tracing_subscriber::Layer;
    use tracing_subscriber::layer::SubscriberExt;
    use tracing_subscriber::util::SubscriberInitExt;
    let first = FirstReconcile::default();
    let only = tracing_subscriber::filter::filter_fn(|meta| {
        meta.is_span()
            && meta.name() == "reconcile"
            && meta.target() == "kubenest_runtime::reconciles"
    });
    tracing_subscriber::registry()
        .with(first.clone().with_filter(only))
        .init();
    first
}

fn pgbench_rate(url: &str) -> f64 {
    let bin = std::fs::read_dir("/usr/lib/postgresql")
        .unwrap()
        .filter_map(|e| Some(e.ok()?.path().join("bin/pgbench")))
        .find(|p| p.exists())
        .expect("pgbench (PostgreSQL server package)");
    let dir = tempfile::tempdir().unwrap();
    let script = dir.path().join("insert.sql");
    std::fs::write(
        &script,
        "INSERT INTO bench_rows (id, intent_key, org_id, app_id, revision, spec_after) \
         VALUES (gen_random_uuid(), gen_random_uuid()::text, 'bench', gen_random_uuid()::text, \
         'abcdef0123456789', '{\"project\":\"shop\",\"components\":[{\"name\":\"web\",\
         \"workload\":{\"image\":\"nginx:1.27\",\"replicas\":2}}]}'::jsonb);\n",
    )
    .unwrap();
    std::fs::set_permissions(
        dir.path(),
        std::os::unix::fs::PermissionsExt::from_mode(0o755),
    )
    .unwrap();
    std::fs::set_permissions(&script, std::os::unix::fs::PermissionsExt::from_mode(0o644)).unwrap();
    let setup = std::process::Command::new(bin.with_file_name("psql"))
        .arg(url)
        .args([
            "-qc",
            "CREATE TABLE bench_rows (id uuid primary key, intent_key text unique, \
                org_id text, app_id text, revision text, spec_after jsonb, \
                created_at timestamptz default now())",
        ])
        .output()
        .unwrap();
    assert!(
        setup.status.success(),
        "{}",
        String::from_utf8_lossy(&setup.stderr)
    );
    let out = std::process::Command::new(&bin)
        .args([
            "-n",
            "-c",
            &CONNECTIONS.to_string(),
            "-j",
            "2",
            "-T",
            size("10", "1"),
            "-f",
        ])
        .arg(&script)
        .arg(url)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    text.lines()
        .find_map(|l| l.strip_prefix("tps = "))
        .and_then(|l| l.split_whitespace().next())
        .and_then(|n| n.parse().ok())
        .expect("pgbench tps")
}

/// The history store alone: 1,000 concurrent `record_change` calls (as many reconciles make at
/// once), from the first call to the last commit.
async fn store_rate(postgres: &kubenest_testkit::Postgres) -> f64 {
    let db = postgres.fresh_database("history-store").await.unwrap();
    let history = History::connect(&DatabaseUrl::new(db.url), CONNECTIONS)
        .await
        .unwrap();
    let started = Instant::now();
    let calls = (0..*APPS).map(|i| {
        let history = history.clone();
        tokio::spawn(async move {
            let spec = serde_json::json!({"project": "shop", "components": [{"name": "web",
                "workload": {"image": format!("nginx:1.{i}"), "replicas": 2}}]});
            history
                .record_change(NewDeployment {
                    intent_key: format!("app-{i}/g1"),
                    org_id: "bench".into(),
                    project_id: "shop".into(),
                    cluster_id: "east".into(),
                    app_id: format!("app-{i}"),
                    app_name: format!("app-{i:04}"),
                    revision: "abcdef0123456789".into(),
                    operation: Operation::Create,
                    actor: "kubernetes:bench".into(),
                    spec_before: None,
                    spec_after: spec,
                    rollback_of: None,
                })
                .await
                .unwrap();
        })
    });
    for call in calls.collect::<Vec<_>>() {
        call.await.unwrap();
    }
    *APPS as f64 / started.elapsed().as_secs_f64()
}

fn controllers(
    client: &kube::Client,
    history: History,
    hub_url: &str,
    signer: &Arc<TokenSigner>,
    shutdown: &CancellationToken,
) -> tokio::task::JoinHandle<()> {
    let config = kubenest_controllers::run::Config {
        client: client.clone(),
        history,
        hub_urls: vec![hub_url.to_owned()],
        signer: signer.clone(),
        session_namespace: SYSTEM.into(),
        system_namespace: SYSTEM.into(),
        heartbeat_window: chrono::Duration::seconds(90),
    };
    let shutdown = shutdown.clone();
    tokio::spawn(async move {
        kubenest_controllers::run::run(config, shutdown)
            .await
            .unwrap();
    })
}

#[tokio::main]
async fn main() {
    let first_reconcile = watch_reconciles();
    let mgmt = kubenest_testkit::shared_management().await.unwrap();
    let postgres = kubenest_testkit::shared_postgres().await.unwrap();
    let client = mgmt.client().await.unwrap();
    common::install(&client).await;
    common::system_namespace(&client).await;
    let hub = Hub::prepare(mgmt, SYSTEM);
    let (hub_url, signer) = (hub.url.clone(), hub.signer.clone());
    let stop_hub = CancellationToken::new();
    hub.start(stop_hub.clone());

    // Registration with a first set of controllers.
    let setup_db = postgres.fresh_database("history-setup").await.unwrap();
    let setup_history = History::connect(&DatabaseUrl::new(setup_db.url), 2)
        .await
        .unwrap();
    let stop_setup = CancellationToken::new();
    let setup = controllers(&client, setup_history, &hub_url, &signer, &stop_setup);
    let (org, namespace, _) = common::org_with_cluster(&client, "bench", "east").await;
    let credentials = common::credentials(&client, &namespace, "east").await;
    let agent = Agent::connect_eventually(&hub_url, &credentials).await;
    let projects: Api<Project> = Api::namespaced(client.clone(), &namespace);
    let spec = ProjectSpec {
        cluster: "east".into(),
        namespace: "shop".into(),
        registry_secret: None,
        ingress_ca: false,
        members: vec![],
        progress_deadline_seconds: 600,
        pod_security: None,
        quota: None,
        defaults: None,
        network: None,
    };
    projects
        .create(&PostParams::default(), &Project::new("shop", spec))
        .await
        .unwrap();
    common::eventually_within("project ready", Duration::from_secs(60), async || {
        projects
            .get("shop")
            .await
            .unwrap()
            .status
            .is_some_and(|s| s.phase == ProjectPhase::Ready)
    })
    .await;
    stop_setup.cancel();
    setup.await.unwrap();

    // 1,000 Apps while no controller runs.
    let apps: Api<App> = Api::namespaced(client.clone(), &namespace);
    let created = Instant::now();
    let gate = Arc::new(tokio::sync::Semaphore::new(32));
    let mut tasks = Vec::new();
    for i in 0..*APPS {
        let apps = apps.clone();
        let gate = gate.clone();
        tasks.push(tokio::spawn(async move {
            let _permit = gate.acquire().await.unwrap();
            let app: App = serde_json::from_value(serde_json::json!({
                "apiVersion": "kubenest.io/v1alpha1", "kind": "App",
                "metadata": {"name": format!("app-{i:04}")},
                "spec": {"project": "shop", "components": [{"name": "web", "workload": {"image": format!("nginx:1.{i}"), "replicas": 2}}]}
            }))
            .unwrap();
            apps.create(&PostParams::default(), &app).await.unwrap();
        }));
    }
    for task in tasks {
        task.await.unwrap();
    }
    eprintln!("created {} Apps in {:?}", *APPS, created.elapsed());

    // The timed set of controllers, recording into a database of its own.
    let db = postgres.fresh_database("history-bench").await.unwrap();
    let history = History::connect(&DatabaseUrl::new(db.url.clone()), CONNECTIONS)
        .await
        .unwrap();
    let counter = History::connect(&DatabaseUrl::new(db.url.clone()), 1)
        .await
        .unwrap();
    let stop = CancellationToken::new();
    first_reconcile.clear();
    let started = Instant::now();
    let run = controllers(&client, history, &hub_url, &signer, &stop);
    let count = async || -> i64 { counter.deployments_recorded(&org).await.unwrap() };
    let mut first_row = None;
    let mut progress = Vec::new();
    loop {
        let n = count().await;
        if n > 0 && first_row.is_none() {
            first_row = Some(started.elapsed());
        }
        if progress.last().is_none_or(|(_, last)| *last != n) {
            progress.push((started.elapsed().as_millis(), n));
        }
        if n >= *APPS as i64 {
            break;
        }
        assert!(
            started.elapsed() < Duration::from_secs(600),
            "only {n} rows after 10 minutes"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let rows_done = started.elapsed();
    let first_row = first_row.unwrap_or_default();
    eprintln!("rows over time (ms since the controllers started, rows): {progress:?}");
    let taken_on = first_reconcile
        .at()
        .expect("the App controller reconciled")
        .duration_since(started);
    let recording = rows_done - taken_on;
    let deployed = agent.count("app.deploy");
    // Recording is the first step; the dispatch it precedes must not pay for it.
    let dispatched = loop {
        let reached: std::collections::HashSet<String> = agent
            .received()
            .into_iter()
            .filter_map(|e| match e.message {
                Message::AppDeploy(deploy) => Some(deploy.app.app_id.to_string()),
                _ => None,
            })
            .collect();
        if reached.len() >= *APPS {
            break started.elapsed();
        }
        assert!(
            started.elapsed() < Duration::from_secs(600),
            "only {} Apps dispatched after 10 minutes",
            reached.len()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    stop.cancel();
    let _ = run.await;
    stop_hub.cancel();
    let rows_per_s = *APPS as f64 / recording.as_secs_f64();
    eprintln!(
        "{} rows in {recording:?} from the first reconcile; {deployed} app.deploy commands had reached the agent",
        *APPS
    );

    let store = store_rate(postgres).await;
    let pgbench = pgbench_rate(&db.url);
    let report = serde_json::json!({
        "benchmark": "history",
        "apps": *APPS,
        "rows_per_s": (rows_per_s * 10.0).round() / 10.0,
        "seconds_first_reconcile_to_last_row": (recording.as_secs_f64() * 1000.0).round() / 1000.0,
        "controllers_start_to_first_reconcile_s": (taken_on.as_secs_f64() * 100.0).round() / 100.0,
        "controllers_start_to_first_row_s": (first_row.as_secs_f64() * 100.0).round() / 100.0,
        "controllers_start_to_last_row_s": (rows_done.as_secs_f64() * 100.0).round() / 100.0,
        "controllers_start_to_all_dispatched_s": (dispatched.as_secs_f64() * 100.0).round() / 100.0,
        "store_rows_per_s": store.round(),
        "store_ratio": (store / pgbench * 1000.0).round() / 1000.0,
        "pgbench_inserts_per_s": pgbench.round(),
        "pgbench_clients": CONNECTIONS,
        "ratio": (rows_per_s / pgbench * 1000.0).round() / 1000.0,
    });
    println!("{report}");
    std::process::exit(0);
}
