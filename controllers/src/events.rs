//! The Kubernetes Events the controllers write on Apps, Projects, Clusters and AddonInstances
//! (`kubectl describe app shop` shows them), all from one rule: a status write that turns a
//! condition tells it ([`kubenest_runtime::events::condition_events`]), with the condition's
//! reason, which is also what the status and the REST event stream show. An App also tells
//! the revision it recorded and when its rollout settles (the reasons in
//! [`kubenest_crds::names::reasons`]). Events are queued on the [`Plane`]'s
//! [`EventSink`](kubenest_runtime::events::EventSink), never awaited by a reconcile.

use k8s_openapi::api::core::v1::ObjectReference;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::Resource;
use kubenest_crds::app::AppStatus;
use kubenest_crds::names::reasons;
use kubenest_runtime::events::{Event, EventType, condition_events, event};

use crate::intents::ObjectKey;
use crate::plane::Plane;

/// Reasons that warn on whichever condition shows them: the App cannot reach its cluster, the
/// hub refused, or delivery is late.
const WARNING_REASONS: &[&str] = &[
    "ClusterUnreachable",
    "HubUnavailable",
    "InvalidCommand",
    "DeliveryDelayed",
    "ProgressDeadlineExceeded",
    "BlockedSync",
    "RollbackFailed",
    "HeartbeatMissed",
];

/// The reference of the object `key` names, of kind `K`.
pub fn reference<K: Resource<DynamicType = ()>>(key: &ObjectKey) -> ObjectReference {
    ObjectReference {
        api_version: Some(K::api_version(&()).into_owned()),
        kind: Some(K::kind(&()).into_owned()),
        namespace: Some(key.namespace.clone()),
        name: Some(key.name.clone()),
        uid: Some(key.uid.clone()),
        ..ObjectReference::default()
    }
}

/// Queues what the change of an object's conditions tells (see the module documentation).
pub fn conditions_turned<K: Resource<DynamicType = ()>>(
    plane: &Plane,
    key: &ObjectKey,
    old: &[Condition],
    new: &[Condition],
) {
    let events = condition_list(old, new);
    if !events.is_empty() {
        plane.events.emit_to(&reference::<K>(key), events);
    }
}

/// The Events the change of conditions from `old` to `new` makes, with the controllers'
/// warning reasons.
pub fn condition_list(old: &[Condition], new: &[Condition]) -> Vec<Event> {
    condition_events(old, new, WARNING_REASONS)
}

/// What an App's status write from `old` to `new` tells: a newly recorded revision, its
/// conditions turning, and the end of its rollout.
pub fn app_events(old: &AppStatus, new: &AppStatus) -> Vec<Event> {
    let mut events = Vec::new();
    if let Some(revision) = new.revision.as_deref()
        && old.revision.as_deref() != Some(revision)
    {
        let deployment = new
            .deployment_id
            .as_deref()
            .map(|d| format!(" as deployment {d}"))
            .unwrap_or_default();
        events.push(event(
            EventType::Normal,
            reasons::REVISION_RECORDED,
            format!("revision {revision} recorded{deployment}"),
            "Deploy",
        ));
    }
    let mut turned = condition_list(&old.conditions, &new.conditions);
    let ready_message = || {
        crate::conditions::get(&new.conditions, crate::conditions::READY)
            .map(|c| format!("{}: {}", c.reason, c.message))
    };
    let revision = new.revision.as_deref().unwrap_or("?");
    match (old.phase.as_deref(), new.phase.as_deref()) {
        (before, Some("Running")) if before != Some("Running") => turned.push(event(
            EventType::Normal,
            reasons::ROLLOUT_SUCCEEDED,
            format!("revision {revision} is running"),
            "Rollout",
        )),
        (before, Some("Failed")) if before != Some("Failed") => turned.push(event(
            EventType::Warning,
            reasons::ROLLOUT_FAILED,
            format!(
                "revision {revision} failed ({})",
                ready_message().unwrap_or_default()
            ),
            "Rollout",
        )),
        _ => {}
    }
    events.append(&mut turned);
    events
}

#[cfg(test)]
mod tests {
    use super::*;

    fn summary(events: &[Event]) -> Vec<String> {
        events.iter().map(|e| e.reason.clone()).collect()
    }

    fn with_ready(phase: &str, status: bool, reason: &str, message: &str) -> AppStatus {
        let mut app = AppStatus {
            phase: Some(phase.into()),
            revision: Some("r1".into()),
            deployment_id: Some("d1".into()),
            ..AppStatus::default()
        };
        crate::conditions::set(
            &mut app.conditions,
            crate::conditions::READY,
            status,
            reason,
            message,
            Some(1),
        );
        app
    }

    #[test]
    fn a_revision_is_told_when_recorded_and_its_rollout_when_it_settles() {
        let recorded = with_ready("Pending", false, "AwaitingAgent", "sent");
        assert_eq!(
            summary(&app_events(&AppStatus::default(), &recorded)),
            ["RevisionRecorded", "AwaitingAgent"]
        );
        let rolling = with_ready("Deploying", false, "RollingOut", "0/1 ready");
        assert_eq!(summary(&app_events(&recorded, &rolling)), ["RollingOut"]);
        let failed = with_ready(
            "Failed",
            false,
            "ProgressDeadlineExceeded",
            "web: not ready",
        );
        let events = app_events(&rolling, &failed);
        assert_eq!(
            summary(&events),
            ["ProgressDeadlineExceeded", "RolloutFailed"]
        );
        assert_eq!(events[1].type_, EventType::Warning);
        assert!(
            events[1]
                .note
                .as_deref()
                .is_some_and(|n| n.contains("ProgressDeadlineExceeded: web: not ready")),
            "{:?}",
            events[1].note
        );
        assert!(app_events(&failed, &failed).is_empty(), "nothing turned");
        let running = with_ready("Running", true, "Running", "");
        assert_eq!(
            summary(&app_events(&rolling, &running)),
            ["Running", "RolloutSucceeded"]
        );
    }
}
