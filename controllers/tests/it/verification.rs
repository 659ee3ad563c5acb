//! Verified deployments against the whole management plane (every controller, a real hub
//! replica, the history on PostgreSQL, a real management kube-apiserver) with a scripted agent
//! that reports verdicts as the real one does (`verification.result`): a failed revision is
//! rolled back by kubenest to the last one that passed, with the verdict on its row and as its
//! reason; a failed rollback stops the automation with a critical alert; a verdict on a
//! revision a person has since replaced is never acted on.

use std::time::Duration;

use crate::common::tenant::{spec, tenant};
use kube::ResourceExt;
use kubenest_contracts as wire;
use kubenest_crds::app::{App, AppStatus};
use serde_json::json;

const WITHIN: Duration = Duration::from_secs(40);

/// A verdict on `revision` of App `app_id`.
fn verdict(
    app_id: &str,
    revision: &str,
    verdict: wire::Verdict,
    reason: &str,
) -> wire::VerificationResult {
    let now = chrono::Utc::now();
    wire::VerificationResult {
        app_id: wire::Id::new(app_id),
        revision: revision.into(),
        verdict,
        reason: reason.into(),
        window_seconds: 30,
        started_at: now - chrono::Duration::seconds(30),
        signals: vec![wire::Signal {
            name: "error_ratio".into(),
            value: 0.3,
            baseline: Some(0.0),
            threshold: Some(0.05),
            failed: verdict == wire::Verdict::Failed,
        }],
        observed_at: now,
    }
}

fn current(status: &AppStatus) -> (String, String) {
    (
        status.revision.clone().unwrap_or_default(),
        status.deployment_id.clone().unwrap_or_default(),
    )
}

#[tokio::test]
async fn a_failed_revision_is_rolled_back_to_the_last_that_passed_once_and_no_more() {
    let t = tenant("verify").await;
    t.project("shop", "shop").await;
    let mut app = App::new("web", spec("shop", "shop:1"));
    app.spec.verification = Some(
        serde_json::from_value(json!({"windowSeconds": 30, "onFailure": "rollback"})).unwrap(),
    );
    let created = t.apps().create(&Default::default(), &app).await.unwrap();
    let uid = created.uid().unwrap();
    let first = t.running("web").await;
    let (r1, d1) = current(first.status.as_ref().unwrap());
    // The deploy carries the window to the agent.
    let deploy = t
        .agent
        .received()
        .into_iter()
        .rev()
        .find_map(|e| match e.message {
            wire::Message::AppDeploy(d) if d.revision == r1 => Some(d),
            _ => None,
        })
        .unwrap();
    assert_eq!(deploy.verification.unwrap().window_seconds, 30);
    t.agent.send(verdict(
        &uid,
        &r1,
        wire::Verdict::Passed,
        "no signal crossed its threshold in 30s",
    ));
    t.until("web", WITHIN, |s| {
        s.verification
            .as_ref()
            .is_some_and(|v| v.verdict == "Passed")
    })
    .await;

    // A bad change: Failed, and kubenest rolls back to r1's deployment by itself.
    t.merge(
        "web",
        json!({"spec": {"components": [{"name": "web", "workload": {
        "image": "shop:2", "replicas": 2, "port": 8080}}]}}),
    )
    .await;
    let second = t
        .until("web", WITHIN, |s| {
            s.revision.as_deref() != Some(r1.as_str()) && s.phase.as_deref() == Some("Running")
        })
        .await;
    let (r2, d2) = current(second.status.as_ref().unwrap());
    t.agent.send(verdict(
        &uid,
        &r2,
        wire::Verdict::Failed,
        "error_ratio 0.3 above its threshold 0.05 (window 30s)",
    ));
    let back = t
        .until("web", WITHIN, |s| {
            s.revision.as_deref() == Some(r1.as_str())
                && s.deployment_id.as_deref() != Some(d1.as_str())
                && s.phase.as_deref() == Some("Running")
        })
        .await;
    let (_, d3) = current(back.status.as_ref().unwrap());
    assert_eq!(
        back.spec.components[0]
            .workload
            .as_ref()
            .unwrap()
            .image
            .as_deref(),
        Some("shop:1")
    );
    let history = t.history.app_history(&t.org, &uid, 10).await.unwrap();
    let rollback = history.iter().find(|d| d.id.to_string() == d3).unwrap();
    assert_eq!(rollback.actor, "kubenest");
    assert_eq!(
        rollback.rollback_of.map(|id| id.to_string()),
        Some(d1.clone())
    );
    assert!(
        rollback
            .reason
            .starts_with("verification failed: error_ratio 0.3"),
        "{}",
        rollback.reason
    );
    let failed = history.iter().find(|d| d.id.to_string() == d2).unwrap();
    assert_eq!(failed.verification.as_ref().unwrap()["verdict"], "Failed");
    assert_eq!(
        failed.verification.as_ref().unwrap()["signals"][0]["threshold"],
        0.05
    );
    let annotations = back.annotations();
    assert!(
        !annotations.contains_key("kubenest.io/rollback-reason"),
        "{annotations:?}"
    );

    // The rollback fails its verification too: no further action, the App says why, and a
    // critical alert opens.
    let (r3, _) = current(back.status.as_ref().unwrap());
    t.agent.send(verdict(
        &uid,
        &r3,
        wire::Verdict::Failed,
        "restarts 4 above its threshold 1 (window 30s)",
    ));
    let stopped = t
        .until("web", WITHIN, |s| {
            s.verification
                .as_ref()
                .and_then(|v| v.action.as_deref())
                .is_some_and(|a| a.starts_with("automation stopped"))
        })
        .await;
    assert_eq!(
        current(stopped.status.as_ref().unwrap()).1,
        d3,
        "nothing more was deployed"
    );
    let alerts = t.history.alerts();
    let mut open = Vec::new();
    crate::common::eventually_within("the critical alert", WITHIN, async || {
        open = alerts
            .list(&t.org, Some(kubenest_store::AlertState::Open), 100)
            .await
            .unwrap();
        open.iter()
            .any(|a| a.kind == "verification_failed" && a.subject_id == uid)
    })
    .await;
    let alert = open
        .iter()
        .find(|a| a.kind == "verification_failed")
        .unwrap();
    assert_eq!(alert.severity, "critical");
}

#[tokio::test]
async fn a_verdict_on_a_revision_a_person_replaced_is_never_acted_on() {
    let t = tenant("cancel").await;
    t.project("shop", "shop").await;
    let mut app = App::new("web", spec("shop", "shop:1"));
    app.spec.verification = Some(serde_json::from_value(json!({"windowSeconds": 60})).unwrap());
    let created = t.apps().create(&Default::default(), &app).await.unwrap();
    let uid = created.uid().unwrap();
    let first = t.running("web").await;
    let (r1, _) = current(first.status.as_ref().unwrap());
    // A person changes the App during r1's window; r1's late verdict then says Failed.
    t.merge(
        "web",
        json!({"spec": {"components": [{"name": "web", "workload": {
        "image": "shop:2", "replicas": 2, "port": 8080}}]}}),
    )
    .await;
    let second = t
        .until("web", WITHIN, |s| {
            s.revision.as_deref() != Some(r1.as_str()) && s.phase.as_deref() == Some("Running")
        })
        .await;
    let (r2, d2) = current(second.status.as_ref().unwrap());
    t.agent.send(verdict(
        &uid,
        &r1,
        wire::Verdict::Failed,
        "oom_kills 1 above its threshold 0 (window 60s)",
    ));
    // The App's reports are handled in order: once r2's verdict shows, r1's was handled.
    t.agent.send(verdict(
        &uid,
        &r2,
        wire::Verdict::Passed,
        "no signal crossed its threshold in 60s",
    ));
    let after = t
        .until("web", WITHIN, |s| {
            s.verification.as_ref().is_some_and(|v| v.revision == r2)
        })
        .await;
    let status = after.status.unwrap();
    assert_eq!(current(&status), (r2, d2), "nothing rolled back");
    let history = t.history.app_history(&t.org, &uid, 10).await.unwrap();
    assert!(history.iter().all(|d| d.actor != "kubenest"), "{history:?}");
    assert!(
        history.iter().all(|d| d
            .verification
            .as_ref()
            .is_none_or(|v| v["verdict"] != "Failed")),
        "the late verdict was not recorded"
    );
}
