//! The live Kubernetes objects of an App.

use chrono::{DateTime, Utc};
use kubenest_contracts as wire;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// An App's live objects, flat: each names its owners, whose uids are in the same list.
#[derive(Debug, Serialize, Deserialize, JsonSchema)]
pub struct AppObjects {
    pub objects: Vec<LiveObjectView>,
    /// The cluster had more objects than one answer holds; the rest were left out.
    pub truncated: bool,
    /// When the cluster listed them.
    pub taken_at: DateTime<Utc>,
}

/// One object of the App on its cluster.
#[derive(Debug, Serialize, Deserialize, JsonSchema)]
pub struct LiveObjectView {
    /// `Deployment`, `StatefulSet`, `DaemonSet`, `ReplicaSet`, `Pod`, `Service`, `Ingress`,
    /// `PersistentVolumeClaim`, `Job` or `CronJob`.
    pub kind: String,
    pub name: String,
    pub uid: String,
    /// The uids of its owners in this list (its parents in the tree); empty for a root.
    pub owners: Vec<String>,
    /// The App component it belongs to, when it says.
    pub component: Option<String>,
    pub status: ObjectStatusView,
    pub created: Option<DateTime<Utc>>,
}

/// How an object is doing.
#[derive(Debug, Serialize, Deserialize, JsonSchema)]
pub struct ObjectStatusView {
    /// `ready`, `progressing`, `failed` or `unknown`.
    pub health: wire::Health,
    /// The kind's own phase (a Pod's `Running`, a claim's `Bound`, a Service's type).
    pub phase: Option<String>,
    /// Ready replicas (containers, for a Pod).
    pub ready: Option<u32>,
    /// Desired replicas (containers, for a Pod).
    pub desired: Option<u32>,
    /// Container restarts, for a Pod.
    pub restarts: Option<u32>,
    /// Why it is not ready, e.g. `CrashLoopBackOff`.
    pub reason: Option<String>,
    pub message: Option<String>,
}
