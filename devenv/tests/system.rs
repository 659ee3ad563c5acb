//! kubenest end to end, as `make dev` runs it: the release programs as processes (two hub
//! replicas, two controllers replicas, the API server, one agent per workload cluster
//! registered through the API) on real clusters and PostgreSQL. The tour runs on it, and then
//! faults are injected one at a time: a hub replica killed mid-deploy, an agent's link stalled
//! and cut for 30 s while changes are made, the active controllers killed during a rollout,
//! an agent restarted. After each, the system converges: every change runs on its cluster, each
//! change is one deployment in the history (none lost, none applied twice: the workloads'
//! `metadata.generation` counts the specs applied), and the history agrees with the cluster.
//!
//! The system lives on one runtime shared by the tests of this binary (its proxies run there),
//! and the tests take turns: a fault in one must not be blamed on another.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::LazyLock;
use std::time::{Duration, Instant};

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::coordination::v1::Lease;
use kube::api::Api;
use kubenest_cli::api::Client;
use kubenest_devenv::system::{Options, SYSTEM_NAMESPACE, System};
use kubenest_devenv::tour::{self, DevEnv, Printer};
use kubenest_testkit::{Binaries, Environment, LinkMode};
use serde_json::{Value, json};
use tokio::sync::{Mutex, OnceCell};

const CONVERGE: Duration = Duration::from_secs(120);

static RUNTIME: LazyLock<tokio::runtime::Runtime> = LazyLock::new(|| {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
});

struct Fixture {
    env: &'static Environment,
    system: System,
}

async fn fixture() -> tokio::sync::MutexGuard<'static, Fixture> {
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
fn run<F: Future<Output = ()>>(body: F) {
    RUNTIME.block_on(body);
}

impl Fixture {
    async fn admin(&self) -> Client {
        self.system.admin().await.unwrap()
    }

    fn cluster_id(&self, name: &str) -> String {
        self.system.agents[name].cluster_id.clone()
    }

    async fn workload(&self, name: &str) -> kube::Client {
        self.env.cluster(name).unwrap().client().await.unwrap()
    }

    /// A project on `cluster`, Ready; returns its id and namespace.
    async fn project(&self, cluster: &str, prefix: &str) -> (String, String) {
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

    /// Fails with the end of every program's log when something has exited.
    fn check_running(&mut self) {
        if let Err(e) = self.system.check_running() {
            panic!("a kubenest program died: {e:#}");
        }
    }
}

async fn eventually(what: &str, timeout: Duration, mut check: impl AsyncFnMut() -> bool) {
    let deadline = Instant::now() + timeout;
    while !check().await {
        assert!(Instant::now() < deadline, "{what}: not within {timeout:?}");
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

fn simple_app(project_id: &str, name: &str, image: &str) -> Value {
    json!({
        "project_id": project_id, "name": name,
        "components": [{"name": "web", "type": "workload",
            "workload_spec": {"image": image, "replicas": 1, "port": 8080}}]
    })
}

async fn create(admin: &mut Client, project_id: &str, name: &str, image: &str) -> String {
    let app = admin
        .post("/api/v1/apps", &simple_app(project_id, name, image))
        .await
        .unwrap();
    app["id"].as_str().unwrap().to_owned()
}

async fn change_image(admin: &mut Client, app_id: &str, image: &str) {
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
struct Expect<'a> {
    app_id: &'a str,
    name: &'a str,
    image: &'a str,
    operations: &'a [&'a str],
}

/// Waits until each App runs its expected image on the cluster, then checks the history holds
/// exactly the expected deployments, all succeeded, and that the Deployment was applied once
/// per spec (its generation counts the specs it was given).
async fn converged(f: &mut Fixture, cluster: &str, namespace: &str, expected: &[Expect<'_>]) {
    let mut admin = f.admin().await;
    let deployments: Api<Deployment> = Api::namespaced(f.workload(cluster).await, namespace);
    for want in expected {
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
        for row in history.as_array().unwrap() {
            assert_eq!(row["result"], "succeeded", "{}: {row}", want.name);
        }
        let live = deployments
            .get(&format!("{}-web", want.name))
            .await
            .unwrap();
        assert_eq!(
            live.metadata.generation,
            Some(want.operations.len() as i64),
            "{}: the Deployment's generation counts the specs applied to it",
            want.name
        );
    }
}

async fn gone(f: &Fixture, cluster: &str, namespace: &str, app_id: &str, name: &str) {
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

#[test]
fn the_tour_runs_on_the_whole_system() {
    run(async {
        let f = fixture().await;
        let options = f.system.options();
        let env = DevEnv {
            api: f.system.api_url(),
            admin_user: options.admin_user.clone(),
            admin_password: options.admin_password.clone(),
            org: options.org.clone(),
            clusters: f
                .system
                .agents
                .values()
                .map(|a| {
                    let kubeconfig = f.env.cluster(&a.cluster).unwrap().kubeconfig_path();
                    (
                        a.cluster.clone(),
                        (a.cluster_id.clone(), kubeconfig.to_path_buf()),
                    )
                })
                .collect(),
        };
        let mut out = Printer::quiet();
        let outcome = tour::run(&env, &mut out).await;
        eprintln!("{}", out.lines.join("\n"));
        outcome.unwrap();
        for step in ["== 1.", "== 3.", "== 7.", "== 9.", "tour finished"] {
            assert!(
                out.lines.iter().any(|l| l.starts_with(step)),
                "the tour printed no {step:?}"
            );
        }
        assert!(
            out.lines
                .iter()
                .any(|l| l.contains("spec.replicas desired 2 observed 5 (by kubectl-scale)")),
            "the drift event names field, values and manager"
        );
    });
}

#[test]
fn a_hub_replica_killed_mid_deploy_loses_and_repeats_nothing() {
    run(async {
        let mut f = fixture().await;
        let (project, namespace) = f.project("east", "hubkill").await;
        let mgmt = f.env.management().unwrap().client().await.unwrap();
        let leases: Api<Lease> = Api::namespaced(mgmt, SYSTEM_NAMESPACE);
        let lease = leases
            .get(&format!("hub-session-{}", f.cluster_id("east")))
            .await
            .unwrap();
        let holder = lease.spec.unwrap().holder_identity.unwrap();
        let index = f
            .system
            .hubs
            .iter()
            .position(|h| h.service.name() == holder)
            .unwrap();

        let mut admin = f.admin().await;
        let names = ["h0", "h1", "h2", "h3", "h4"];
        let mut ids = Vec::new();
        for name in names {
            ids.push(create(&mut admin, &project, name, "nginx:1.27").await);
        }
        // The replica carrying east's session dies while those deployments are in flight.
        f.system.hubs[index].service.kill();
        tokio::time::sleep(Duration::from_secs(3)).await;
        f.system.hubs[index].service.start().unwrap();

        let expected: Vec<Expect> = names
            .iter()
            .zip(&ids)
            .map(|(name, id)| Expect {
                app_id: id,
                name,
                image: "nginx:1.27",
                operations: &["create"],
            })
            .collect();
        converged(&mut f, "east", &namespace, &expected).await;
    });
}

#[test]
fn changes_made_while_an_agents_link_is_stalled_and_cut_arrive_once() {
    run(async {
        let mut f = fixture().await;
        let (project, namespace) = f.project("west", "link").await;
        let mut admin = f.admin().await;
        let changed = create(&mut admin, &project, "l-changed", "nginx:1.27").await;
        let removed = create(&mut admin, &project, "l-removed", "nginx:1.27").await;
        converged(
            &mut f,
            "west",
            &namespace,
            &[
                Expect {
                    app_id: &changed,
                    name: "l-changed",
                    image: "nginx:1.27",
                    operations: &["create"],
                },
                Expect {
                    app_id: &removed,
                    name: "l-removed",
                    image: "nginx:1.27",
                    operations: &["create"],
                },
            ],
        )
        .await;

        // 15 s of a black hole (neither end notices at once), then 15 s of a dead link.
        f.system.set_link("west", LinkMode::Stall).unwrap();
        change_image(&mut admin, &changed, "nginx:1.28").await;
        let added = create(&mut admin, &project, "l-added", "nginx:1.27").await;
        tokio::time::sleep(Duration::from_secs(15)).await;
        f.system.set_link("west", LinkMode::Drop).unwrap();
        admin
            .delete(&format!("/api/v1/apps/{removed}"))
            .await
            .unwrap();
        let west = f.cluster_id("west");
        eventually(
            "west reported disconnected",
            Duration::from_secs(60),
            async || {
                admin
                    .get(&format!("/api/v1/clusters/{west}"))
                    .await
                    .unwrap()["state"]
                    == "disconnected"
            },
        )
        .await;
        tokio::time::sleep(Duration::from_secs(15)).await;
        f.system.set_link("west", LinkMode::Pass).unwrap();

        converged(
            &mut f,
            "west",
            &namespace,
            &[
                Expect {
                    app_id: &changed,
                    name: "l-changed",
                    image: "nginx:1.28",
                    operations: &["update", "create"],
                },
                Expect {
                    app_id: &added,
                    name: "l-added",
                    image: "nginx:1.27",
                    operations: &["create"],
                },
            ],
        )
        .await;
        gone(&f, "west", &namespace, &removed, "l-removed").await;
        eventually("west connected again", CONVERGE, async || {
            admin
                .get(&format!("/api/v1/clusters/{west}"))
                .await
                .unwrap()["state"]
                == "connected"
        })
        .await;
    });
}

#[test]
fn the_active_controllers_killed_during_a_rollout_hand_over_without_repeating_it() {
    run(async {
        let mut f = fixture().await;
        let (project, namespace) = f.project("east", "failover").await;
        let mut admin = f.admin().await;
        let first = create(&mut admin, &project, "c-first", "nginx:1.27").await;
        converged(
            &mut f,
            "east",
            &namespace,
            &[Expect {
                app_id: &first,
                name: "c-first",
                image: "nginx:1.27",
                operations: &["create"],
            }],
        )
        .await;

        let mgmt = f.env.management().unwrap().client().await.unwrap();
        let leader = f.system.leader(&mgmt).await.unwrap().expect("a leader");
        let names = ["c0", "c1", "c2", "c3"];
        let mut ids = Vec::new();
        for name in names {
            ids.push(create(&mut admin, &project, name, "nginx:1.27").await);
        }
        change_image(&mut admin, &first, "nginx:1.28").await;
        f.system.controllers[leader].kill();
        let killed = Instant::now();
        // The standby takes over once the dead leader's Lease runs out; then the killed
        // replica comes back and stands by.
        eventually("the standby leads", Duration::from_secs(30), async || {
            f.system
                .leader(&mgmt)
                .await
                .unwrap()
                .is_some_and(|l| l != leader)
        })
        .await;
        eprintln!(
            "the standby took over {:.1}s after the leader was killed",
            killed.elapsed().as_secs_f64()
        );
        f.system.controllers[leader].start().unwrap();

        let mut expected: Vec<Expect> = names
            .iter()
            .zip(&ids)
            .map(|(name, id)| Expect {
                app_id: id,
                name,
                image: "nginx:1.27",
                operations: &["create"],
            })
            .collect();
        expected.push(Expect {
            app_id: &first,
            name: "c-first",
            image: "nginx:1.28",
            operations: &["update", "create"],
        });
        converged(&mut f, "east", &namespace, &expected).await;
        eprintln!(
            "converged {:.1}s after the leader was killed",
            killed.elapsed().as_secs_f64()
        );
        assert_ne!(
            f.system.leader(&mgmt).await.unwrap(),
            Some(leader),
            "the standby keeps leading"
        );
    });
}

#[test]
fn an_agent_restarted_while_changes_wait_applies_each_once() {
    run(async {
        let mut f = fixture().await;
        let (project, namespace) = f.project("east", "agent").await;
        let mut admin = f.admin().await;
        let kept = create(&mut admin, &project, "a-kept", "nginx:1.27").await;
        converged(
            &mut f,
            "east",
            &namespace,
            &[Expect {
                app_id: &kept,
                name: "a-kept",
                image: "nginx:1.27",
                operations: &["create"],
            }],
        )
        .await;

        f.system.agent("east").unwrap().service.kill();
        change_image(&mut admin, &kept, "nginx:1.28").await;
        let added = create(&mut admin, &project, "a-added", "nginx:1.27").await;
        tokio::time::sleep(Duration::from_secs(3)).await;
        f.system.agent("east").unwrap().service.start().unwrap();

        converged(
            &mut f,
            "east",
            &namespace,
            &[
                Expect {
                    app_id: &kept,
                    name: "a-kept",
                    image: "nginx:1.28",
                    operations: &["update", "create"],
                },
                Expect {
                    app_id: &added,
                    name: "a-added",
                    image: "nginx:1.27",
                    operations: &["create"],
                },
            ],
        )
        .await;
    });
}
