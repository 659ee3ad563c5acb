//! What the API answers about an App: its phase, components, sync, drift and conditions.

use super::ComponentBody;
use crate::verification::VerificationView;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// Health of one component.
#[derive(Debug, Serialize, Deserialize, JsonSchema)]
pub struct ComponentStatusView {
    pub name: String,
    pub ready: bool,
    pub ready_replicas: u32,
    pub desired_replicas: u32,
    pub message: String,
}

/// One drifted field.
#[derive(Debug, Serialize, Deserialize, JsonSchema)]
pub struct DriftView {
    pub resource: String,
    pub field: String,
    pub desired: String,
    pub observed: String,
    /// The field manager that changed it, when known.
    pub manager: Option<String>,
}

/// Drift between what an App (or a standalone addon) says and what runs.
#[derive(Debug, Serialize, Deserialize, JsonSchema)]
pub struct SyncView {
    pub drift_detected: bool,
    /// `recoverable` (kubenest re-applies it) or `blocked_sync` (changes are refused until it
    /// clears).
    pub drift_class: Option<String>,
    pub drift_details: Vec<DriftView>,
}

/// An App.
#[derive(Debug, Serialize, Deserialize, JsonSchema)]
pub struct AppResponse {
    pub id: String,
    pub name: String,
    pub org: String,
    pub project: String,
    pub project_id: Option<String>,
    pub cluster_id: Option<String>,
    /// `Pending`, `Deploying`, `Running`, `Paused`, `Failed`, ...
    pub phase: String,
    /// Why, for people (the Ready condition's message).
    pub message: String,
    pub paused: bool,
    pub progress_deadline_seconds: u32,
    #[schemars(with = "Vec<ComponentBody>")]
    pub components: Vec<Value>,
    /// How each revision is judged once it runs, as the App sets it (defaults filled in);
    /// `null`: the App sets none, and its organization's default applies, if any.
    pub verification: Option<VerificationView>,
    /// The verdict on the last revision verified, and what kubenest did with it.
    pub verdict: Option<crate::verification::VerdictView>,
    pub component_status: Vec<ComponentStatusView>,
    pub sync: SyncView,
    pub revision: Option<String>,
    pub observed_revision: Option<String>,
    pub deployment_id: Option<String>,
    pub ingress_address: Option<String>,
    /// Why the agent could not write the App's addon folders to the cluster's GitOps
    /// repository (the App runs regardless; an alert is open meanwhile).
    pub gitops_error: Option<String>,
    pub observed_at: Option<String>,
    /// While the cluster is unreachable (`Ready` is `Unknown`, reason `ClusterUnreachable`):
    /// when it last reported; the phase and components are as of then.
    pub last_observation: Option<String>,
    pub created_at: Option<String>,
    /// The App's conditions (`Ready`, `RollbackFailed`, ...), each with its reason.
    pub conditions: Vec<ConditionView>,
}

/// One condition of an object.
#[derive(Debug, Serialize, Deserialize, JsonSchema)]
pub struct ConditionView {
    #[serde(rename = "type")]
    pub kind: String,
    /// `True`, `False` or `Unknown`.
    pub status: String,
    pub reason: String,
    pub message: String,
}
