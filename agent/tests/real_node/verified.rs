//! Verified deployments on the real node (the fixture of `real_node.rs`), with the demo app
//! misbehaving on purpose and a second workload of the same App sending it traffic
//! (`DEMO_LOAD_URL`): each revision is watched for its window once it runs, and the agent's
//! `verification.result` says what its pods and its own metrics (scraped through the API
//! server's pod proxy) showed against the last revision that passed. Three Apps, each in a
//! project of its own, are judged at the same time:
//!
//! - a healthy revision with traffic `Passed`;
//! - a revision answering 30 % of its requests with 500 `Failed`, naming the ratio, the
//!   baseline and the threshold, before its window ends;
//! - a revision leaking past its memory limit `Failed` on its OOM kill;
//! - a revision nobody sends a request `Inconclusive`: "no requests observed".

use std::time::{Duration, Instant};

use crate::common::{SYSTEM, app_ref, project};
use crate::real_node::fixture;
use kube::api::Api;
use kubenest_agent::crd::StackDeploy;
use kubenest_contracts::{self as wire, Message};
use serde_json::{Value, json};

const REAL: Duration = Duration::from_secs(180);
const WINDOW: u32 = 30;

/// App `shop`: the demo app as `web` with `env` (and `memory_limit`), and, with `traffic`, a
/// `load` workload sending it 20 requests a second.
fn shop(
    app: wire::AppRef,
    revision: &str,
    image: &str,
    env: Value,
    memory_limit: Option<&str>,
    traffic: bool,
) -> wire::AppDeploy {
    let mut components = vec![json!(
        {"kind": "workload", "name": "web", "source": {"type": "image", "image": image},
         "replicas": 1, "port": 8080, "env": env,
         "resources": {"memory_limit": memory_limit},
         "health_check": {"path": "/healthz", "initial_delay_seconds": 0, "period_seconds": 2}}
    )];
    if traffic {
        components.push(json!(
            {"kind": "workload", "name": "load", "source": {"type": "image", "image": image},
             "replicas": 1, "env": [
                {"name": "DEMO_LOAD_URL", "value": "http://shop-web:8080/"},
                {"name": "DEMO_LOAD_PER_SECOND", "value": "20"}]}
        ));
    }
    serde_json::from_value(json!({
        "app": app, "revision": revision, "progress_deadline_seconds": 180,
        "components": components,
        "verification": {"window_seconds": WINDOW, "metrics": {"port": 8080, "path": "/metrics"}},
    }))
    .unwrap()
}

/// The verdict on `revision` of App `id`; on a timeout, what its StackDeploy kept.
async fn verdict(id: &str, revision: &str) -> wire::VerificationResult {
    let f = fixture();
    let start = Instant::now();
    loop {
        let found = f.backend.events().into_iter().rev().find_map(|m| match m {
            Message::VerificationResult(r) if r.app_id.as_str() == id && r.revision == revision => {
                Some(r)
            }
            _ => None,
        });
        if let Some(found) = found {
            return found;
        }
        if start.elapsed() > REAL {
            let stacks = Api::<StackDeploy>::namespaced(f.edge.client().await.unwrap(), SYSTEM);
            let held = stacks.get(&format!("app-{id}")).await.unwrap();
            panic!("no verdict on {revision}: {:#?}", held.status);
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

/// A new App `shop` in a project of its own: its id and reference.
async fn new_app(prefix: &str) -> (String, wire::AppRef) {
    let (project, namespace) = project(&fixture().backend, prefix).await;
    let id = uuid::Uuid::new_v4().to_string();
    let app = app_ref(&id, "shop", &project, &namespace);
    (id, app)
}

/// A healthy revision with traffic passes at the end of its window; then 30 % errors fail the
/// next before its window ends, with the numbers.
async fn errors_fail_against_a_revision_that_passed() {
    let f = fixture();
    let (id, app) = new_app("verify").await;
    f.backend
        .accept(shop(app.clone(), "r1", &f.demo, json!([]), None, true))
        .await;
    let passed = verdict(&id, "r1").await;
    assert_eq!(passed.verdict, wire::Verdict::Passed, "{passed:?}");
    let requests = passed
        .signals
        .iter()
        .find(|s| s.name == "requests")
        .unwrap();
    assert!(requests.value > 0.0, "{passed:?}");

    let bad = Instant::now();
    let erring = json!([{"name": "DEMO_ERROR_RATIO", "value": "0.3"}]);
    f.backend
        .accept(shop(app, "r2", &f.demo, erring, None, true))
        .await;
    let failed = verdict(&id, "r2").await;
    let took = bad.elapsed();
    assert_eq!(failed.verdict, wire::Verdict::Failed, "{failed:?}");
    let ratio = failed
        .signals
        .iter()
        .find(|s| s.name == "error_ratio")
        .unwrap();
    assert!((ratio.value - 0.3).abs() < 0.1, "{failed:?}");
    assert_eq!((ratio.baseline, ratio.threshold), (Some(0.0), Some(0.05)));
    // The measured ratio wanders around 0.3; the words around it do not.
    assert!(
        failed.reason.starts_with("error_ratio 0.")
            && failed
                .reason
                .contains(" above its threshold 0.05, previous revision 0 "),
        "{}",
        failed.reason
    );
    assert!(
        took < Duration::from_secs(u64::from(WINDOW) + 60),
        "judged before its window ended: {took:?}"
    );
    eprintln!("from the bad revision's deploy to its Failed verdict: {took:?}");
}

/// A leak past the memory limit fails on its OOM kill.
async fn a_leak_fails_on_its_oom_kill() {
    let f = fixture();
    let (id, app) = new_app("leak").await;
    let leaking = json!([{"name": "DEMO_LEAK_MB_PER_S", "value": "4"}]);
    f.backend
        .accept(shop(app, "r1", &f.demo, leaking, Some("96Mi"), true))
        .await;
    let killed = verdict(&id, "r1").await;
    assert_eq!(killed.verdict, wire::Verdict::Failed, "{killed:?}");
    assert!(killed.reason.contains("oom_kills"), "{}", killed.reason);
}

/// No traffic: Inconclusive, never a pass.
async fn silence_is_inconclusive() {
    let f = fixture();
    let (id, app) = new_app("quiet").await;
    f.backend
        .accept(shop(app, "r1", &f.demo, json!([]), None, false))
        .await;
    let silent = verdict(&id, "r1").await;
    assert_eq!(
        (silent.verdict, silent.reason.as_str()),
        (wire::Verdict::Inconclusive, "no requests observed"),
        "{silent:?}"
    );
}

#[tokio::test]
async fn each_revision_of_the_demo_is_judged_by_its_pods_and_its_metrics() {
    tokio::join!(
        errors_fail_against_a_revision_that_passed(),
        a_leak_fails_on_its_oom_kill(),
        silence_is_inconclusive(),
    );
}
