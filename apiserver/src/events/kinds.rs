//! The events one change of an object makes (pure): the facts of an App or a standalone addon
//! compared between versions, a cluster's state, and where an object of an organization is.

use std::collections::HashMap;

use kube::{Resource, ResourceExt};
use kubenest_crds::App;
use kubenest_crds::addon::AddonInstance;
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
    /// Its `progress_deadline_exceeded` alert is open.
    alerting: bool,
    /// Its `deletion_deadline_exceeded` alert is open.
    deletion_alerting: bool,
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
        phase: status.phase,
        deployment_id: status.deployment_id,
        drift: drift_json(status.sync),
    }
}

/// The drift an App or a standalone addon last reported, as its stream event carries it
/// (`null`: none reported yet).
fn drift_json(sync: Option<kubenest_crds::app::Sync>) -> Value {
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

/// What the stream reports of a standalone addon, to compare versions by.
#[derive(Debug, Clone, Default, PartialEq)]
pub(super) struct AddonFacts {
    generation: Option<i64>,
    phase: Option<String>,
    revision: Option<u32>,
    observed_revision: Option<u32>,
    drift: Value,
}

pub(super) fn addon_facts(addon: &AddonInstance) -> AddonFacts {
    let status = addon.status.clone().unwrap_or_default();
    AddonFacts {
        generation: addon.metadata.generation,
        phase: status.phase,
        revision: status.revision,
        observed_revision: status.observed_revision,
        drift: drift_json(status.sync),
    }
}

/// The events between two versions of a standalone addon (pure): `addon.changed` when its spec
/// (a change, or a rollback writing an earlier revision back), phase or revisions changed, and
/// `addon.drift` when the drift the agent reported changed (found and applied back, or
/// cleared).
pub(super) fn addon_event(
    old: Option<&AddonFacts>,
    addon: &AddonInstance,
    place: (Option<String>, Option<String>),
) -> Vec<NewEvent> {
    let namespace = addon.namespace().unwrap_or_default();
    let (Some(org), Some(version), Some(uid)) = (
        org_name_of(&namespace),
        addon.resource_version(),
        addon.uid(),
    ) else {
        return Vec::new();
    };
    let new = addon_facts(addon);
    let old = old.cloned().unwrap_or_default();
    if new.phase.is_none() {
        return Vec::new();
    }
    let event = |kind: &'static str, slot: i64, payload: Value| NewEvent {
        id: event_id(&version, slot).unwrap_or_default(),
        org_id: org.to_owned(),
        cluster_id: place.1.clone(),
        project_id: place.0.clone(),
        app_id: None,
        kind,
        payload,
    };
    let name = addon.name_any();
    let mut events = Vec::new();
    let moved = |f: &AddonFacts| {
        (
            f.generation,
            f.phase.clone(),
            f.revision,
            f.observed_revision,
        )
    };
    if moved(&new) != moved(&old) {
        let status = addon.status.clone().unwrap_or_default();
        events.push(event(
            "addon.changed",
            0,
            json!({
                "addon": name, "addon_id": uid, "phase": new.phase,
                "previous": old.phase, "revision": new.revision,
                "observed_revision": new.observed_revision, "message": status.message,
                "generation": new.generation,
            }),
        ));
    }
    if new.drift != old.drift && !new.drift.is_null() {
        let mut payload = new.drift.clone();
        payload["addon"] = name.into();
        payload["addon_id"] = uid.into();
        events.push(event("addon.drift", 2, payload));
    }
    events
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
        assert_eq!(events[1].id, 6 * 4 + 1);
        assert_eq!(events[1].org_id, "acme");
        assert_eq!(events[1].payload["previous"], "Running");
        assert!(app_events(Some(&app_facts(&after)), &after, (None, None)).is_empty());
    }

    #[test]
    fn an_addon_makes_an_event_when_its_phase_or_revisions_change_and_not_otherwise() {
        use kubenest_crds::addon::{AddonInstanceSpec, AddonInstanceStatus};
        let addon = |phase: &str, revision: u32, version: &str| {
            let mut addon = AddonInstance::new(
                "db",
                serde_json::from_value::<AddonInstanceSpec>(
                    json!({"project": "web", "definition": "postgres"}),
                )
                .unwrap(),
            );
            addon.metadata.namespace = Some("org-acme".into());
            addon.metadata.uid = Some("a1".into());
            addon.metadata.resource_version = Some(version.into());
            addon.status = Some(AddonInstanceStatus {
                phase: Some(phase.into()),
                revision: Some(revision),
                ..Default::default()
            });
            addon
        };
        let installing = addon("Installing", 1, "7");
        let first = addon_event(None, &installing, (Some("p".into()), Some("c".into())));
        let [first] = first.as_slice() else {
            panic!("one event: {first:?}")
        };
        assert_eq!((first.kind, first.id), ("addon.changed", 7 * 4));
        assert_eq!(first.payload["addon_id"], "a1");
        assert_eq!(first.project_id.as_deref(), Some("p"));
        let seen = addon_facts(&installing);
        assert_eq!(
            addon_event(Some(&seen), &addon("Installing", 1, "8"), (None, None)),
            vec![]
        );
        let mut respecified = addon("Installing", 1, "8");
        respecified.metadata.generation = Some(2);
        assert_eq!(
            addon_event(Some(&seen), &respecified, (None, None)).len(),
            1
        );
        let upgraded = addon_event(Some(&seen), &addon("Installing", 2, "9"), (None, None));
        assert_eq!(upgraded[0].payload["revision"], 2);
        let ready = addon_event(Some(&seen), &addon("Ready", 1, "10"), (None, None));
        assert_eq!(ready[0].payload["previous"], "Installing");

        // Drift found and applied back is its own event; so is its clearing.
        let mut drifted = addon("Installing", 1, "11");
        drifted.status.as_mut().unwrap().sync = Some(kubenest_crds::app::Sync {
            drift_detected: true,
            drift_class: Some("recoverable".into()),
            drift_details: vec![kubenest_crds::app::DriftDetail {
                resource: "Service/db".into(),
                field: "spec.ports[0].port".into(),
                desired: "5432".into(),
                observed: "5433".into(),
                manager: Some("kubectl-edit".into()),
            }],
        });
        let found = addon_event(Some(&seen), &drifted, (None, None));
        let [found] = found.as_slice() else {
            panic!("one event: {found:?}")
        };
        assert_eq!((found.kind, found.id), ("addon.drift", 11 * 4 + 2));
        assert_eq!(found.payload["addon_id"], "a1");
        assert_eq!(found.payload["drift_details"][0]["manager"], "kubectl-edit");
        let mut healed = addon("Installing", 1, "12");
        healed.status.as_mut().unwrap().sync = Some(Default::default());
        let cleared = addon_event(Some(&addon_facts(&drifted)), &healed, (None, None));
        assert_eq!(cleared[0].kind, "addon.drift");
        assert_eq!(cleared[0].payload["drift_detected"], false);
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
        assert_eq!(alert.id, 7 * 4 + 3);
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
        assert_eq!(alert.id, 12 * 4 + 3);
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
