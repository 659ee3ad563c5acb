//! What the management plane writes into statuses from what an agent observed: the partial
//! statuses the status router and fleet health send as merge patches (each under `status`).
//!
//! Each struct is the part of one status its writer owns. A merge patch replaces only the keys
//! it carries, so the fields other writers own are left alone; and it keeps what it does not
//! mention, so a field that can go away (a message, a rejection's field, a drift class) is
//! written even when empty: its `None` serializes as `null`, which clears it. The fields that
//! are skipped when absent are the ones the writer adds only sometimes (an acceptance riding on a
//! status). Arrays are replaced whole by a merge patch, so inside them the status types
//! ([`ComponentStatus`], [`DriftDetail`]) serialize as they are.

use serde::Serialize;

use crate::app::{ComponentStatus, DriftDetail};
use crate::cluster::{Capacity, ClusterState, HealthCheck};
use crate::common::Condition;

/// An App's status from an `app.status` event.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct AppObserved {
    pub observed_revision: String,
    pub cluster_phase: String,
    /// Why the agent reports the App not ready, if it says; `null` clears an earlier one.
    pub cluster_message: Option<String>,
    pub components: Vec<ComponentStatus>,
    pub ingress_address: Option<String>,
    pub observed_at: String,
    pub observed_sequence: u64,
    /// Why the agent could not write the App's addon folders to the GitOps repository, if it
    /// could not; `null` once it could.
    pub gitops_error: Option<String>,
    /// An acceptance of `app.deploy` riding on this status, when one was waiting.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub accepted_revision: Option<String>,
}

/// An agent's acceptance of `app.deploy`, written alone.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct AppAccepted {
    pub accepted_revision: String,
}

/// An App's drift from a `drift.report`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct AppDrift {
    pub sync: ObservedSync,
}

/// [`crate::app::Sync`] as a drift report writes it: a class that cleared is `null`.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ObservedSync {
    pub drift_detected: bool,
    pub drift_class: Option<String>,
    pub drift_details: Vec<DriftDetail>,
}

/// The agent's verdict on an App's revision.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct AppVerified {
    pub verification: crate::verification::VerificationStatus,
}

/// The agent's refusal of an App's `app.deploy`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct AppRejected {
    pub rejection: ObservedRejection,
}

/// [`crate::app::Rejection`] as a refusal writes it: a refusal naming no field clears the field
/// an earlier one named (`null`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ObservedRejection {
    pub revision: String,
    pub reason: String,
    pub message: String,
    pub field: Option<String>,
}

/// A redeploy request the agent carried out (or refused).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct AppRedeployHandled {
    pub handled_redeploy: String,
}

/// A Project's status from a `project.status` event.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ProjectObserved {
    pub cluster_phase: String,
    pub cluster_message: String,
    pub observed_at: String,
    /// The namespace's quota use; a key the quota no longer counts is `null`, which a merge
    /// patch removes.
    pub usage: std::collections::BTreeMap<String, Option<String>>,
    pub healed: Vec<String>,
}

/// The keys of a ResourceQuota's `used` that fences report.
pub const USAGE_KEYS: [&str; 5] = [
    "requests.cpu",
    "requests.memory",
    "requests.storage",
    "pods",
    "services.loadbalancers",
];

impl ProjectObserved {
    /// The usage as a merge patch writes it: every key of [`USAGE_KEYS`], `null` when absent.
    pub fn usage_patch(
        usage: &std::collections::BTreeMap<String, String>,
    ) -> std::collections::BTreeMap<String, Option<String>> {
        USAGE_KEYS
            .iter()
            .map(|key| ((*key).to_owned(), usage.get(*key).cloned()))
            .collect()
    }
}

/// The agent's acceptance of `project.ensure` for a generation.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ProjectEnsured {
    pub ensured_generation: i64,
}

/// The agent's refusal of `project.ensure`: the namespace phase as the agent left it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ProjectRefused {
    pub cluster_phase: String,
    pub cluster_message: String,
}

/// An AddonInstance's status from an `addon.status` event.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct AddonObserved {
    pub observed_revision: u32,
    pub cluster_phase: String,
    pub message: String,
    pub export_secret: Option<String>,
    pub git_commit: Option<String>,
    /// Why the agent could not write the addon's GitOps folder, if it could not.
    pub gitops_error: Option<String>,
    /// The fields the agent found changed by another manager and applied back, as the report
    /// carried them (none: in sync).
    pub sync: ObservedSync,
}

/// The agent's refusal of an `addon.apply`: that revision failed, with why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct AddonRefused {
    pub observed_revision: u32,
    pub cluster_phase: String,
    pub message: String,
}

/// A Cluster's fleet health from its heartbeats (or their absence). The Cluster controller
/// writes the token fields concurrently, so only these go in the patch.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ClusterHealth {
    pub state: ClusterState,
    pub last_heartbeat: Option<String>,
    pub capacity: Option<Capacity>,
    pub health: Vec<HealthCheck>,
    pub conditions: Vec<Condition>,
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn value<T: Serialize>(patch: &T) -> serde_json::Value {
        serde_json::to_value(patch).unwrap()
    }

    #[test]
    fn an_app_status_clears_the_message_and_address_it_no_longer_has_and_carries_an_acceptance_only_when_one_waits()
     {
        let mut observed = AppObserved {
            observed_revision: "r1".into(),
            cluster_phase: "Running".into(),
            cluster_message: None,
            components: vec![ComponentStatus {
                name: "web".into(),
                ready_replicas: 1,
                desired_replicas: 2,
                ready: false,
                message: "1/2 ready".into(),
            }],
            ingress_address: None,
            observed_at: "2026-01-01T00:00:00Z".into(),
            observed_sequence: 7,
            gitops_error: None,
            accepted_revision: None,
        };
        // What the router wrote with `json!` before it was typed.
        assert_eq!(
            value(&observed),
            json!({
                "observedRevision": "r1",
                "clusterPhase": "Running",
                "clusterMessage": null,
                "components": [{"name": "web", "readyReplicas": 1, "desiredReplicas": 2,
                                "ready": false, "message": "1/2 ready"}],
                "ingressAddress": null,
                "observedAt": "2026-01-01T00:00:00Z",
                "observedSequence": 7,
                "gitopsError": null,
            })
        );
        observed.accepted_revision = Some("r1".into());
        observed.cluster_message = Some("NamespaceViolation: no".into());
        observed.ingress_address = Some("10.0.0.1".into());
        let patch = value(&observed);
        assert_eq!(patch["acceptedRevision"], "r1");
        assert_eq!(patch["clusterMessage"], "NamespaceViolation: no");
        assert_eq!(patch["ingressAddress"], "10.0.0.1");
        assert_eq!(
            value(&AppAccepted {
                accepted_revision: "r2".into()
            }),
            json!({"acceptedRevision": "r2"})
        );
    }

    #[test]
    fn a_drift_report_clears_the_class_when_none_is_detected() {
        let healed = AppDrift {
            sync: ObservedSync {
                drift_detected: false,
                drift_class: None,
                drift_details: vec![],
            },
        };
        assert_eq!(
            value(&healed),
            json!({"sync": {"driftDetected": false, "driftClass": null, "driftDetails": []}})
        );
        let drifted = AppDrift {
            sync: ObservedSync {
                drift_detected: true,
                drift_class: Some("recoverable".into()),
                drift_details: vec![DriftDetail {
                    resource: "Deployment/shop-web".into(),
                    field: "spec.replicas".into(),
                    desired: "2".into(),
                    observed: "3".into(),
                    manager: Some("kubectl".into()),
                }],
            },
        };
        assert_eq!(
            value(&drifted),
            json!({"sync": {"driftDetected": true, "driftClass": "recoverable", "driftDetails": [
                {"resource": "Deployment/shop-web", "field": "spec.replicas", "desired": "2",
                 "observed": "3", "manager": "kubectl"}]}})
        );
    }

    #[test]
    fn a_detail_without_a_manager_leaves_it_out_as_the_array_is_replaced_whole() {
        // Before, `"manager": null` was written; inside an array a merge patch replaces the
        // element whole and the API server drops a null there, so both store the same.
        let detail = DriftDetail {
            resource: "Deployment/shop-web".into(),
            field: "spec.replicas".into(),
            desired: "2".into(),
            observed: "3".into(),
            manager: None,
        };
        assert_eq!(
            value(&detail),
            json!({"resource": "Deployment/shop-web", "field": "spec.replicas", "desired": "2",
                   "observed": "3"})
        );
    }

    #[test]
    fn a_rejection_naming_no_field_clears_the_field_an_earlier_one_named() {
        let rejected = AppRejected {
            rejection: ObservedRejection {
                revision: "r1".into(),
                reason: "invalid".into(),
                message: "no".into(),
                field: None,
            },
        };
        assert_eq!(
            value(&rejected),
            json!({"rejection": {"reason": "invalid", "message": "no", "field": null,
                                 "revision": "r1"}})
        );
        assert_eq!(
            value(&AppRedeployHandled {
                handled_redeploy: "t1".into()
            }),
            json!({"handledRedeploy": "t1"})
        );
    }

    #[test]
    fn project_and_addon_patches_write_what_they_did_before() {
        assert_eq!(
            value(&ProjectObserved {
                cluster_phase: "Ready".into(),
                cluster_message: String::new(),
                observed_at: "2026-01-01T00:00:00Z".into(),
                usage: ProjectObserved::usage_patch(
                    &[("requests.cpu".to_owned(), "1500m".to_owned())].into()
                ),
                healed: vec!["ResourceQuota kubenest-quota: deleted; restored".into()],
            }),
            // A count the quota no longer keeps is removed by the merge patch (`null`).
            json!({"clusterPhase": "Ready", "clusterMessage": "",
                   "observedAt": "2026-01-01T00:00:00Z",
                   "usage": {"requests.cpu": "1500m", "requests.memory": null,
                             "requests.storage": null, "pods": null,
                             "services.loadbalancers": null},
                   "healed": ["ResourceQuota kubenest-quota: deleted; restored"]})
        );
        assert_eq!(
            value(&ProjectEnsured {
                ensured_generation: 3
            }),
            json!({"ensuredGeneration": 3})
        );
        assert_eq!(
            value(&ProjectRefused {
                cluster_phase: "Failed".into(),
                cluster_message: "namespace_violation".into(),
            }),
            json!({"clusterPhase": "Failed", "clusterMessage": "namespace_violation"})
        );
        assert_eq!(
            value(&AddonObserved {
                observed_revision: 2,
                cluster_phase: "Ready".into(),
                message: String::new(),
                export_secret: None,
                git_commit: None,
                gitops_error: None,
                sync: ObservedSync {
                    drift_detected: false,
                    drift_class: None,
                    drift_details: Vec::new(),
                },
            }),
            json!({"observedRevision": 2, "clusterPhase": "Ready", "message": "",
                   "exportSecret": null, "gitCommit": null, "gitopsError": null,
                   "sync": {"driftDetected": false, "driftClass": null, "driftDetails": []}})
        );
        assert_eq!(
            value(&AddonRefused {
                observed_revision: 2,
                cluster_phase: "Failed".into(),
                message: "invalid: no".into(),
            }),
            json!({"observedRevision": 2, "clusterPhase": "Failed", "message": "invalid: no"})
        );
    }

    #[test]
    fn fleet_health_writes_its_five_fields_and_clears_a_missing_heartbeat_with_null() {
        let health = ClusterHealth {
            state: ClusterState::Disconnected,
            last_heartbeat: None,
            capacity: None,
            health: vec![],
            conditions: vec![],
        };
        assert_eq!(
            value(&health),
            json!({"state": "disconnected", "lastHeartbeat": null, "capacity": null,
                   "health": [], "conditions": []})
        );
    }
}
