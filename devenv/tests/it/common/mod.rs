//! The system the end-to-end tests share, one per test binary: the release programs as
//! processes on real clusters and PostgreSQL (see `kubenest_devenv::system`), and what the tests
//! do with it through the API.

#![allow(dead_code)] // each test binary uses part of this

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::LazyLock;
use std::time::{Duration, Instant};

use k8s_openapi::api::apps::v1::Deployment;
use kube::api::Api;
use kubenest_cli::api::Client;
use kubenest_devenv::system::{Options, Programs, System};
use kubenest_testkit::{Binaries, Environment};
use serde_json::{Value, json};
use tokio::sync::{Mutex, OnceCell};

pub const CONVERGE: Duration = Duration::from_secs(120);

pub static RUNTIME: LazyLock<tokio::runtime::Runtime> = LazyLock::new(|| {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
});

pub struct Fixture {
    pub env: &'static Environment,
    pub system: System,
}

pub async fn fixture() -> tokio::sync::MutexGuard<'static, Fixture> {
    static FIXTURE: OnceCell<Mutex<Fixture>> = OnceCell::const_new();
    FIXTURE
        .get_or_init(|| async {
            let env = kubenest_testkit::shared().await.unwrap();
            let database = env
                .postgres()
                .unwrap()
                .fresh_database("system")
                .await
                .unwrap();
            let dir = tempfile::tempdir().unwrap().keep();
            let options = Options {
                heartbeat_seconds: 2,
                backoff_max_seconds: 2,
                reconnect_spread_seconds: 1,
                heartbeat_window_seconds: 30,
                ..Options::default()
            };
            let progress = |line: &str| eprintln!("system: {line}");
            let mut system = System::start(env, &database.url, &dir, options, &progress)
                .await
                .unwrap();
            system.ensure_org().await.unwrap();
            let bins = Binaries::locate().unwrap();
            for cluster in env.workloads() {
                system.register(cluster, &bins).await.unwrap();
            }
            system.wait_connected(CONVERGE).await.unwrap();
            std::mem::forget(database); // the database lives as long as the system
            Mutex::new(Fixture { env, system })
        })
        .await
        .lock()
        .await
}

/// Runs a test body on the shared runtime (what it spawns runs on the runtime's workers, which
/// outlive the test).
pub fn run<F: Future<Output = ()>>(body: F) {
    RUNTIME.block_on(body);
}

impl Fixture {
    pub async fn admin(&self) -> Client {
        self.system.admin().await.unwrap()
    }

    pub fn cluster_id(&self, name: &str) -> String {
        self.system.agents[name].cluster_id.clone()
    }

    pub async fn workload(&self, name: &str) -> kube::Client {
        self.env.cluster(name).unwrap().client().await.unwrap()
    }

    /// A project on `cluster`, Ready; returns its id and namespace.
    pub async fn project(&self, cluster: &str, prefix: &str) -> (String, String) {
        let mut admin = self.admin().await;
        let name = format!(
            "{prefix}-{}",
            &uuid::Uuid::new_v4().simple().to_string()[..6]
        );
        let org = self.system.options().org.clone();
        let project = admin
            .post(
                &format!("/api/v1/orgs/{org}/projects"),
                &json!({"name": name, "cluster_id": self.cluster_id(cluster)}),
            )
            .await
            .unwrap();
        let id = project["id"].as_str().unwrap().to_owned();
        eventually(&format!("project {name} Ready"), CONVERGE, async || {
            admin.get(&format!("/api/v1/projects/{id}")).await.unwrap()["phase"] == "Ready"
        })
        .await;
        (id, name)
    }

    /// The index in `system.hubs` of the hub replica carrying `cluster`'s session now.
    pub async fn hub_holding(&self, cluster: &str) -> usize {
        let mgmt = self.env.management().unwrap().client().await.unwrap();
        let leases: Api<k8s_openapi::api::coordination::v1::Lease> =
            Api::namespaced(mgmt, kubenest_devenv::system::SYSTEM_NAMESPACE);
        let lease = leases
            .get(&format!("hub-session-{}", self.cluster_id(cluster)))
            .await
            .unwrap();
        let holder = lease.spec.unwrap().holder_identity.unwrap();
        self.system
            .hubs
            .iter()
            .position(|h| h.service.name() == holder)
            .unwrap()
    }

    /// Waits until the API says `cluster` is in `state` (`connected`, `disconnected`).
    pub async fn cluster_state(&self, cluster: &str, state: &str, within: Duration) {
        let mut admin = self.admin().await;
        let path = format!("/api/v1/clusters/{}", self.cluster_id(cluster));
        eventually(&format!("{cluster} reported {state}"), within, async || {
            admin.get(&path).await.unwrap()["state"] == state
        })
        .await;
    }

    /// Fails with the end of every program's log when something has exited.
    pub fn check_running(&mut self) {
        if let Err(e) = self.system.check_running() {
            panic!("a kubenest program died: {e:#}");
        }
    }
}

pub async fn eventually(what: &str, timeout: Duration, mut check: impl AsyncFnMut() -> bool) {
    let deadline = Instant::now() + timeout;
    while !check().await {
        assert!(Instant::now() < deadline, "{what}: not within {timeout:?}");
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

pub fn simple_app(project_id: &str, name: &str, image: &str) -> Value {
    json!({
        "project_id": project_id, "name": name,
        "components": [{"name": "web", "type": "workload",
            "workload_spec": {"image": image, "replicas": 1, "port": 8080}}]
    })
}

pub async fn create(admin: &mut Client, project_id: &str, name: &str, image: &str) -> String {
    let app = admin
        .post("/api/v1/apps", &simple_app(project_id, name, image))
        .await
        .unwrap();
    app["id"].as_str().unwrap().to_owned()
}

pub async fn change_image(admin: &mut Client, app_id: &str, image: &str) {
    let app = admin.get(&format!("/api/v1/apps/{app_id}")).await.unwrap();
    let mut components = app["components"].clone();
    components[0]["workload_spec"]["image"] = json!(image);
    admin
        .patch(
            &format!("/api/v1/apps/{app_id}"),
            &json!({"components": components}),
        )
        .await
        .unwrap();
}

/// What an App should have come to: its image, and its history (operations, newest first).
pub struct Expect<'a> {
    pub app_id: &'a str,
    pub name: &'a str,
    pub image: &'a str,
    pub operations: &'a [&'a str],
}

/// Waits until each App runs its expected image on the cluster, then checks the history holds
/// exactly the expected deployments, all succeeded, and that the Deployment was applied once
/// per spec (its generation counts the specs it was given).
pub async fn converged(f: &mut Fixture, cluster: &str, namespace: &str, expected: &[Expect<'_>]) {
    for want in expected {
        let results = vec!["succeeded"; want.operations.len()];
        converged_as(f, cluster, namespace, want, &results, want.operations.len()).await;
    }
}

/// Waits until the App runs its expected image on the cluster, then checks its history holds
/// exactly the expected deployments with these `results` (newest first), and that the
/// Deployment was given `applied` specs (its generation).
pub async fn converged_as(
    f: &mut Fixture,
    cluster: &str,
    namespace: &str,
    want: &Expect<'_>,
    results: &[&str],
    applied: usize,
) {
    let mut admin = f.admin().await;
    let deployments: Api<Deployment> = Api::namespaced(f.workload(cluster).await, namespace);
    let path = format!("/api/v1/apps/{}", want.app_id);
    let deadline = Instant::now() + CONVERGE;
    loop {
        f.check_running();
        let app = admin.get(&path).await.unwrap();
        let live = deployments
            .get_opt(&format!("{}-web", want.name))
            .await
            .unwrap();
        let image = live.as_ref().and_then(|d| {
            d.spec.as_ref()?.template.spec.as_ref()?.containers[0]
                .image
                .clone()
        });
        let settled = app["phase"] == "Running"
            && app["observed_revision"] == app["revision"]
            && app["components"][0]["workload_spec"]["image"] == want.image
            && image.as_deref() == Some(want.image);
        if settled {
            break;
        }
        let last = json!({"app": app, "live_image": image});
        assert!(
            Instant::now() < deadline,
            "App {} did not converge to {}: {last}",
            want.name,
            want.image
        );
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    let mut history = Value::Null;
    eventually("every deployment has a result", CONVERGE, async || {
        history = admin.get(&format!("{path}/deployments")).await.unwrap();
        history
            .as_array()
            .unwrap()
            .iter()
            .all(|d| d["result"] != "pending")
    })
    .await;
    let operations: Vec<&str> = history
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["operation"].as_str().unwrap())
        .collect();
    assert_eq!(
        operations, want.operations,
        "history of {}: {history}",
        want.name
    );
    let found: Vec<&str> = history
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["result"].as_str().unwrap())
        .collect();
    assert_eq!(found, results, "results of {}: {history}", want.name);
    let live = deployments
        .get(&format!("{}-web", want.name))
        .await
        .unwrap();
    assert_eq!(
        live.metadata.generation,
        Some(applied as i64),
        "{}: the Deployment's generation counts the specs applied to it",
        want.name
    );
}

pub async fn gone(f: &Fixture, cluster: &str, namespace: &str, app_id: &str, name: &str) {
    let mut admin = f.admin().await;
    let deployments: Api<Deployment> = Api::namespaced(f.workload(cluster).await, namespace);
    eventually(
        &format!("App {name} deleted everywhere"),
        CONVERGE,
        async || {
            admin
                .get(&format!("/api/v1/apps/{app_id}"))
                .await
                .is_err_and(|e| e.status() == Some(404))
                && deployments
                    .get_opt(&format!("{name}-web"))
                    .await
                    .unwrap()
                    .is_none()
        },
    )
    .await;
}

/// The `kubenest` CLI built beside the programs.
pub fn cli() -> PathBuf {
    Programs::locate()
        .unwrap()
        .apiserver
        .with_file_name("kubenest")
}

/// Runs the CLI with `args` and `stdin`, its session in `session`.
pub fn kubenest(session: &Path, args: &[&str], stdin: &str) -> Output {
    let mut child = Command::new(cli())
        .args(args)
        .env("KUBENEST_SESSION", session)
        .env_remove("KUBENEST_API")
        .env_remove("KUBENEST_CA_FILE")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(stdin.as_bytes())
        .unwrap();
    child.wait_with_output().unwrap()
}

/// Signs the CLI in to `system` as its administrator, the session in `session`.
pub fn admin_login(system: &System, session: &Path) {
    let options = system.options();
    let api = system.api_url();
    let login = kubenest(
        session,
        &[
            "--api",
            &api,
            "login",
            "-u",
            &options.admin_user,
            "--password-stdin",
        ],
        &options.admin_password,
    );
    assert!(login.status.success(), "{}", text(&login));
}

/// What a command printed, standard output then error.
pub fn text(output: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    )
}

/// The Kubernetes Events matching `fields` in any namespace, once one has `reason`.
pub async fn events_until(
    client: &kube::Client,
    fields: &str,
    reason: &str,
) -> Vec<k8s_openapi::api::core::v1::Event> {
    let events: Api<k8s_openapi::api::core::v1::Event> = Api::all(client.clone());
    let mut found = Vec::new();
    eventually(
        &format!("an Event {reason} on {fields}"),
        Duration::from_secs(30),
        async || {
            found = events
                .list(&kube::api::ListParams::default().fields(fields))
                .await
                .unwrap()
                .items;
            found.iter().any(|e| e.reason.as_deref() == Some(reason))
        },
    )
    .await;
    found
}

/// `sh -c script` in `pod` of `namespace` on `cluster` (kubectl exec, through the kubelet); its
/// stdout, trimmed. A failure fails the test with what the command said.
pub fn kubectl_exec(
    cluster: &kubenest_testkit::Cluster,
    namespace: &str,
    pod: &str,
    script: &str,
) -> String {
    let kubectl = Binaries::locate().unwrap().kubectl;
    let started = Instant::now();
    let out = Command::new(kubectl)
        .arg(format!(
            "--kubeconfig={}",
            cluster.kubeconfig_path().display()
        ))
        .args(["-n", namespace, "exec", pod, "--", "sh", "-c", script])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "kubectl exec {pod} -- {script}: {:?}\n{}{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    eprintln!(
        "{pod}: `{script}` in {:.1}s",
        started.elapsed().as_secs_f64()
    );
    String::from_utf8_lossy(&out.stdout).trim().to_owned()
}
