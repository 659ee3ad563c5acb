//! Control frames between a session and the hub itself: routing results, revocation floors and
//! errors.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use uuid::Uuid;

use crate::common::Id;

/// The hub wrote the command to the agent's socket. Proves routing only, not that the cluster
/// changed: that is what the agent's status events are for.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct RouteAck {
    pub command_id: Uuid,
}

/// Why the hub did not route a command.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum NackReason {
    /// No agent of that cluster is connected to this replica.
    NoSession,
    /// The command's org_id is not the cluster's registered organization.
    OrgMismatch,
    /// The cluster's session was revoked.
    Revoked,
    /// The agent's send queue is full; it is being disconnected.
    QueueFull,
    /// The frame failed validation.
    Invalid,
}

/// The hub did not route a command.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct RouteNack {
    pub command_id: Uuid,
    pub reason: NackReason,
    #[serde(default)]
    #[schemars(length(max = 4096))]
    pub message: String,
}

/// A cluster's registration as the hub needs it: its organization and the lowest token version
/// it still admits.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct Floor {
    pub cluster_id: Id,
    pub org_id: Id,
    pub min_token_version: u64,
}

/// Every cluster's floor, replacing what the hub held. Large fleets send it in parts; the hub
/// applies the snapshot once all `parts` of one `snapshot_id` have arrived.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct FloorsSnapshot {
    pub snapshot_id: Uuid,
    #[schemars(range(min = 1))]
    pub part: u32,
    #[schemars(range(min = 1))]
    pub parts: u32,
    #[schemars(length(max = 5000))]
    pub floors: Vec<Floor>,
}

/// Changed floors (a new cluster, a rotated token), applied at once.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct FloorsUpdate {
    #[schemars(length(min = 1, max = 5000))]
    pub floors: Vec<Floor>,
}

/// The hub applied a `floors.snapshot` part or a `floors.update` (its envelope's
/// `correlation_id` is that frame's `id`): from now on this replica admits no token below those
/// floors, and the sessions they revoke are being closed. A backend that must know revocation
/// took effect (a token rotation answering its caller) waits for this from every replica.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct FloorsApplied {
    /// The `id` of the floors frame applied.
    pub frame_id: Uuid,
    /// How many live sessions the floors revoked on this replica.
    pub sessions_cut: u32,
}

/// What kind of error a peer made.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum ErrorCode {
    /// Larger than the frame limit.
    TooLarge,
    /// Not JSON, or not a JSON object.
    MalformedJson,
    /// Nested deeper than the limit.
    TooDeep,
    /// Does not match the schema of its type.
    Invalid,
    /// A `type` this side does not know.
    UnknownType,
    /// A `schema_version` this side does not speak.
    UnsupportedVersion,
    /// The direction does not match the type, or this session may not send it.
    Forbidden,
}

/// The peer's last frame was refused.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct ErrorFrame {
    pub code: ErrorCode,
    #[schemars(length(max = 4096))]
    pub message: String,
    /// JSON pointer to the offending part of the frame (`""` for the whole frame).
    #[schemars(length(max = 1024))]
    pub path: String,
    /// The refused frame's `id`, when it could be read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub frame_id: Option<Uuid>,
}
