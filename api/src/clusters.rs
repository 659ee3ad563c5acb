//! Clusters: registration, scale, token rotation and what the agent reports.

use crate::members::MemberView;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// One health check.
#[derive(Debug, Serialize, Deserialize, JsonSchema)]
pub struct HealthView {
    pub name: String,
    /// `ok`, `warning`, `critical` or `unknown` (no report within the heartbeat window).
    pub status: String,
    pub message: String,
    pub observed_at: String,
}

/// A cluster with its state, capacity and health.
#[derive(Debug, Serialize, Deserialize, JsonSchema)]
pub struct ClusterResponse {
    pub id: String,
    pub name: String,
    pub org: String,
    pub display_name: Option<String>,
    /// `pending`, `connected`, `disconnected`, ...
    pub state: String,
    /// `existing`: brought by its owner, not scaled by kubenest.
    pub provider: String,
    pub token_version: u64,
    pub desired_node_count: Option<u32>,
    /// CPU cores allocatable on the cluster's nodes.
    pub cpu_total: f64,
    /// CPU cores requested by pods.
    pub cpu_used: f64,
    /// Memory allocatable, bytes.
    pub mem_total: u64,
    /// Memory requested by pods, bytes.
    pub mem_used: u64,
    pub node_count: u32,
    pub last_heartbeat: Option<String>,
    pub health: Vec<HealthView>,
    pub agent_version: Option<String>,
    pub kubernetes_version: Option<String>,
    pub created_at: Option<String>,
    pub members: Vec<MemberView>,
}

#[derive(Debug, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct NewClusterBody {
    /// DNS label, unique in the organization.
    #[schemars(length(min = 1, max = 63), regex(pattern = crate::DNS_LABEL_PATTERN))]
    pub name: String,
    #[serde(default)]
    pub display_name: Option<String>,
}

/// A registration: the token appears in this response and in rotations, nowhere else.
#[derive(Debug, Serialize, Deserialize, JsonSchema)]
pub struct RegistrationResponse {
    pub cluster_id: String,
    pub connection_token: String,
    pub token_version: u64,
    /// The agent's install command, complete with the token.
    pub helm_install_command: String,
    pub cluster: ClusterResponse,
}

/// A new token (the old one stops working and the agent's live session is cut at once).
#[derive(Debug, Serialize, Deserialize, JsonSchema)]
pub struct RotationResponse {
    pub cluster_id: String,
    pub connection_token: String,
    pub token_version: u64,
    pub helm_install_command: String,
    /// Every hub replica confirmed, before this answer, that it refuses the old token and has
    /// cut the session it held. `false` when a replica could not be reached from this API
    /// server (it refuses the old token once the controllers reach it, and turns every agent
    /// away when its floors go stale) or when this server has no hub configured.
    pub old_token_revoked: bool,
}

#[derive(Debug, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ScaleBody {
    #[schemars(range(min = 1, max = 1000))]
    pub desired_node_count: u32,
}
