//! An App's deployments.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// One deployment of an App.
#[derive(Debug, Serialize, Deserialize, JsonSchema)]
pub struct DeploymentView {
    pub id: String,
    pub revision: String,
    /// `create`, `update`, `rollback`, `pause`, `resume`, `redeploy` or `delete`.
    pub operation: String,
    /// Who: a kubenest user, or `kubernetes:<user>` for another Kubernetes identity (kubectl,
    /// GitOps), as the admission webhook stamped it.
    pub actor: String,
    /// `pending`, `succeeded`, `failed`, `superseded`, or `forced` (an admin removed the App
    /// without its cluster's confirmation; the message says what may be left there).
    pub result: String,
    pub message: String,
    pub created_at: String,
    pub finished_at: Option<String>,
    /// The deployment this one restored, for rollbacks.
    pub rollback_of: Option<String>,
    /// JSON Patch (RFC 6902) from the spec before to the spec after.
    pub diff: Value,
    /// The verdict on this deployment's revision once it ran, when it was verified.
    pub verification: Option<crate::verification::VerdictView>,
    /// Why kubenest made this deployment itself (an automatic rollback after a failed
    /// verification); empty for a person's.
    pub reason: String,
}

#[derive(Debug, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct HistoryQuery {
    /// At most this many, newest first (1 to 500, default 100).
    #[schemars(range(min = 1, max = 500))]
    pub limit: Option<i64>,
}
