//! The event stream.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

#[derive(Debug, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct StreamQuery {
    pub org: Option<String>,
    pub project_id: Option<String>,
    pub app_id: Option<String>,
    /// Resume after this event id (the `Last-Event-ID` header wins).
    pub last_event_id: Option<i64>,
}

/// The data of one event of the stream: what it is about, and the event's own fields (`phase`,
/// `message`, ...) beside them.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StreamEvent {
    /// The event's id (`Last-Event-ID` resumes after it).
    pub id: i64,
    /// What happened (`app.phase`, `cluster.state`, ...).
    pub kind: String,
    /// The organization.
    pub org: String,
    pub cluster_id: Option<String>,
    pub project_id: Option<String>,
    pub app_id: Option<String>,
    /// When (RFC 3339).
    pub at: String,
    /// The event's own fields.
    #[serde(flatten)]
    pub fields: serde_json::Map<String, serde_json::Value>,
}

impl StreamEvent {
    /// The fields every event has; an event's own fields never take these names.
    pub const COMMON: [&str; 7] = [
        "id",
        "kind",
        "org",
        "cluster_id",
        "project_id",
        "app_id",
        "at",
    ];
}
