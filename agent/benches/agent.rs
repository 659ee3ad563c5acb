//! Apply-to-Ready latency of one workload through the agent, against `kubectl apply` +
//! `kubectl rollout status` of the same Deployment on the same kwok cluster in the same run; and
//! the agent's resident memory while it manages 500 StackDeploys.
//!
//! The agent runs as its own (release) process, connected to a real hub; commands come from the
//! controllers' hub client. A sample through the agent is the time from sending `app.deploy` to
//! the `app.status` that reports the revision Running (command routed, StackDeploy stored,
//! Deployment applied, pods scheduled and made Ready by kwok, status observed and sent back).
//! A kubectl sample is `kubectl apply -f` of the Deployment the agent renders for the same
//! workload, then `kubectl rollout status` until it is available. Samples alternate.
//! `make bench BENCH=agent`; the last line is JSON.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // a benchmark aborts on error

#[path = "../tests/it/common/mod.rs"]
mod common;

use std::process::{Command, Stdio};
use std::sync::LazyLock;
use std::time::{Duration, Instant};

use common::{Backend, Hub, HubKey, app_ref, web_app};
use kube::api::Api;
use kubenest_contracts::{self as wire, AppPhase, Message};
use kubenest_testkit::bench::size;
use tokio_util::sync::CancellationToken;

// Full size under `make bench`; tiny under `make test`, which only checks that the benchmark
// still runs (kubenest_testkit::bench).
static SAMPLES: LazyLock<usize> = LazyLock::new(|| size(20, 2));
static MANAGED: LazyLock<usize> = LazyLock::new(|| size(500, 10));

fn percentile(sorted: &[f64], p: f64) -> f64 {
    let index = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[index.min(sorted.len() - 1)]
}

fn rss_mb(pid: u32) -> f64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let kb: f64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|l| l.split_whitespace().next())
        .and_then(|n| n.parse().ok())
        .unwrap();
    kb / 1024.0
}

async fn through_agent(backend: &Backend, project: &str, namespace: &str, i: usize) -> f64 {
    let id = uuid::Uuid::new_v4().to_string();
    let app = app_ref(&id, &format!("a{i}"), project, namespace);
    let started = Instant::now();
    backend.send(web_app(app, "r1", "nginx:1.27", 1, 120)).await;
    loop {
        let running = backend.events().iter().rev().any(|m| {
            matches!(m, Message::AppStatus(s) if s.app_id.as_str() == id && s.phase == AppPhase::Running)
        });
        if running {
            return started.elapsed().as_secs_f64() * 1000.0;
        }
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "app {i} never Running"
        );
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
}

fn through_kubectl(
    kubectl: &std::path::Path,
    kubeconfig: &std::path::Path,
    namespace: &str,
    i: usize,
) -> f64 {
    let app = app_ref("k", &format!("k{i}"), "p", namespace);
    let deploy = web_app(app.clone(), "r1", "nginx:1.27", 1, 120);
    let wire::Component::Workload(workload) = &deploy.components[0] else {
        unreachable!()
    };
    let inputs = kubenest_agent::render::WorkloadInputs {
        progress_deadline_seconds: 120,
        ..Default::default()
    };
    let objects = kubenest_agent::render::workload(&app, workload, &inputs).unwrap();
    let manifest = serde_json::to_string(&objects[0]).unwrap();
    let started = Instant::now();
    let mut apply = Command::new(kubectl)
        .arg(format!("--kubeconfig={}", kubeconfig.display()))
        .args(["apply", "-f", "-"])
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    use std::io::Write;
    apply
        .stdin
        .take()
        .unwrap()
        .write_all(manifest.as_bytes())
        .unwrap();
    assert!(apply.wait().unwrap().success());
    let status = Command::new(kubectl)
        .arg(format!("--kubeconfig={}", kubeconfig.display()))
        .args([
            "rollout",
            "status",
            "-n",
            namespace,
            &format!("deployment/k{i}-web"),
            "--timeout=60s",
        ])
        .stdout(Stdio::null())
        .status()
        .unwrap();
    assert!(status.success());
    started.elapsed().as_secs_f64() * 1000.0
}

#[tokio::main]
async fn main() {
    let env = kubenest_testkit::Environment::builder()
        .management("mgmt")
        .workload(
            "east",
            kubenest_testkit::NodePool {
                count: 3,
                max_pods: 250,
                ..Default::default()
            },
        )
        .start()
        .await
        .unwrap();
    let (mgmt, east) = (env.management().unwrap(), env.cluster("east").unwrap());
    let mgmt_client = mgmt.client().await.unwrap();
    common::system_namespace(&mgmt_client).await;
    let key = HubKey::new();
    let hub = Hub::prepare_at(mgmt, &key, "127.0.0.1:0");
    let url = hub.url.clone();
    let shutdown = CancellationToken::new();
    hub.start(shutdown.clone());
    let cluster = "c-bench";
    let backend = Backend::start(
        &url,
        key.signer.clone(),
        Api::namespaced(mgmt_client, common::SYSTEM),
        cluster,
        "acme",
        shutdown.clone(),
    );

    let dir = tempfile::tempdir().unwrap();
    let token_file = dir.path().join("token");
    let token = key
        .signer
        .cluster_token(&wire::Id::new(cluster), &wire::Id::new("acme"), 1)
        .unwrap();
    std::fs::write(&token_file, token).unwrap();
    let bins = kubenest_testkit::Binaries::locate().unwrap();
    let log = std::fs::File::create(dir.path().join("agent.log")).unwrap();
    let mut agent = Command::new(env!("CARGO_BIN_EXE_kubenest-agent"))
        .arg(format!("--kubeconfig={}", east.kubeconfig_path().display()))
        .arg(format!("--hub-url={url}"))
        .arg(format!("--token-file={}", token_file.display()))
        .arg(format!("--catalog={}", common::catalog().display()))
        .arg(format!("--helm={}", bins.helm.display()))
        .args([
            "--install-crds",
            "--heartbeat-seconds=5",
            "--admin-listen=127.0.0.1:0",
        ])
        .env("RUST_LOG", "warn")
        .stdin(Stdio::null())
        .stdout(log.try_clone().unwrap())
        .stderr(log)
        .spawn()
        .unwrap();

    let (project, namespace) = common::project(&backend, "bench").await;
    let kubectl_ns = format!("{namespace}-kubectl");
    let status = Command::new(&bins.kubectl)
        .arg(format!("--kubeconfig={}", east.kubeconfig_path().display()))
        .args(["create", "namespace", &kubectl_ns])
        .stdout(Stdio::null())
        .status()
        .unwrap();
    assert!(status.success());
    // One warm-up of each path (first requests pay for discovery and connections).
    through_agent(&backend, &project, &namespace, 9999).await;
    through_kubectl(&bins.kubectl, east.kubeconfig_path(), &kubectl_ns, 9999);

    let (mut agent_ms, mut kubectl_ms) = (Vec::new(), Vec::new());
    for i in 0..*SAMPLES {
        agent_ms.push(through_agent(&backend, &project, &namespace, i).await);
        kubectl_ms.push(through_kubectl(
            &bins.kubectl,
            east.kubeconfig_path(),
            &kubectl_ns,
            i,
        ));
    }
    agent_ms.sort_by(f64::total_cmp);
    kubectl_ms.sort_by(f64::total_cmp);
    let (agent_p50, kubectl_p50) = (percentile(&agent_ms, 0.5), percentile(&kubectl_ms, 0.5));
    eprintln!("agent ms: {agent_ms:?}\nkubectl ms: {kubectl_ms:?}");

    // Memory while managing 500 StackDeploys (the ones above count); `converge_more_s` is how
    // long the remaining ones took to run, all sent at once.
    let started = Instant::now();
    let have = *SAMPLES + 1;
    let mut ids = Vec::new();
    for i in have..*MANAGED {
        let id = uuid::Uuid::new_v4().to_string();
        let app = app_ref(&id, &format!("m{i}"), &project, &namespace);
        backend.send(web_app(app, "r1", "nginx:1.27", 1, 600)).await;
        ids.push(id);
    }
    loop {
        let running: std::collections::BTreeSet<String> = backend
            .events()
            .iter()
            .filter_map(|m| match m {
                Message::AppStatus(s) if s.phase == AppPhase::Running => Some(s.app_id.to_string()),
                _ => None,
            })
            .collect();
        let done = ids.iter().filter(|id| running.contains(*id)).count();
        if done == ids.len() {
            break;
        }
        assert!(
            started.elapsed() < Duration::from_secs(600),
            "only {done} of {} Running",
            ids.len()
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let converge_s = started.elapsed().as_secs_f64();
    tokio::time::sleep(size(Duration::from_secs(5), Duration::from_millis(500))).await;
    let rss = rss_mb(agent.id());
    agent.kill().unwrap();
    let _ = agent.wait();
    shutdown.cancel();

    let report = serde_json::json!({
        "benchmark": "agent",
        "samples": *SAMPLES,
        "agent_ready_p50_ms": (agent_p50 * 10.0).round() / 10.0,
        "agent_ready_p99_ms": (percentile(&agent_ms, 0.99) * 10.0).round() / 10.0,
        "kubectl_ready_p50_ms": (kubectl_p50 * 10.0).round() / 10.0,
        "kubectl_ready_p99_ms": (percentile(&kubectl_ms, 0.99) * 10.0).round() / 10.0,
        "ratio": (agent_p50 / kubectl_p50 * 1000.0).round() / 1000.0,
        "overhead_p50_ms": ((agent_p50 - kubectl_p50) * 10.0).round() / 10.0,
        "agent_rss_mb_500": (rss * 10.0).round() / 10.0,
        "stack_deploys": *MANAGED,
        "converge_more_s": (converge_s * 10.0).round() / 10.0,
    });
    println!("{report}");
    std::process::exit(0);
}
