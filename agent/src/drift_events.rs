//! Drift as Kubernetes Events on the workload cluster (pure), for Apps and standalone addons
//! alike: `kubectl describe deployment` shows a drift found on it, the field, the manager that
//! changed it, and that the agent applied it back (or that the cluster cannot converge).

use k8s_openapi::api::core::v1::ObjectReference;
use kubenest_contracts as wire;
use kubenest_crds::names::reasons;
use kubenest_runtime::events::{Event, EventType, event};

/// The reference of an object a drift detail names (`Kind/name`) in `namespace`.
fn drifted(namespace: &str, resource: &str) -> Option<ObjectReference> {
    let (kind, name) = resource.split_once('/')?;
    let api_version = match kind {
        "Deployment" | "StatefulSet" | "DaemonSet" | "ReplicaSet" => "apps/v1",
        "Ingress" => "networking.k8s.io/v1",
        "Job" | "CronJob" => "batch/v1",
        _ => "v1",
    };
    Some(ObjectReference {
        api_version: Some(api_version.into()),
        kind: Some(kind.into()),
        name: Some(name.into()),
        namespace: Some(namespace.into()),
        ..ObjectReference::default()
    })
}

/// The Events of drift of `class` (an App's report, or a standalone addon's), each on the
/// drifted object with `owner` (its StackDeploy or AddonRelease) as the related object: found,
/// with the field and the manager that changed it; and applied back when recoverable, or
/// blocked.
pub fn drift_events(
    namespace: &str,
    owner: &ObjectReference,
    class: wire::DriftClass,
    details: &[wire::DriftDetail],
) -> Vec<(ObjectReference, Event)> {
    let mut out = Vec::new();
    for detail in details {
        let Some(reference) = drifted(namespace, &detail.resource) else {
            continue;
        };
        let by = detail
            .manager
            .as_deref()
            .map(|m| format!(" by {m}"))
            .unwrap_or_default();
        let found = format!(
            "{} changed{by}: desired {}, found {}",
            detail.field, detail.desired, detail.observed
        );
        let related = Some(owner.clone());
        out.push((
            reference.clone(),
            Event {
                secondary: related.clone(),
                ..event(EventType::Warning, reasons::DRIFT_DETECTED, found, "Drift")
            },
        ));
        let (type_, reason, note) = match class {
            wire::DriftClass::Recoverable => (
                EventType::Normal,
                reasons::DRIFT_HEALED,
                format!("{} applied back to {}", detail.field, detail.desired),
            ),
            wire::DriftClass::BlockedSync => (
                EventType::Warning,
                reasons::BLOCKED_SYNC,
                format!(
                    "{}: the cluster cannot converge; changes wait until it clears",
                    detail.field
                ),
            ),
        };
        out.push((
            reference,
            Event {
                secondary: related,
                ..event(type_, reason, note, "Drift")
            },
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn a_drift_is_told_on_the_drifted_object_with_field_and_manager() {
        let report = wire::DriftReport {
            app_id: wire::Id::new("a1"),
            revision: "r1".into(),
            class: wire::DriftClass::Recoverable,
            details: vec![wire::DriftDetail {
                resource: "Deployment/shop-web".into(),
                field: "spec.replicas".into(),
                desired: json!(2),
                observed: json!(5),
                manager: Some("kubectl-scale".into()),
            }],
            observed_at: chrono::Utc::now(),
        };
        let events = drift_events(
            "shop",
            &ObjectReference::default(),
            report.class,
            &report.details,
        );
        assert_eq!(events.len(), 2);
        let (on, found) = &events[0];
        assert_eq!(
            (
                on.kind.as_deref(),
                on.name.as_deref(),
                on.api_version.as_deref()
            ),
            (Some("Deployment"), Some("shop-web"), Some("apps/v1"))
        );
        assert_eq!(found.reason, "DriftDetected");
        assert_eq!(
            found.note.as_deref(),
            Some("spec.replicas changed by kubectl-scale: desired 2, found 5")
        );
        assert_eq!(events[1].1.reason, "DriftHealed");
    }
}
