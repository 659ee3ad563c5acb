//! Work the agent accepted survives what goes wrong around it: the hub going away, and the agent
//! itself being killed mid-deploy. Each test has a hub, a backend session and an agent of its
//! own (its own agent namespace on the shared workload cluster).

use crate::common;

use std::process::Command;
use std::time::Duration;

use crate::common::{Backend, Hub, HubKey, app_ref, eventually, project, reference_app, web_app};
use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet};
use kube::api::{Api, ListParams};
use kubenest_agent::crd::StackDeploy;
use kubenest_contracts::{self as wire, AppPhase, Message};
use kubenest_testkit::ManagedProcess;
use tokio_util::sync::CancellationToken;

const LONG: Duration = Duration::from_secs(90);

struct Setup {
    env: &'static kubenest_testkit::Environment,
    key: HubKey,
    leases: Api<k8s_openapi::api::coordination::v1::Lease>,
}

async fn setup() -> Setup {
    let env = kubenest_testkit::shared().await.unwrap();
    let mgmt = env.management().unwrap();
    let client = mgmt.client().await.unwrap();
    common::system_namespace(&client).await;
    Setup {
        env,
        key: HubKey::new(),
        leases: Api::namespaced(client, common::SYSTEM),
    }
}

fn token(key: &HubKey, cluster: &str) -> String {
    key.signer
        .cluster_token(&wire::Id::new(cluster), &wire::Id::new("acme"), 1)
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn accepted_work_converges_while_the_hub_is_away_and_is_resynced_on_reconnect() {
    let s = setup().await;
    let (mgmt, east) = (s.env.management().unwrap(), s.env.cluster("east").unwrap());
    let hub = Hub::prepare_at(mgmt, &s.key, "127.0.0.1:0");
    let (address, url) = (hub.address(), hub.url.clone());
    let stop_hub = CancellationToken::new();
    let hub_task = hub.start(stop_hub.clone());
    let shutdown = CancellationToken::new();
    let _stop = shutdown.clone().drop_guard();
    let cluster = "c-outage";
    let backend = Backend::start(
        &url,
        s.key.signer.clone(),
        s.leases.clone(),
        cluster,
        "acme",
        shutdown.clone(),
    );
    let bare = common::bare_repository();
    let config = common::agent_config(
        east,
        &url,
        token(&s.key, cluster),
        cluster,
        "acme",
        &bare,
        "kubenest-agent-outage",
    )
    .await;
    tokio::spawn(kubenest_agent::run(config, shutdown.clone()));

    let (project, namespace) = project(&backend, "outage").await;
    let id = uuid::Uuid::new_v4().to_string();
    let app = app_ref(&id, "shop", &project, &namespace);
    backend
        .accept(web_app(app, "r1", "nginx:1.27", 2, 120))
        .await;

    // The hub goes away the moment the command is accepted.
    stop_hub.cancel();
    hub_task.await.unwrap();
    let client = east.client().await.unwrap();
    let held = Api::<StackDeploy>::namespaced(client.clone(), "kubenest-agent-outage");
    let name = format!("app-{id}");
    eventually(
        "the App Running on the cluster without a hub",
        LONG,
        async || {
            held.get(&name)
                .await
                .unwrap()
                .status
                .and_then(|s| s.phase)
                .as_deref()
                == Some("Running")
        },
    )
    .await;
    let deployment = Api::<Deployment>::namespaced(client.clone(), &namespace)
        .get("shop-web")
        .await
        .unwrap();
    assert_eq!(deployment.status.unwrap().ready_replicas, Some(2));

    // The hub comes back where it was: the agent reconnects on its own and resyncs.
    let seen = backend.events.lock().unwrap().len();
    let hub = Hub::prepare_at(mgmt, &s.key, &address);
    hub.start(shutdown.clone());
    let after = || {
        backend.events.lock().unwrap()[seen..]
            .iter()
            .map(|e| e.message.clone())
            .collect::<Vec<_>>()
    };
    eventually("a snapshot and the App's status after reconnecting", LONG, async || {
        let events = after();
        let snapshot = events.iter().any(|m| matches!(m, Message::Snapshot(s)
            if s.stack_deploys.iter().any(|e| e.app_id.as_str() == id && e.revision == "r1" && e.phase == AppPhase::Running)));
        let status = events.iter().any(|m| matches!(m, Message::AppStatus(s)
            if s.app_id.as_str() == id && s.phase == AppPhase::Running && s.observed_revision == "r1"));
        snapshot && status
    })
    .await;
    // The snapshot's checksum is the controllers' checksum of the same command.
    let expected = web_app(
        app_ref(&id, "shop", &project, &namespace),
        "r1",
        "nginx:1.27",
        2,
        120,
    )
    .checksum();
    let reported = after().into_iter().find_map(|m| match m {
        Message::Snapshot(s) => s
            .stack_deploys
            .into_iter()
            .find(|e| e.app_id.as_str() == id),
        _ => None,
    });
    assert_eq!(reported.unwrap().checksum, expected);
}

/// The agent as a real process, killed with the test (also when it fails).
fn spawn_agent(
    east: &kubenest_testkit::Cluster,
    url: &str,
    token_file: &std::path::Path,
    namespace: &str,
    gitops: &std::path::Path,
    work: &std::path::Path,
    log: &std::path::Path,
) -> ManagedProcess {
    let bins = kubenest_testkit::Binaries::locate().unwrap();
    let mut command = Command::new(env!("CARGO_BIN_EXE_kubenest-agent"));
    command
        .arg(format!("--kubeconfig={}", east.kubeconfig_path().display()))
        .arg(format!("--hub-url={url}"))
        .arg(format!("--token-file={}", token_file.display()))
        .arg(format!("--namespace={namespace}"))
        .arg(format!("--catalog={}", common::catalog().display()))
        .arg(format!("--helm={}", bins.helm.display()))
        .arg(format!("--gitops-repo={}", gitops.display()))
        .arg(format!("--gitops-workdir={}", work.display()))
        .args([
            "--heartbeat-seconds=2",
            "--backoff-max-seconds=2",
            "--install-crds",
            "--admin-listen=127.0.0.1:0",
        ]);
    ManagedProcess::spawn("agent", command, log.to_owned()).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_agent_killed_mid_deploy_converges_after_restart_without_doing_work_twice() {
    let s = setup().await;
    let (mgmt, east) = (s.env.management().unwrap(), s.env.cluster("east").unwrap());
    let hub = Hub::prepare_at(mgmt, &s.key, "127.0.0.1:0");
    let url = hub.url.clone();
    let shutdown = CancellationToken::new();
    let _stop = shutdown.clone().drop_guard();
    hub.start(shutdown.clone());
    let cluster = "c-restart";
    let backend = Backend::start(
        &url,
        s.key.signer.clone(),
        s.leases.clone(),
        cluster,
        "acme",
        shutdown.clone(),
    );
    let dir = tempfile::tempdir().unwrap();
    let token_file = dir.path().join("token");
    std::fs::write(&token_file, token(&s.key, cluster)).unwrap();
    let bare = common::bare_repository();
    let (work, log) = (dir.path().join("clone"), dir.path().join("agent.log"));
    let agent_ns = "kubenest-agent-restart";
    let mut agent = spawn_agent(east, &url, &token_file, agent_ns, &bare, &work, &log);

    let (project, namespace) = project(&backend, "restart").await;
    let id = uuid::Uuid::new_v4().to_string();
    let deploy = reference_app(
        app_ref(&id, "shop", &project, &namespace),
        "r1",
        "nginx:1.27",
        2,
    );
    backend.accept(deploy.clone()).await;
    // Killed mid-deploy: accepted, not yet converged.
    agent.kill();

    let mut agent = spawn_agent(east, &url, &token_file, agent_ns, &bare, &work, &log);
    // The controllers re-send what is not yet reported observed: harmless.
    backend.accept(deploy.clone()).await;
    let status = backend
        .app_status("Running after the restart", LONG, &id, |s| {
            s.phase == AppPhase::Running
        })
        .await;
    assert_eq!(status.observed_revision, "r1");

    // No work done twice: one StackDeploy, the Deployment at its first generation with one
    // ReplicaSet, and one GitOps commit for the addon.
    let client = east.client().await.unwrap();
    let held = Api::<StackDeploy>::namespaced(client.clone(), agent_ns)
        .list(&ListParams::default().labels(&format!("kubenest.io/app-id={id}")))
        .await
        .unwrap();
    assert_eq!(held.items.len(), 1);
    let web = Api::<Deployment>::namespaced(client.clone(), &namespace)
        .get("shop-web")
        .await
        .unwrap();
    assert_eq!(
        web.metadata.generation,
        Some(1),
        "the Deployment was changed after its first apply"
    );
    let sets = Api::<ReplicaSet>::namespaced(client.clone(), &namespace)
        .list(&ListParams::default().labels("kubenest.io/component=web"))
        .await
        .unwrap();
    assert_eq!(sets.items.len(), 1);
    let commits = Command::new("git")
        .arg(format!("--git-dir={}", bare.display()))
        .args([
            "log",
            "--format=%H",
            "main",
            "--",
            &format!("clusters/{cluster}/addons/{namespace}-shop-db"),
        ])
        .output()
        .unwrap();
    assert_eq!(String::from_utf8_lossy(&commits.stdout).lines().count(), 1);
    agent.kill();
}
