//! An organization's alerts.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// `{org}/alerts/{id}` in a path.
#[derive(Debug, Deserialize, Serialize, JsonSchema)]
pub struct AlertPath {
    pub org: String,
    pub id: String,
}

/// Filters of the alert list.
#[derive(Debug, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct AlertQuery {
    /// `open` (nobody acknowledged it yet), `acknowledged` or `resolved`; every alert when
    /// absent.
    #[schemars(extend("enum" = ["open", "acknowledged", "resolved"]))]
    pub state: Option<String>,
    /// At most this many, newest first: 1 to 500 (default 100).
    #[schemars(range(min = 1, max = 500))]
    pub limit: Option<u32>,
}

/// An alert.
#[derive(Debug, Serialize, Deserialize, JsonSchema)]
pub struct AlertResponse {
    pub id: String,
    pub org: String,
    /// `heartbeat_missed` (a cluster silent past its heartbeat window),
    /// `progress_deadline_exceeded` (an App not running within its progress deadline),
    /// `deletion_deadline_exceeded` (an App, addon or project whose deletion did not finish
    /// within its progress deadline), `gitops_write_failed` (an App's or addon's GitOps folder
    /// not written) or `verification_failed` (an App's failed revision that kubenest stopped
    /// acting on: its automatic rollback failed too, or nothing earlier passed).
    pub kind: String,
    /// `critical` or `warning`.
    pub severity: String,
    /// `open`, `acknowledged` or `resolved`.
    pub state: String,
    /// `cluster`, `app`, `addon` or `project`.
    pub subject_kind: String,
    pub subject_id: String,
    pub subject_name: String,
    pub cluster_id: Option<String>,
    pub project_id: Option<String>,
    pub message: String,
    pub opened_at: String,
    pub acknowledged_at: Option<String>,
    pub acknowledged_by: Option<String>,
    pub resolved_at: Option<String>,
    /// Why it was resolved.
    pub resolution: Option<String>,
}
