//! Status events: agent → controllers. The hub stamps each with the sending session's cluster,
//! so an agent can only ever speak for its own cluster.

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use uuid::Uuid;

use crate::common::{Condition, Id, Name};

/// Sent first on every connection.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct Hello {
    #[schemars(length(min = 1, max = 64))]
    pub agent_version: String,
    /// Optional features this agent supports, e.g. `build.dockerfile`, `logs`.
    #[serde(default)]
    #[schemars(length(max = 64), inner(length(min = 1, max = 64)))]
    pub capabilities: Vec<String>,
    #[schemars(length(min = 1, max = 64))]
    pub kubernetes_version: String,
}

/// Periodic liveness and capacity of the cluster.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct Heartbeat {
    pub node_count: u32,
    pub cpu_allocatable_millis: u64,
    pub cpu_requested_millis: u64,
    pub memory_allocatable_bytes: u64,
    pub memory_requested_bytes: u64,
    pub observed_at: DateTime<Utc>,
}

/// The agent stored the command durably (as a StackDeploy or BuildRequest, or applied it).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct CommandAccepted {
    /// The command envelope's `id`.
    pub command_id: Uuid,
}

/// Why the agent refused a command.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum RejectReason {
    /// The command is well-formed but not valid for this cluster (e.g. bad reference).
    Invalid,
    /// It targets a namespace outside its project.
    NamespaceViolation,
    /// The agent does not support this kind of command.
    Unsupported,
    /// A newer revision is already applied.
    Stale,
    /// The agent could not store it (e.g. the local API server refused).
    Internal,
}

/// The agent refused a command; the reason travels back to the user.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct CommandRejected {
    pub command_id: Uuid,
    pub reason: RejectReason,
    #[schemars(length(max = 4096))]
    pub message: String,
    /// JSON pointer into the command's payload naming the offending field.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 1024))]
    pub field: Option<String>,
}

/// Lifecycle of a project's namespace.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum ProjectPhase {
    Pending,
    Ready,
    Terminating,
    Deleted,
    Failed,
}

/// Where a project's namespace stands.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct ProjectStatus {
    pub project_id: Id,
    pub namespace: Name,
    pub phase: ProjectPhase,
    #[serde(default)]
    #[schemars(length(max = 4096))]
    pub message: String,
    pub observed_at: DateTime<Utc>,
    /// What the namespace uses of what its quota limits (`requests.cpu` → `1500m`), as the
    /// cluster's ResourceQuota counts it; empty without a quota.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    #[schemars(extend("maxProperties" = 16))]
    pub usage: crate::Usage,
    /// A fence someone changed or removed on the cluster, which the agent has just put back
    /// (`ResourceQuota kubenest-quota: spec changed; restored`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 16))]
    pub healed: Vec<String>,
}

/// Lifecycle of an App on its cluster.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum AppPhase {
    Pending,
    Deploying,
    Running,
    Failed,
    Paused,
    Deleting,
    Deleted,
}

/// Health of one component.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct ComponentStatus {
    pub name: Name,
    #[schemars(length(min = 1, max = 32))]
    pub kind: String,
    pub ready_replicas: u32,
    pub desired_replicas: u32,
    pub ready: bool,
    #[serde(default)]
    #[schemars(length(max = 4096))]
    pub message: String,
}

/// An export Secret an addon published: the keys, never the values.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct PublishedExport {
    pub component: Name,
    pub secret: Name,
    #[schemars(length(max = 32), inner(length(min = 1, max = 63)))]
    pub keys: Vec<String>,
}

/// What the agent observes of an App.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct AppStatus {
    pub app_id: Id,
    /// The revision the StackDeploy on the cluster is at.
    #[schemars(length(min = 1, max = 64), regex(pattern = r"^[a-z0-9]+$"))]
    pub observed_revision: String,
    pub phase: AppPhase,
    #[schemars(length(max = 64))]
    pub components: Vec<ComponentStatus>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 253))]
    pub ingress_address: Option<String>,
    #[serde(default)]
    #[schemars(length(max = 64))]
    pub exports: Vec<PublishedExport>,
    #[serde(default)]
    #[schemars(length(max = 32))]
    pub conditions: Vec<Condition>,
    pub observed_at: DateTime<Utc>,
    /// Increases with every event the agent sends about this App; stale events are dropped.
    pub sequence: u64,
}

/// Whether drift heals itself or blocks further changes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum DriftClass {
    /// Re-applied by the agent.
    Recoverable,
    /// The workload is Degraded or its rollout failed; mutations are refused until it clears.
    BlockedSync,
}

/// One field that differs from the desired state.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct DriftDetail {
    /// `Kind/name`, e.g. `Deployment/shop-web`.
    #[schemars(length(min = 1, max = 512))]
    pub resource: String,
    /// Path of the field, e.g. `spec.replicas`.
    #[schemars(length(min = 1, max = 512))]
    pub field: String,
    pub desired: serde_json::Value,
    pub observed: serde_json::Value,
    /// The field manager that last changed it, when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 256))]
    pub manager: Option<String>,
}

/// Drift of an App from its desired state (or its clearing, with no details).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct DriftReport {
    pub app_id: Id,
    #[schemars(length(min = 1, max = 64), regex(pattern = r"^[a-z0-9]+$"))]
    pub revision: String,
    pub class: DriftClass,
    #[schemars(length(max = 128))]
    pub details: Vec<DriftDetail>,
    pub observed_at: DateTime<Utc>,
}

/// Lifecycle of a standalone addon.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum AddonPhase {
    Pending,
    Installing,
    Ready,
    Failed,
    Deleting,
    Deleted,
}

/// What the agent observes of a standalone addon.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct AddonStatus {
    pub addon_id: Id,
    #[schemars(range(min = 1))]
    pub observed_revision: u32,
    pub phase: AddonPhase,
    #[serde(default)]
    #[schemars(length(max = 4096))]
    pub message: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub export: Option<PublishedExport>,
    /// The GitOps commit holding this revision's Chart.yaml and values.yaml.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(regex(pattern = r"^[0-9a-f]{40,64}$"))]
    pub git_commit: Option<String>,
    /// Why the GitOps repository could not be written for this revision (a commit or a push
    /// refused): the addon runs regardless, and the agent tries again.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 4096))]
    pub gitops_error: Option<String>,
    /// Fields of the addon's objects another manager had changed, found and applied back by
    /// the pass that reports this (each reported once; the next report clears them).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 128))]
    pub drift: Vec<DriftDetail>,
    pub observed_at: DateTime<Utc>,
}

/// Lifecycle of an image build.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum BuildPhase {
    Pending,
    Running,
    Succeeded,
    Failed,
}

/// Progress of an image build.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct BuildStatus {
    pub build_id: Id,
    pub phase: BuildPhase,
    /// The pushed image, once Succeeded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 1024))]
    pub image: Option<String>,
    #[serde(default)]
    #[schemars(length(max = 4096))]
    pub message: String,
    pub observed_at: DateTime<Utc>,
}

/// One log line of a container.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct LogLine {
    pub timestamp: DateTime<Utc>,
    #[schemars(length(min = 1, max = 253))]
    pub pod: String,
    #[schemars(length(min = 1, max = 63))]
    pub container: String,
    #[schemars(length(max = 16384))]
    pub line: String,
}

/// A batch of log lines for a subscription.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct LogLines {
    pub subscription_id: Id,
    #[schemars(length(min = 1, max = 1000))]
    pub lines: Vec<LogLine>,
}

/// Why a log stream ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum LogEndReason {
    /// Every pod's stream ended (the pods ended, or nothing more was asked for).
    PodEnded,
    /// The subscriber went away (an unsubscribe).
    ClientGone,
    /// A per-stream limit was hit (lines too fast, or the reader too slow).
    Limit,
    /// The agent refused the subscription (e.g. no such component, no pods).
    Refused,
    /// The hub session the stream travelled on dropped.
    SessionDropped,
    /// Reading the logs failed.
    Error,
}

/// The last frame of a log stream: it says why no more lines come.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct LogEnd {
    pub subscription_id: Id,
    pub reason: LogEndReason,
    #[serde(default)]
    #[schemars(length(max = 4096))]
    pub message: String,
}

/// One StackDeploy the agent holds.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct SnapshotEntry {
    pub app_id: Id,
    #[schemars(length(min = 1, max = 64), regex(pattern = r"^[a-z0-9]+$"))]
    pub revision: String,
    /// SHA-256 (hex) of the canonical JSON of the StackDeploy's desired state.
    #[schemars(regex(pattern = r"^[0-9a-f]{64}$"))]
    pub checksum: String,
    pub phase: AppPhase,
}

/// Everything the agent holds, sent on each connect so lost events heal themselves.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct Snapshot {
    #[schemars(length(max = 10000))]
    pub stack_deploys: Vec<SnapshotEntry>,
    pub taken_at: DateTime<Utc>,
}
