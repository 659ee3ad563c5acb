//! The list of Apps.

use super::{AppResponse, PHASES};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Filters and paging of the App list.
#[derive(Debug, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ListQuery {
    /// Only this organization's Apps.
    pub org: Option<String>,
    /// Only this project's Apps.
    pub project_id: Option<String>,
    /// Only the Apps on this cluster (its `cluster_id`).
    pub cluster_id: Option<String>,
    /// Only the Apps in this phase: `Pending`, `Deploying`, `Running`, `Paused`, `Failed` or
    /// `Deleting`.
    #[schemars(extend("enum" = PHASES))]
    pub phase: Option<String>,
    /// Page size, 1 to 500 (default 100).
    #[schemars(range(min = 1, max = 500))]
    pub limit: Option<u32>,
    /// The `continue` of the previous page, with the same filters.
    #[serde(rename = "continue")]
    #[schemars(regex(pattern = r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?/[A-Za-z0-9_-]*)?$"))]
    pub continue_token: Option<String>,
}

/// A page of Apps.
#[derive(Debug, Serialize, Deserialize, JsonSchema)]
pub struct AppList {
    pub items: Vec<AppResponse>,
    /// Pass as `continue` for the next page; absent on the last.
    #[serde(rename = "continue", skip_serializing_if = "Option::is_none")]
    pub continue_token: Option<String>,
}
