//! Decide (pure): from what the components came to, the App's phase, the status to write, the
//! reports to send and when to look again.

use std::time::Duration;

use kubenest_contracts::{self as wire, AppPhase};
use serde_json::{Value, json};

use super::assess::Pass;
use super::facts::Facts;
use super::ready;
use crate::crd::StackDeployStatus;
use crate::report::phase_name;

/// What the components add up to (pure).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Tally {
    pub rejected: bool,
    pub failed: bool,
    pub blocked: bool,
    pub all_ready: bool,
    pub workloads_at_zero: bool,
    pub paused: bool,
    pub expired: bool,
}

/// The App's phase from its components (pure).
pub fn phase(t: &Tally) -> AppPhase {
    if t.rejected || t.failed || t.blocked {
        AppPhase::Failed
    } else if t.paused && t.workloads_at_zero {
        AppPhase::Paused
    } else if t.all_ready && !t.paused {
        AppPhase::Running
    } else if t.expired {
        AppPhase::Failed
    } else {
        AppPhase::Deploying
    }
}

/// What a pass does once the components are applied.
#[derive(Debug)]
pub struct Decision {
    /// The StackDeploy's new status.
    pub status: StackDeployStatus,
    /// The status differs from the last written: write it.
    pub changed: bool,
    /// What an `app.status` carries changed: report it (before the write).
    pub report: bool,
    /// The drift changed: report it.
    pub drift: Option<wire::DriftReport>,
    pub requeue: Duration,
}

/// The decision of a pass over `facts` whose components came to `pass`.
pub fn decide(facts: &Facts<'_>, pass: Pass) -> Decision {
    let deploy = &facts.held.spec.deploy;
    let (old, now) = (&facts.old, facts.now);
    let mut new = old.clone();
    if facts.fresh_revision() || old.rollout_started_at.is_none() {
        new.observed_revision = Some(deploy.revision.clone());
        new.rollout_started_at = Some(now);
    }
    new.rejection = facts.rejection.clone();

    let deadline = new.rollout_started_at.unwrap_or(now)
        + chrono::Duration::seconds(i64::from(deploy.progress_deadline_seconds));
    let expired = now > deadline;
    // Past the App's deadline, a workload still not ready is blocked too: most kinds have no
    // progress deadline of their own to say so.
    let blocked = if pass.blocked.is_empty() && expired && !deploy.paused {
        pass.stalled
    } else {
        pass.blocked
    };
    let tally = Tally {
        rejected: facts.rejection.is_some(),
        failed: pass.failed,
        blocked: !blocked.is_empty(),
        all_ready: pass.all_ready,
        workloads_at_zero: pass.workloads_at_zero,
        paused: deploy.paused,
        expired,
    };
    let phase = phase(&tally);
    new.phase = Some(phase_name(phase).into());
    new.components = pass.components;
    new.exports = pass.exports;
    new.ingress_address = pass.ingress;
    new.gitops_error = pass.gitops_error;

    // Drift: blocked_sync wins; recoverable drift was healed by the apply.
    let (class, details) = if !blocked.is_empty() {
        (Some("blocked_sync"), blocked)
    } else if !pass.drift.is_empty() {
        (Some("recoverable"), pass.drift)
    } else {
        (None, vec![])
    };
    let drift_changed = old.drift_class.as_deref() != class || old.drift != details;
    // A healed drift is reported and then cleared on the next pass.
    new.drift_class = class.map(str::to_owned);
    new.drift = details.clone();
    if let Some(restart) = &facts.held.spec.restart_id {
        new.handled_restart = Some(restart.clone());
    }
    ready::observe(&mut new, phase, facts.held, now);
    let drift = drift_changed.then(|| wire::DriftReport {
        app_id: deploy.app.app_id.clone(),
        revision: deploy.revision.clone(),
        class: if class == Some("blocked_sync") {
            wire::DriftClass::BlockedSync
        } else {
            wire::DriftClass::Recoverable
        },
        details,
        observed_at: now,
    });

    let next = match phase {
        AppPhase::Running | AppPhase::Paused => Duration::from_secs(60),
        AppPhase::Failed if tally.rejected => Duration::from_secs(10),
        AppPhase::Failed => Duration::from_secs(30),
        _ => (deadline - now)
            .to_std()
            .unwrap_or(Duration::from_secs(1))
            .clamp(Duration::from_secs(1), Duration::from_secs(5)),
    };
    let changed = new != *old;
    let report = reportable(old) != reportable(&new);
    Decision {
        changed,
        report,
        status: new,
        drift,
        // Drift just healed: look again soon, to report it cleared.
        requeue: if class == Some("recoverable") {
            Duration::from_millis(500)
        } else {
            next
        },
    }
}

/// The merge patch that turns the status `old` into `new`. A merge patch keeps what it does not
/// mention, so a field `new` no longer has (a drift healed, a rejection lifted) is sent as null.
pub fn status_patch(old: &StackDeployStatus, new: &StackDeployStatus) -> Value {
    let mut status = serde_json::to_value(new).unwrap_or_default();
    if let (Value::Object(status), Ok(Value::Object(old))) =
        (&mut status, serde_json::to_value(old))
    {
        for key in old.keys() {
            status.entry(key.clone()).or_insert(Value::Null);
        }
    }
    json!({ "status": status })
}

/// The part of a status that an `app.status` event carries.
fn reportable(status: &StackDeployStatus) -> impl PartialEq + '_ {
    (
        &status.phase,
        &status.observed_revision,
        &status.components,
        &status.exports,
        &status.ingress_address,
        &status.rejection,
        &status.gitops_error,
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::crd::{StackDeploy, StackDeploySpec};
    use crate::stack::assess::assess;
    use crate::stack::plan::{Work, plan};
    use crate::stack::rollout::Answer;

    fn held(components: Value) -> StackDeploy {
        let deploy = serde_json::from_value(json!({
            "app": {"app_id": "a1", "name": "shop", "project_id": "p1", "namespace": "shop"},
            "revision": "r1", "progress_deadline_seconds": 60, "components": components,
        }))
        .unwrap();
        StackDeploy::new(
            "app-a1",
            StackDeploySpec {
                deploy,
                restart_id: None,
            },
        )
    }

    fn facts(held: &StackDeploy, old: StackDeployStatus) -> Facts<'_> {
        Facts {
            held,
            old,
            now: chrono::Utc::now(),
            rejection: None,
            full_pass_due: false,
            push_prefix: "builds",
            builds: Default::default(),
            live: Default::default(),
            certificates: Default::default(),
        }
    }

    fn web() -> Value {
        json!([{"kind": "workload", "name": "web", "source": {"type": "image", "image": "nginx"}, "replicas": 2}])
    }

    /// The Deployment as the apply answered it: `ready` of 2 replicas, its generation observed.
    fn deployment(ready: u32) -> Value {
        json!({
            "apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "shop-web", "namespace": "shop", "generation": 2},
            "spec": {"replicas": 2},
            "status": {"observedGeneration": 2, "replicas": 2, "readyReplicas": ready,
                "updatedReplicas": 2, "availableReplicas": ready},
        })
    }

    /// The answer of a plan with one step, a workload's Deployment.
    fn answered(live: Value) -> Vec<Answer> {
        let id = crate::apply::id_of(&live).unwrap();
        vec![Answer::Objects {
            live: vec![(id, live)],
            refused: None,
        }]
    }

    /// A chart workload's outcome: `ready`, with `desired` replicas in all.
    fn chart_outcome(ready: bool, desired: u32) -> Vec<Answer> {
        vec![Answer::Chart(Ok(crate::addon::AddonOutcome {
            objects: Default::default(),
            ready,
            ready_replicas: if ready { desired } else { 0 },
            desired_replicas: desired,
            message: String::new(),
            export: wire::PublishedExport {
                component: wire::Name::new("web"),
                secret: wire::Name::new("shop-web-exports"),
                keys: Vec::new(),
            },
            git_commit: None,
            git_error: None,
            drift: Vec::new(),
            blocked: Vec::new(),
            stalled: Vec::new(),
        }))]
    }

    #[test]
    fn a_paused_chart_workload_is_paused_only_once_what_it_runs_is_stopped() {
        let chart = json!([{"kind": "workload", "name": "web", "replicas": 1, "source": {
            "type": "helm",
            "chart": {"repository": "https://charts.example", "name": "web", "version": "0.1.0"},
            "values": {}}}]);
        let mut held = held(chart);
        held.spec.deploy.paused = true;
        let facts = facts(&held, StackDeployStatus::default());
        let plan = plan(&facts);
        let Work::Chart(target) = &plan.steps[0].work else {
            panic!("a Helm workload is a chart step");
        };
        assert!(target.paused, "the chart is rendered stopped");
        let phase =
            |answers: Vec<Answer>| decide(&facts, assess(&plan, &answers, true)).status.phase;
        assert_eq!(
            phase(chart_outcome(false, 0)).as_deref(),
            Some("Deploying"),
            "a pod still running, a Job or CronJob not yet suspended"
        );
        assert_eq!(
            phase(chart_outcome(true, 2)).as_deref(),
            Some("Deploying"),
            "replicas still asked for"
        );
        assert_eq!(phase(chart_outcome(true, 0)).as_deref(), Some("Paused"));
    }

    #[test]
    fn a_chart_workload_still_waiting_past_the_apps_deadline_is_blocked_naming_it() {
        let chart = json!([{"kind": "workload", "name": "web", "replicas": 1, "source": {
            "type": "helm",
            "chart": {"repository": "https://charts.example", "name": "web", "version": "0.1.0"},
            "values": {}}}]);
        let held = held(chart);
        let waiting = |started: chrono::DateTime<chrono::Utc>| {
            let old = StackDeployStatus {
                observed_revision: Some("r1".into()),
                rollout_started_at: Some(started),
                ..StackDeployStatus::default()
            };
            let facts = facts(&held, old);
            let plan = plan(&facts);
            let mut answers = chart_outcome(false, 0);
            let Answer::Chart(Ok(outcome)) = &mut answers[0] else {
                unreachable!()
            };
            outcome.stalled = Vec::from_iter(crate::drift::stalled(
                "DaemonSet",
                "web-node",
                "0 of 1 ready",
            ));
            decide(&facts, assess(&plan, &answers, false))
        };
        let now = chrono::Utc::now();
        let early = waiting(now);
        assert_eq!(early.status.phase.as_deref(), Some("Deploying"));
        assert!(
            early.drift.is_none(),
            "within the deadline, waiting is not blocked"
        );

        let late = waiting(now - chrono::Duration::seconds(120));
        assert_eq!(late.status.phase.as_deref(), Some("Failed"));
        let drift = late.drift.expect("blocked_sync reported");
        assert_eq!(drift.class, wire::DriftClass::BlockedSync);
        assert_eq!(drift.details[0].resource, "DaemonSet/web-node");
        assert_eq!(drift.details[0].observed, json!("0 of 1 ready"));
        assert_eq!(late.status.drift_class.as_deref(), Some("blocked_sync"));
    }

    #[test]
    fn a_fresh_revision_is_applied_with_force_and_starts_its_rollout_clock() {
        let held = held(web());
        let facts = facts(&held, StackDeployStatus::default());
        let plan = plan(&facts);
        assert_eq!(plan.steps.len(), 1);
        let Work::Objects(objects) = &plan.steps[0].work else {
            panic!("a workload with an image renders objects");
        };
        assert!(
            objects.iter().all(|o| o.force),
            "a fresh revision writes everything"
        );
        let decision = decide(&facts, assess(&plan, &answered(deployment(1)), false));
        assert_eq!(decision.status.observed_revision.as_deref(), Some("r1"));
        assert_eq!(decision.status.rollout_started_at, Some(facts.now));
        assert_eq!(decision.status.phase.as_deref(), Some("Deploying"));
        assert_eq!(decision.status.components[0].message, "1/2 replicas ready");
        assert!(decision.changed && decision.report && decision.drift.is_none());
        assert!(decision.requeue <= Duration::from_secs(5));
    }

    #[test]
    fn a_workload_is_running_once_its_deployment_answers_ready() {
        let mut held = held(web());
        held.metadata.generation = Some(3);
        let old = StackDeployStatus {
            observed_revision: Some("r1".into()),
            rollout_started_at: Some(chrono::Utc::now()),
            ..StackDeployStatus::default()
        };
        let facts = facts(&held, old);
        let plan = plan(&facts);
        let Work::Objects(objects) = &plan.steps[0].work else {
            panic!("a workload with an image renders objects");
        };
        assert!(objects.iter().all(|o| !o.force), "the stamps decide");
        let decision = decide(&facts, assess(&plan, &answered(deployment(2)), false));
        assert_eq!(decision.status.phase.as_deref(), Some("Running"));
        assert_eq!(decision.requeue, Duration::from_secs(60));
        let ready = &decision.status.conditions[0];
        let observed = (ready.status.as_str(), decision.status.observed_generation);
        assert_eq!(observed, ("True", Some(3)), "{ready:?}");
    }

    #[test]
    fn a_rolling_update_whose_old_pods_still_serve_is_not_running() {
        let held = held(web());
        let old = StackDeployStatus {
            observed_revision: Some("r1".into()),
            rollout_started_at: Some(chrono::Utc::now()),
            ..StackDeployStatus::default()
        };
        let facts = facts(&held, old);
        let plan = plan(&facts);
        // Two old pods ready, one new pod surged and never ready.
        let mut live = deployment(2);
        live["status"]["replicas"] = json!(3);
        live["status"]["updatedReplicas"] = json!(1);
        let decision = decide(&facts, assess(&plan, &answered(live), false));
        assert_eq!(decision.status.phase.as_deref(), Some("Deploying"));
        assert!(!decision.status.components[0].ready);
        assert_eq!(decision.status.components[0].ready_replicas, 0);
    }

    #[test]
    fn a_stack_deploy_outside_its_namespace_applies_nothing_and_fails() {
        let held = held(web());
        let mut facts = facts(&held, StackDeployStatus::default());
        facts.rejection = Some("namespace shop belongs to another project".into());
        let plan = plan(&facts);
        assert!(plan.steps.is_empty() && plan.rendered.is_empty());
        let decision = decide(&facts, assess(&plan, &[], false));
        assert_eq!(decision.status.phase.as_deref(), Some("Failed"));
        assert_eq!(decision.status.rejection, facts.rejection);
        assert_eq!(decision.requeue, Duration::from_secs(10));
    }

    #[test]
    fn a_git_workload_without_a_build_asks_for_one_and_waits() {
        let held = held(json!([{"kind": "workload", "name": "web", "replicas": 1,
            "source": {"type": "git", "repository": "https://git.example.test/shop.git", "git_ref": "main", "mode": "dockerfile"}}]));
        let mut facts = facts(&held, StackDeployStatus::default());
        facts.builds.insert("web", None);
        let plan = plan(&facts);
        let Work::Build {
            request,
            failed,
            message,
        } = &plan.steps[0].work
        else {
            panic!("no image yet: a build step");
        };
        assert!(request.is_some() && !failed);
        let answers = [Answer::Waiting {
            failed: *failed,
            message: message.clone(),
        }];
        let pass = assess(&plan, &answers, false);
        assert!(!pass.all_ready && !pass.workloads_at_zero);
        assert_eq!(pass.components[0].message, "the image build is queued");
    }

    #[test]
    fn a_status_patch_clears_what_the_new_status_no_longer_has() {
        let old = StackDeployStatus {
            phase: Some("Running".into()),
            drift_class: Some("recoverable".into()),
            rejection: Some("outside the project".into()),
            ..StackDeployStatus::default()
        };
        let new = StackDeployStatus {
            phase: Some("Running".into()),
            ..StackDeployStatus::default()
        };
        let patch = status_patch(&old, &new);
        assert_eq!(patch["status"]["phase"], "Running");
        assert!(patch["status"]["driftClass"].is_null());
        assert!(patch["status"]["rejection"].is_null());
        assert!(
            patch["status"]
                .as_object()
                .unwrap()
                .contains_key("driftClass"),
            "sent as null, not left out: {patch}"
        );
        assert!(
            !patch["status"]
                .as_object()
                .unwrap()
                .contains_key("handledRestart")
        );
    }

    #[test]
    fn the_phase_follows_the_components() {
        let ready = Tally {
            all_ready: true,
            ..Tally::default()
        };
        assert_eq!(phase(&ready), AppPhase::Running);
        assert_eq!(phase(&Tally::default()), AppPhase::Deploying);
        let expired = Tally {
            expired: true,
            ..Tally::default()
        };
        assert_eq!(phase(&expired), AppPhase::Failed);
        let paused = Tally {
            paused: true,
            workloads_at_zero: true,
            all_ready: true,
            ..Tally::default()
        };
        assert_eq!(phase(&paused), AppPhase::Paused);
        let pausing = Tally {
            paused: true,
            ..Tally::default()
        };
        assert_eq!(phase(&pausing), AppPhase::Deploying);
        let blocked = Tally {
            blocked: true,
            all_ready: true,
            ..Tally::default()
        };
        assert_eq!(phase(&blocked), AppPhase::Failed);
    }
}
