//! The ways out when things go wrong, on the whole system as `make dev` runs it (two hub
//! replicas, the controllers, the API server, real agents on real clusters, PostgreSQL):
//!
//! - a dead cluster (its agent gone) is removed by an admin's forced removal, which records
//!   itself and says what it left on the cluster;
//! - a namespace that exists on the cluster and is not kubenest's is refused at the door, and a
//!   project the agent refused deletes at once;
//! - a token rotation through the API cuts the live session, and once the call answered no hub
//!   replica admits the old token.
//!
//! The system lives on one runtime shared by the tests of this binary, and the tests take turns.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // a test fails by panicking

// A System of its own, on a management cluster of its own: a binary of its own (see
// tests/it/main.rs).
#[path = "it/common/mod.rs"]
mod common;

use std::sync::LazyLock;
use std::time::{Duration, Instant};

use futures::StreamExt;
use k8s_openapi::api::core::v1::Namespace;
use kube::api::{Api, Patch, PatchParams};
use kubenest_cli::api::Client;
use kubenest_devenv::system::{Options, System};
use kubenest_testkit::{Binaries, Environment};
use serde_json::{Value, json};
use tokio::sync::{Mutex, OnceCell};
use tokio_tungstenite::tungstenite::client::IntoClientRequest;

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

/// The system with cluster `east` registered and connected; `west` is left for the test that
/// kills its agent.
async fn fixture() -> tokio::sync::MutexGuard<'static, Fixture> {
    static FIXTURE: OnceCell<Mutex<Fixture>> = OnceCell::const_new();
    FIXTURE
        .get_or_init(|| async {
            let env = kubenest_testkit::shared().await.unwrap();
            let database = env
                .postgres()
                .unwrap()
                .fresh_database("exits")
                .await
                .unwrap();
            let dir = tempfile::tempdir().unwrap().keep();
            let options = Options {
                controllers: 1,
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
            system
                .register(env.cluster("east").unwrap(), &bins)
                .await
                .unwrap();
            system.wait_connected(CONVERGE).await.unwrap();
            std::mem::forget(database); // the database lives as long as the system
            Mutex::new(Fixture { env, system })
        })
        .await
        .lock()
        .await
}

fn run<F: Future<Output = ()>>(body: F) {
    RUNTIME.block_on(body);
}

async fn eventually(what: &str, timeout: Duration, mut check: impl AsyncFnMut() -> bool) {
    let deadline = Instant::now() + timeout;
    while !check().await {
        assert!(Instant::now() < deadline, "{what}: not within {timeout:?}");
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

fn unique(prefix: &str) -> String {
    format!(
        "{prefix}-{}",
        &uuid::Uuid::new_v4().simple().to_string()[..6]
    )
}

/// The status and body of a call that may fail.
async fn call(client: &mut Client, method: reqwest::Method, path: &str) -> (u16, Value) {
    match client.call(method, path, None).await {
        Ok(body) => (200, body),
        Err(kubenest_cli::api::ApiError::Status {
            status,
            code,
            message,
            ..
        }) => (status, json!({"code": code, "message": message})),
        Err(other) => panic!("{path}: {other}"),
    }
}

impl Fixture {
    async fn admin(&self) -> Client {
        self.system.admin().await.unwrap()
    }

    fn org(&self) -> String {
        self.system.options().org.clone()
    }
}

#[test]
fn a_dead_cluster_is_removed_by_force_which_is_recorded_and_says_what_it_left() {
    run(async {
        let mut f = fixture().await;
        let bins = Binaries::locate().unwrap();
        let west = f.env.cluster("west").unwrap();
        let cluster_id = f.system.register(west, &bins).await.unwrap();
        f.system.wait_connected(CONVERGE).await.unwrap();
        let mut admin = f.admin().await;
        let org = f.org();
        let name = unique("dead");
        let project = admin
            .post(
                &format!("/api/v1/orgs/{org}/projects"),
                &json!({"name": name, "cluster_id": cluster_id}),
            )
            .await
            .unwrap();
        let project_id = project["id"].as_str().unwrap().to_owned();
        let app = admin
            .post(
                "/api/v1/apps",
                &json!({"project_id": project_id, "name": "d-web", "components": [
                    {"name": "web", "type": "workload",
                     "workload_spec": {"image": "nginx:1.27", "replicas": 1, "port": 8080}}]}),
            )
            .await
            .unwrap();
        let app_id = app["id"].as_str().unwrap().to_owned();
        eventually("the App runs on west", CONVERGE, async || {
            admin.get(&format!("/api/v1/apps/{app_id}")).await.unwrap()["phase"] == "Running"
        })
        .await;

        // The agent is uninstalled, as the cluster docs say to do before removing a cluster.
        f.system.agent("west").unwrap().service.kill();
        eventually("west reported disconnected", CONVERGE, async || {
            admin
                .get(&format!("/api/v1/clusters/{cluster_id}"))
                .await
                .unwrap()["state"]
                == "disconnected"
        })
        .await;
        // A standalone addon made now never reaches the cluster, but its revision is recorded.
        let addon = admin
            .post(
                "/api/v1/addon-instances",
                &json!({"project_id": project_id, "name": "d-cache", "definition": "redis"}),
            )
            .await
            .unwrap();
        let addon_id = addon["id"].as_str().unwrap().to_owned();
        eventually("the addon's revision is recorded", CONVERGE, async || {
            !admin
                .get(&format!("/api/v1/addon-instances/{addon_id}"))
                .await
                .unwrap()["revision"]
                .is_null()
        })
        .await;

        // Without force the deletion waits, and says for what and how to get out.
        let deleting = admin
            .delete(&format!("/api/v1/apps/{app_id}"))
            .await
            .unwrap();
        assert_eq!(deleting["state"], "deleting", "{deleting}");
        let waiting = deleting["waiting_for"][0].as_str().unwrap();
        assert!(
            waiting.contains("not connected") && waiting.contains("?force=true"),
            "{waiting}"
        );
        let (status, refused) = call(
            &mut admin,
            reqwest::Method::DELETE,
            &format!("/api/v1/clusters/{cluster_id}"),
        )
        .await;
        assert_eq!(status, 409, "{refused}");
        assert!(
            refused["message"].as_str().unwrap().contains(&name),
            "{refused}"
        );
        tokio::time::sleep(Duration::from_secs(5)).await;
        let still = admin.get(&format!("/api/v1/apps/{app_id}")).await.unwrap();
        assert_eq!(still["phase"], "Deleting", "{still}");

        // Only admins may force: a member of the organization is refused.
        let member = unique("member");
        admin
            .post(
                "/api/v1/users",
                &json!({"username": member, "password": "a-long-enough-password"}),
            )
            .await
            .unwrap();
        admin
            .call(
                reqwest::Method::PUT,
                &format!("/api/v1/orgs/{org}/members"),
                Some(&json!({"user": member, "role": "member"})),
            )
            .await
            .unwrap();
        let mut as_member = Client::new(&f.system.api_url());
        as_member
            .login(&member, "a-long-enough-password")
            .await
            .unwrap();
        let (status, _) = call(
            &mut as_member,
            reqwest::Method::DELETE,
            &format!("/api/v1/apps/{app_id}?force=true"),
        )
        .await;
        assert_eq!(status, 403);

        let removed = admin
            .delete(&format!("/api/v1/clusters/{cluster_id}?force=true"))
            .await
            .unwrap();
        assert_eq!(removed["state"], "removed", "{removed}");
        let list = |key: &str| -> Vec<String> {
            removed[key]
                .as_array()
                .unwrap()
                .iter()
                .map(|v| v.as_str().unwrap().to_owned())
                .collect()
        };
        assert_eq!(
            list("removed"),
            [
                "app/d-web".to_owned(),
                "addon/d-cache".to_owned(),
                format!("project/{name}"),
                "cluster/west".to_owned()
            ],
            "{removed}"
        );
        let left = list("left_on_cluster").join("\n");
        for what in [
            format!("kubenest.io/app-id={app_id}"),
            format!("kubenest.io/addon-id={addon_id}"),
            format!("namespace {name} with everything in it"),
            "helm uninstall kubenest-agent".to_owned(),
        ] {
            assert!(left.contains(&what), "{what} missing from:\n{left}");
        }
        for path in [
            format!("/api/v1/apps/{app_id}"),
            format!("/api/v1/addon-instances/{addon_id}"),
            format!("/api/v1/projects/{project_id}"),
            format!("/api/v1/clusters/{cluster_id}"),
        ] {
            eventually(
                &format!("{path} is gone"),
                Duration::from_secs(30),
                async || {
                    admin
                        .get(&path)
                        .await
                        .is_err_and(|e| e.status() == Some(404))
                },
            )
            .await;
        }
        // What was said to be left is there: the project's namespace on west.
        let namespaces: Api<Namespace> = Api::all(west.client().await.unwrap());
        assert!(namespaces.get_opt(&name).await.unwrap().is_some());

        // The history and the audit log say who forced what.
        let db = sqlx::PgPool::connect(f.system.database_url())
            .await
            .unwrap();
        let rows: Vec<(String, String, String)> = sqlx::query_as(
            "SELECT operation, status, actor FROM deployments WHERE app_id = $1 \
             ORDER BY created_at DESC",
        )
        .bind(&app_id)
        .fetch_all(&db)
        .await
        .unwrap();
        assert_eq!(
            rows[0],
            ("delete".into(), "forced".into(), "admin".into()),
            "{rows:?}"
        );
        let audited: Vec<(String, String)> = sqlx::query_as(
            "SELECT action, resource_name FROM audit_log WHERE org_id = $1 AND actor = 'admin' \
             AND action LIKE '%.force_delete' ORDER BY id",
        )
        .bind(&org)
        .fetch_all(&db)
        .await
        .unwrap();
        assert_eq!(
            audited,
            [
                ("app.force_delete".into(), "d-web".into()),
                ("addon.force_delete".into(), "d-cache".into()),
                ("project.force_delete".into(), name.clone()),
                ("cluster.force_delete".into(), "west".into()),
            ]
        );
    });
}

#[test]
fn a_namespace_that_is_not_kubenests_is_refused_at_the_door_and_a_refused_project_deletes_at_once()
{
    run(async {
        let f = fixture().await;
        let mut admin = f.admin().await;
        let org = f.org();
        let east_id = f.system.agents["east"].cluster_id.clone();
        let east = f.env.cluster("east").unwrap().client().await.unwrap();
        let legacy = unique("legacy");
        Api::<Namespace>::all(east.clone())
            .patch(
                &legacy,
                &PatchParams::apply("someone-else").force(),
                &Patch::Apply(json!({"apiVersion": "v1", "kind": "Namespace",
                                     "metadata": {"name": legacy}})),
            )
            .await
            .unwrap();

        for namespace in ["kube-system", legacy.as_str()] {
            let (status, refused) = match admin
                .post(
                    &format!("/api/v1/orgs/{org}/projects"),
                    &json!({"name": unique("p"), "cluster_id": east_id, "namespace": namespace}),
                )
                .await
            {
                Ok(created) => (201, created),
                Err(kubenest_cli::api::ApiError::Status {
                    status,
                    field,
                    message,
                    ..
                }) => (status, json!({"field": field, "message": message})),
                Err(other) => panic!("{other}"),
            };
            assert_eq!(status, 422, "{namespace}: {refused}");
            assert_eq!(refused["field"], "namespace", "{refused}");
        }

        // The same project written with kubectl reaches the agent, which refuses it; deleting it
        // does not wait for a namespace it never owned.
        let mgmt = f.env.management().unwrap().client().await.unwrap();
        let name = unique("refused");
        let projects: Api<kubenest_crds::project::Project> =
            Api::namespaced(mgmt, &format!("org-{org}"));
        projects
            .patch(
                &name,
                &PatchParams::apply("kubectl").force(),
                &Patch::Apply(
                    json!({"apiVersion": "kubenest.io/v1alpha1", "kind": "Project",
                    "metadata": {"name": name},
                    "spec": {"cluster": "east", "namespace": legacy}}),
                ),
            )
            .await
            .unwrap();
        let mut id = String::new();
        eventually("the agent refused the namespace", CONVERGE, async || {
            let Some(project) = projects.get_opt(&name).await.unwrap() else {
                return false;
            };
            id = project.metadata.uid.clone().unwrap_or_default();
            project.status.and_then(|s| s.cluster_phase).as_deref() == Some("Failed")
        })
        .await;
        let answer = admin
            .delete(&format!("/api/v1/projects/{id}"))
            .await
            .unwrap();
        assert_eq!(answer["waiting_for"], json!([]), "{answer}");
        eventually(
            "the refused project is gone",
            Duration::from_secs(30),
            async || projects.get_opt(&name).await.unwrap().is_none(),
        )
        .await;
        let kept = Api::<Namespace>::all(east).get(&legacy).await.unwrap();
        assert!(kept.metadata.deletion_timestamp.is_none(), "never touched");
    });
}

/// Tries an agent's connection to a hub replica with `token`: the HTTP status it was refused
/// with, or the live socket.
async fn agent_connect(
    url: &str,
    token: &str,
) -> Result<
    tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>,
    u16,
> {
    let mut request = url.into_client_request().unwrap();
    let headers = request.headers_mut();
    headers.insert(
        "Sec-WebSocket-Protocol",
        kubenest_contracts::names::AGENT_SUBPROTOCOL
            .parse()
            .unwrap(),
    );
    headers.insert("Authorization", format!("Bearer {token}").parse().unwrap());
    match tokio_tungstenite::connect_async(request).await {
        Ok((socket, _)) => Ok(socket),
        Err(tokio_tungstenite::tungstenite::Error::Http(response)) => {
            Err(response.status().as_u16())
        }
        Err(other) => panic!("connect to {url}: {other}"),
    }
}

#[test]
fn a_rotation_through_the_api_cuts_the_live_session_and_no_hub_admits_the_old_token_after() {
    run(async {
        let f = fixture().await;
        let mut admin = f.admin().await;
        let org = f.org();
        let hubs: Vec<String> = f.system.hubs.iter().map(|h| h.url()).collect();
        assert_eq!(hubs.len(), 2);
        let registration = admin
            .post(
                &format!("/api/v1/orgs/{org}/clusters"),
                &json!({"name": unique("rot")}),
            )
            .await
            .unwrap();
        let cluster_id = registration["cluster_id"].as_str().unwrap().to_owned();
        let mut token = registration["connection_token"]
            .as_str()
            .unwrap()
            .to_owned();
        // Three rotations: a window after the answer in which a replica still admits the old
        // token would have to be missed three times.
        for round in 0..3 {
            let live_hub = &hubs[round % 2];
            let mut live = None;
            eventually("the live session is admitted", CONVERGE, async || {
                live = agent_connect(live_hub, &token).await.ok();
                live.is_some()
            })
            .await;
            let mut live = live.unwrap();
            let started = Instant::now();
            let cut = tokio::spawn(async move {
                while let Some(frame) = live.next().await {
                    match frame {
                        Ok(tokio_tungstenite::tungstenite::Message::Close(close)) => {
                            return (started.elapsed(), close.map(|c| u16::from(c.code)));
                        }
                        Ok(_) => {}
                        Err(_) => break,
                    }
                }
                (started.elapsed(), None)
            });
            let rotation = admin
                .post(
                    &format!("/api/v1/clusters/{cluster_id}/rotate-token"),
                    &json!({}),
                )
                .await
                .unwrap();
            let answered = started.elapsed();
            for hub in &hubs {
                let refused = agent_connect(hub, &token).await.err();
                assert_eq!(
                    refused,
                    Some(403),
                    "round {round}: {hub} still admits the old token right after the answer"
                );
            }
            assert_eq!(rotation["old_token_revoked"], true, "{rotation}");
            let (elapsed, code) = tokio::time::timeout(Duration::from_secs(10), cut)
                .await
                .expect("the live session was not cut")
                .unwrap();
            eprintln!(
                "round {round}: rotate answered after {answered:?}, live session cut after \
                 {elapsed:?}"
            );
            assert_eq!(code, Some(4003), "closed as revoked");
            assert!(
                elapsed <= Duration::from_secs(1),
                "the live session was cut {elapsed:?} after the rotate call"
            );
            token = rotation["connection_token"].as_str().unwrap().to_owned();
        }
    });
}
