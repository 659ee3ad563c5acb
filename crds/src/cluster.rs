//! Cluster: a workload cluster registered to an organization, reached through its agent.

use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::common::{Condition, Member, conditions_by_type};

/// A registered cluster's provider, token version and members. Raising `tokenVersion` rotates
/// its token and cuts the live session.
#[derive(CustomResource, Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "kubenest.io",
    version = "v1alpha1",
    kind = "Cluster",
    plural = "clusters",
    namespaced,
    doc = "A Cluster: a workload cluster registered to an organization, reached through its \
           agent. The status says whether the agent reports, and what the cluster holds."
)]
#[kube(shortname = "kcl", category = "kubenest", status = "ClusterStatus")]
#[kube(printcolumn(name = "State", type_ = "string", json_path = ".status.state"))]
#[kube(printcolumn(
    name = "Nodes",
    type_ = "integer",
    json_path = ".status.capacity.nodeCount"
))]
#[kube(printcolumn(
    name = "Heartbeat",
    type_ = "date",
    json_path = ".status.lastHeartbeat"
))]
#[kube(printcolumn(
    name = "Ready",
    type_ = "string",
    json_path = r#".status.conditions[?(@.type=="Ready")].status"#,
    description = "The status of the Ready condition"
))]
#[kube(printcolumn(
    name = "Status",
    type_ = "string",
    json_path = r#".status.conditions[?(@.type=="Ready")].message"#,
    description = "The message of the Ready condition"
))]
#[kube(printcolumn(
    name = "Age",
    type_ = "date",
    json_path = ".metadata.creationTimestamp"
))]
#[serde(rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-validations" = [
    {"rule": "self.tokenVersion >= oldSelf.tokenVersion", "message": "tokenVersion can only be raised (rotation)"},
    {"rule": "self.provider == oldSelf.provider", "message": "provider is immutable"}
]))]
pub struct ClusterSpec {
    /// The name people see.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 253))]
    pub display_name: Option<String>,
    /// Who provisions the cluster; `existing` clusters are not scaled by kubenest.
    #[serde(default)]
    pub provider: Provider,
    /// The version of the cluster's token; raise it to rotate.
    #[serde(default = "one")]
    #[schemars(range(min = 1))]
    pub token_version: u64,
    /// Nodes wanted, for clusters kubenest provisions.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 1000))]
    pub desired_node_count: Option<u32>,
    /// Roles on this cluster only.
    #[serde(default)]
    #[schemars(length(max = 1000))]
    pub members: Vec<Member>,
    /// CPU and memory requests the projects on this cluster may hold in all (within the
    /// organization's budget). Organization admins only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub budget: Option<crate::fences::Budget>,
}

fn one() -> u64 {
    1
}

/// Who provisions a cluster.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Provider {
    /// Brought by its owner; kubenest does not manage its machines.
    #[default]
    Existing,
}

/// A cluster's lifecycle state (spec 002).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum ClusterState {
    #[default]
    Pending,
    Provisioning,
    AwaitingOperator,
    Installing,
    Connected,
    Disconnected,
    InstallFailed,
    Error,
}

/// Capacity from the agent's heartbeats.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Capacity {
    /// Nodes.
    pub node_count: u32,
    /// Allocatable CPU, in millicores.
    pub cpu_total_millis: u64,
    /// CPU requested by pods, in millicores.
    pub cpu_used_millis: u64,
    /// Allocatable memory, in bytes.
    pub mem_total_bytes: u64,
    /// Memory requested by pods, in bytes.
    pub mem_used_bytes: u64,
}

/// The outcome of one fleet health check.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum CheckStatus {
    Ok,
    Warning,
    Critical,
    /// No report within the window: nothing is known, which is not the same as healthy.
    Unknown,
}

/// One health check of the cluster, with when it was last observed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct HealthCheck {
    /// The check's name.
    pub name: String,
    /// `ok`, `warning`, `critical` or `unknown`.
    pub status: CheckStatus,
    /// What was found.
    #[serde(default)]
    pub message: String,
    /// When it was last observed (RFC 3339).
    pub observed_at: String,
}

/// What the Cluster controller and the agent's heartbeats observed.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ClusterStatus {
    /// The lifecycle state, e.g. `connected` or `disconnected`.
    #[serde(default)]
    pub state: ClusterState,
    /// The generation of the spec the controller last wrote this status for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    /// The id in the cluster's token and the hub's routing (the object's uid).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cluster_id: Option<String>,
    /// The Secret in this namespace that holds the cluster token.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub token_secret: Option<String>,
    /// The token version last minted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub issued_token_version: Option<u64>,
    /// When the agent last reported (RFC 3339).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_heartbeat: Option<String>,
    /// Capacity from the agent's heartbeats.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub capacity: Option<Capacity>,
    /// The fleet health checks.
    #[serde(default)]
    pub health: Vec<HealthCheck>,
    /// The agent's version.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent_version: Option<String>,
    /// The cluster's Kubernetes version.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kubernetes_version: Option<String>,
    /// `Ready`, `HeartbeatMissed` and the rest, one of each type.
    #[serde(default)]
    #[schemars(transform = conditions_by_type)]
    pub conditions: Vec<Condition>,
}
