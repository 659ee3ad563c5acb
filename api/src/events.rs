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
