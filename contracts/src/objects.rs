//! An App's live objects on its cluster: one `objects.request` is answered by exactly one
//! `objects.snapshot`, routed by the hub to the backend that asked and to no other.
//!
//! The request names the App only by its id: the agent finds the namespace from the App it
//! holds, so a request cannot point it at another namespace. The answer never carries a Secret,
//! and every list and string in it is bounded.

use chrono::{DateTime, Utc};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::common::Id;
use crate::status::RejectReason;

/// Objects in one snapshot at most; more are cut and the snapshot says `truncated`. Each
/// object's fields are bounded too, so that even a snapshot of the longest ones stays under a
/// frame's 1 MiB (300 × about 2.4 KB).
pub const MAX_OBJECTS: usize = 300;

/// Ask the agent for the live objects of an App (fail-closed: never queued).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct ObjectsRequest {
    /// Names the answer; the hub routes the `objects.snapshot` by it.
    pub request_id: Id,
    /// The App's uid; the agent reads its namespace from the StackDeploy it holds for it.
    pub app_id: Id,
}

/// One live object of an App.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct LiveObject {
    /// `Deployment`, `ReplicaSet`, `Pod`, `Service`, …
    #[schemars(length(min = 1, max = 63))]
    pub kind: String,
    #[schemars(length(min = 1, max = 253))]
    pub name: String,
    #[schemars(length(min = 1, max = 64))]
    pub uid: String,
    /// The uids of the objects that own this one (its parents in the tree).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 8))]
    pub owners: Vec<String>,
    /// The App component the object belongs to, when labelled with one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 63))]
    pub component: Option<String>,
    pub status: ObjectStatus,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub created: Option<DateTime<Utc>>,
}

/// A summary of an object's status, the same few fields for every kind.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct ObjectStatus {
    /// How the object is doing: `ready`, `progressing`, `failed` or `unknown`.
    pub health: Health,
    /// The kind's own phase, e.g. a Pod's `Running` or a PVC's `Bound`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 63))]
    pub phase: Option<String>,
    /// Ready replicas (or containers, for a Pod).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ready: Option<u32>,
    /// Desired replicas (or containers, for a Pod).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub desired: Option<u32>,
    /// Container restarts, for a Pod.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub restarts: Option<u32>,
    /// A short machine-readable reason, e.g. `CrashLoopBackOff`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 128))]
    pub reason: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 1024))]
    pub message: Option<String>,
}

/// How an object is doing.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Health {
    Ready,
    Progressing,
    Failed,
    #[default]
    Unknown,
}

/// Why the agent gave no objects.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct ObjectsRefused {
    pub reason: RejectReason,
    #[schemars(length(max = 4096))]
    pub message: String,
}

/// The answer to an `objects.request`: the App's objects, flat, each naming its owners.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct ObjectsSnapshot {
    pub request_id: Id,
    #[schemars(length(max = 300))]
    pub objects: Vec<LiveObject>,
    /// More objects matched than [`MAX_OBJECTS`]; the rest were left out.
    #[serde(default)]
    pub truncated: bool,
    /// Set when the agent could not answer (no such App here, a namespace it may not read).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub refused: Option<ObjectsRefused>,
    pub taken_at: DateTime<Utc>,
}
