//! The events one change of an object makes (pure): the facts of an App compared between
//! versions, a cluster's state, and where an object of an organization is (a standalone
//! addon's are in `addon_kinds`).

use std::collections::HashMap;

use kube::{Resource, ResourceExt};
use kubenest_crds::App;
use kubenest_crds::cluster::Cluster;
use kubenest_domain::alerts::AlertKind;
use serde_json::{Value, json};

use super::{NewEvent, alerts, event_id};
use crate::k8s::org_name_of;

/// What the stream reports of an App, to compare versions by.
#[derive(Debug, Clone, Default, PartialEq)]
pub(super) struct AppFacts {
    phase: Option<String>,
    deployment_id: Option<String>,
    drift: Value,
    /// The verdict on its last verified revision, and what was done with it.
    verification: Value,
    /// Its `progress_deadline_exceeded` alert is open.
    alerting: bool,
    /// Its `deletion_deadline_exceeded` alert is open.
    deletion_alerting: bool,
    /// Its `verification_failed` alert is open.
    verification_alerting: bool,
}

/// The facts of a first sight of `app`.
#[cfg(test)]
pub(super) fn app_facts(app: &App) -> AppFacts {
    facts_after(None, app)
}

/// The facts of `app` after `old` (an alert stays open until the App runs again).
pub(super) fn facts_after(old: Option<&AppFacts>, app: &App) -> AppFacts {
    let status = app.status.clone().unwrap_or_default();
    AppFacts {
        alerting: alerts::app_alerting(old.is_some_and(|o| o.alerting), app),
        deletion_alerting: alerts::deletion_alerting(old.is_some_and(|o| o.deletion_alerting), app),
        verification_alerting: alerts::verification_alerting(
            old.is_some_and(|o| o.verification_alerting),
            app,
        ),
        phase: status.phase,
        deployment_id: status.deployment_id,
        drift: drift_json(status.sync),
        verification: status.verification.map_or(Value::Null, |v| {
            json!({
                "revision": v.revision, "verdict": v.verdict, "reason": v.reason,
                "window_seconds": v.window_seconds, "started_at": v.started_at,
                "observed_at": v.observed_at, "action": v.action,
                "signals": v.signals.iter().map(|s| json!({
                    "name": s.name, "value": s.value, "baseline": s.baseline,
                    "threshold": s.threshold, "failed": s.failed,
                })).collect::<Vec<_>>(),
            })
        }),
    }
}

/// The drift an App or a standalone addon last reported, as its stream event carries it
/// (`null`: none reported yet).
pub(super) fn drift_json(sync: Option<kubenest_crds::app::Sync>) -> Value {
    sync.map_or(Value::Null, |s| {
        json!({
            "drift_detected": s.drift_detected,
            "drift_class": s.drift_class,
            "drift_details": s.drift_details.iter().map(|d| json!({
                "resource": d.resource, "field": d.field, "desired": d.desired,
                "observed": d.observed, "manager": d.manager,
            })).collect::<Vec<_>>(),
        })
    })
}

/// Where the objects of an organization namespace are: project and cluster uids by name.
#[derive(Debug, Default)]
pub(super) struct Places {
    pub(super) projects: HashMap<(String, String), (String, String)>,
    pub(super) clusters: HashMap<(String, String), String>,
}

impl Places {
    pub(super) fn app_place(
        &self,
        namespace: &str,
        project: &str,
    ) -> (Option<String>, Option<String>) {
        let Some((project_uid, cluster)) = self
            .projects
            .get(&(namespace.to_owned(), project.to_owned()))
        else {
            return (None, None);
        };
        let cluster_uid = self
            .clusters
            .get(&(namespace.to_owned(), cluster.clone()))
            .cloned();
        (Some(project_uid.clone()), cluster_uid)
    }
}

/// The events between two versions of an App (pure).
pub(super) fn app_events(
    old: Option<&AppFacts>,
    app: &App,
    place: (Option<String>, Option<String>),
) -> Vec<NewEvent> {
    let namespace = app.namespace().unwrap_or_default();
    let Some(org) = org_name_of(&namespace) else {
        return Vec::new();
    };
    let uid = app.uid().unwrap_or_default();
    let version = app.resource_version().unwrap_or_default();
    let new = facts_after(old, app);
    let old = old.cloned().unwrap_or_default();
    let (project_id, cluster_id) = place;
    let event = |kind: &'static str, slot: i64, payload: Value| NewEvent {
        id: event_id(&version, slot).unwrap_or_default(),
        org_id: org.to_owned(),
        cluster_id: cluster_id.clone(),
        project_id: project_id.clone(),
        app_id: Some(uid.clone()),
        kind,
        payload,
    };
    let name = app.name_any();
    let mut events = Vec::new();
    if new.deployment_id != old.deployment_id
        && let Some(id) = &new.deployment_id
    {
        let revision = app.status.as_ref().and_then(|s| s.revision.clone());
        events.push(event(
            "deployment",
            0,
            json!({"app": name, "deployment_id": id, "revision": revision}),
        ));
    }
    if new.phase != old.phase
        && let Some(phase) = &new.phase
    {
        let message = app
            .status
            .as_ref()
            .and_then(|s| s.conditions.iter().find(|c| c.type_ == "Ready"))
            .map(|c| c.message.clone())
            .unwrap_or_default();
        events.push(event(
            "app.phase",
            1,
            json!({"app": name, "phase": phase, "previous": old.phase, "message": message}),
        ));
    }
    if new.drift != old.drift && !new.drift.is_null() {
        let mut payload = new.drift.clone();
        payload["app"] = name.clone().into();
        events.push(event("app.drift", 2, payload));
    }
    if new.verification != old.verification && !new.verification.is_null() {
        let mut payload = new.verification.clone();
        payload["app"] = name.clone().into();
        events.push(event("app.verification", 4, payload));
    }
    // Slot 3 is `app.deleted`'s too, which never shares a version with these: a deletion's
    // event carries the deletion's own resourceVersion. Nor do the two alerts change in one
    // version: a deletion's alert opens as the App turns `Failed` for it, which neither opens
    // nor ends the progress alert.
    if new.deletion_alerting != old.deletion_alerting {
        let payload = alerts::payload(
            AlertKind::DeletionDeadlineExceeded,
            new.deletion_alerting,
            &name,
            &alerts::deletion_message(app),
        );
        events.push(event("alert", 3, payload));
    } else if new.alerting != old.alerting {
        let payload = alerts::payload(
            AlertKind::ProgressDeadlineExceeded,
            new.alerting,
            &name,
            &alerts::app_message(app),
        );
        events.push(event("alert", 3, payload));
    }
    // Its own slot: the automation stops in the version that writes the verdict's action,
    // which may also end the progress alert.
    if new.verification_alerting != old.verification_alerting {
        let payload = alerts::payload(
            AlertKind::VerificationFailed,
            new.verification_alerting,
            &name,
            &alerts::verification_message(app),
        );
        events.push(event("alert", 5, payload));
    }
    // A version that is not a number cannot be ordered: such an event is not sent.
    events.retain(|e| e.id > 0);
    events
}

pub(super) fn app_deleted(app: &App, place: (Option<String>, Option<String>)) -> Option<NewEvent> {
    let namespace = app.namespace().unwrap_or_default();
    let org = org_name_of(&namespace)?;
    let uid = app.uid()?;
    Some(NewEvent {
        id: event_id(&app.resource_version()?, 3)?,
        org_id: org.to_owned(),
        cluster_id: place.1,
        project_id: place.0,
        app_id: Some(uid),
        kind: "app.deleted",
        payload: json!({"app": app.name_any()}),
    })
}

pub(super) fn cluster_event(old: Option<&str>, cluster: &Cluster) -> Option<NewEvent> {
    let namespace = cluster.namespace().unwrap_or_default();
    let org = org_name_of(&namespace)?;
    let state = serde_json::to_value(cluster.status.clone().unwrap_or_default().state).ok()?;
    let state = state.as_str()?.to_owned();
    if old == Some(state.as_str()) {
        return None;
    }
    let uid = cluster.uid()?;
    Some(NewEvent {
        id: event_id(&cluster.resource_version()?, 3)?,
        org_id: org.to_owned(),
        cluster_id: Some(uid),
        project_id: None,
        app_id: None,
        kind: "cluster.state",
        payload: json!({"cluster": cluster.name_any(), "state": state, "previous": old}),
    })
}

/// The `alert` event of a cluster whose alert opened or resolved in this version.
pub(super) fn cluster_alert_event(alerting: bool, cluster: &Cluster) -> Option<NewEvent> {
    let namespace = cluster.namespace().unwrap_or_default();
    let org = org_name_of(&namespace)?;
    Some(NewEvent {
        id: event_id(&cluster.resource_version()?, 0)?,
        org_id: org.to_owned(),
        cluster_id: Some(cluster.uid()?),
        project_id: None,
        app_id: None,
        kind: "alert",
        payload: alerts::payload(
            AlertKind::HeartbeatMissed,
            alerting,
            &cluster.name_any(),
            &alerts::cluster_message(cluster),
        ),
    })
}

pub(super) fn key_of<K: Resource>(object: &K) -> (String, String) {
    (
        object.meta().namespace.clone().unwrap_or_default(),
        object.meta().name.clone().unwrap_or_default(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use kubenest_crds::app::{AppSpec, AppStatus};

    fn app(phase: Option<&str>, deployment: Option<&str>, version: &str) -> App {
        let mut app = App::new(
            "shop",
            AppSpec {
                project: "web".into(),
                components: vec![],
                progress_deadline_seconds: 600,
                paused: false,
                verification: None,
            },
        );
        app.metadata.namespace = Some("org-acme".into());
        app.metadata.uid = Some("u1".into());
        app.metadata.resource_version = Some(version.into());
        app.status = Some(AppStatus {
            phase: phase.map(str::to_owned),
            deployment_id: deployment.map(str::to_owned),
            ..AppStatus::default()
        });
        app
    }

    #[test]
    fn a_new_deployment_and_a_phase_change_are_two_events_keyed_by_version() {
        let before = app_facts(&app(Some("Running"), Some("d1"), "5"));
        let after = app(Some("Deploying"), Some("d2"), "6");
        let events = app_events(Some(&before), &after, (Some("p".into()), None));
        let kinds: Vec<&str> = events.iter().map(|e| e.kind).collect();
        assert_eq!(kinds, ["deployment", "app.phase"]);
        assert_eq!(events[1].id, 6 * 8 + 1);
        assert_eq!(events[1].org_id, "acme");
        assert_eq!(events[1].payload["previous"], "Running");
        assert!(app_events(Some(&app_facts(&after)), &after, (None, None)).is_empty());
    }

    #[test]
    fn a_verdict_and_what_was_done_with_it_are_events_with_their_numbers() {
        use kubenest_crds::verification::{VerificationSignal, VerificationStatus};
        let before = app_facts(&app(Some("Running"), Some("d1"), "5"));
        let mut judged = app(Some("Running"), Some("d1"), "6");
        let mut verdict = VerificationStatus {
            revision: "r1".into(),
            verdict: "Failed".into(),
            reason: "error_ratio 0.3 above its threshold 0.05 (window 180s)".into(),
            window_seconds: 180,
            started_at: "2026-12-07T12:00:00Z".into(),
            observed_at: "2026-12-07T12:03:00Z".into(),
            signals: vec![VerificationSignal {
                name: "error_ratio".into(),
                value: 0.3,
                baseline: Some(0.0),
                threshold: Some(0.05),
                failed: true,
            }],
            action: None,
        };
        judged.status.as_mut().unwrap().verification = Some(verdict.clone());
        let events = app_events(Some(&before), &judged, (None, None));
        let [event] = events.as_slice() else {
            panic!("one event: {events:?}")
        };
        assert_eq!((event.kind, event.id), ("app.verification", 6 * 8 + 4));
        assert_eq!(event.payload["verdict"], "Failed");
        assert_eq!(event.payload["signals"][0]["threshold"], 0.05);
        assert_eq!(event.payload["window_seconds"], 180);
        verdict.action = Some("rolling back to deployment d0".into());
        let mut acted = app(Some("Running"), Some("d1"), "7");
        acted.status.as_mut().unwrap().verification = Some(verdict.clone());
        let events = app_events(Some(&app_facts(&judged)), &acted, (None, None));
        assert_eq!(events[0].payload["action"], "rolling back to deployment d0");

        // The automation stopping opens the critical alert, in a slot of its own; a revision
        // that passes resolves it.
        verdict.action = Some("automation stopped: the automatic rollback failed too".into());
        let mut stopped = app(Some("Running"), Some("d1"), "8");
        stopped.status.as_mut().unwrap().verification = Some(verdict.clone());
        let facts = facts_after(Some(&app_facts(&acted)), &stopped);
        let events = app_events(Some(&app_facts(&acted)), &stopped, (None, None));
        let alert = events.iter().find(|e| e.kind == "alert").unwrap();
        assert_eq!(alert.id, 8 * 8 + 5);
        assert_eq!(
            (
                &alert.payload["alert"],
                &alert.payload["state"],
                &alert.payload["severity"]
            ),
            (
                &json!("verification_failed"),
                &json!("open"),
                &json!("critical")
            )
        );
        verdict.verdict = "Passed".into();
        verdict.action = None;
        let mut passed = app(Some("Running"), Some("d2"), "9");
        passed.status.as_mut().unwrap().verification = Some(verdict);
        let events = app_events(Some(&facts), &passed, (None, None));
        let alert = events.iter().find(|e| e.kind == "alert").unwrap();
        assert_eq!(alert.payload["state"], "resolved");
    }

    #[test]
    fn a_failed_deadline_is_an_alert_event_until_the_app_runs_again() {
        let mut failed = app(Some("Failed"), Some("d1"), "7");
        failed.status.as_mut().unwrap().conditions.push(
            k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition {
                type_: "Ready".into(),
                status: "False".into(),
                reason: "ProgressDeadlineExceeded".into(),
                message: "revision r1 was not running within 10s".into(),
                observed_generation: None,
                last_transition_time: k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
                    k8s_openapi::jiff::Timestamp::UNIX_EPOCH,
                ),
            },
        );
        let running = app_facts(&app(Some("Running"), Some("d1"), "6"));
        let events = app_events(Some(&running), &failed, (None, None));
        let alert = events.iter().find(|e| e.kind == "alert").unwrap();
        assert_eq!(alert.id, 7 * 8 + 3);
        assert_eq!(alert.payload["state"], "open");
        assert_eq!(alert.payload["alert"], "progress_deadline_exceeded");

        let open = facts_after(Some(&running), &failed);
        let deploying = app(Some("Deploying"), Some("d2"), "8");
        let events = app_events(Some(&open), &deploying, (None, None));
        assert!(events.iter().all(|e| e.kind != "alert"), "not running yet");
        let still = facts_after(Some(&open), &deploying);
        let back = app(Some("Running"), Some("d2"), "9");
        let events = app_events(Some(&still), &back, (None, None));
        let alert = events.iter().find(|e| e.kind == "alert").unwrap();
        assert_eq!(alert.payload["state"], "resolved");
    }

    #[test]
    fn a_deletion_past_its_deadline_is_an_alert_event_about_the_app() {
        let mut overdue = app(Some("Failed"), Some("d1"), "12");
        overdue.status.as_mut().unwrap().conditions.push(
            k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition {
                type_: "Ready".into(),
                status: "False".into(),
                reason: "DeletionDeadlineExceeded".into(),
                message: "the deletion did not finish within 15s: Deployment/web".into(),
                observed_generation: None,
                last_transition_time: k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
                    k8s_openapi::jiff::Timestamp::UNIX_EPOCH,
                ),
            },
        );
        let deleting = app_facts(&app(Some("Deleting"), Some("d1"), "11"));
        let events = app_events(Some(&deleting), &overdue, (None, None));
        let alert = events.iter().find(|e| e.kind == "alert").unwrap();
        assert_eq!(alert.id, 12 * 8 + 3);
        assert_eq!(alert.payload["alert"], "deletion_deadline_exceeded");
        assert_eq!(alert.payload["state"], "open");
        assert!(
            alert.payload["message"]
                .as_str()
                .unwrap()
                .contains("Deployment/web"),
            "{}",
            alert.payload
        );
        let open = facts_after(Some(&deleting), &overdue);
        let again = app(Some("Failed"), Some("d1"), "13");
        let mut again = again;
        again.status = overdue.status.clone();
        assert!(
            app_events(Some(&open), &again, (None, None))
                .iter()
                .all(|e| e.kind != "alert"),
            "opened once"
        );
    }
}
