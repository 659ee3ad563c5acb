//! The audit log.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// Filters and paging of the audit log.
#[derive(Debug, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct AuditQuery {
    /// Only this actor's entries (a user name, or `kubernetes:{user}`).
    #[schemars(length(max = 512))]
    pub actor: Option<String>,
    /// Only entries of this path: `rest`, `kubectl` or `gitops`.
    #[schemars(extend("enum" = ["rest", "kubectl", "gitops"]))]
    pub path: Option<String>,
    /// Only entries with this outcome: `succeeded`, `refused` or `failed`.
    #[schemars(extend("enum" = ["succeeded", "refused", "failed"]))]
    pub outcome: Option<String>,
    /// Only entries on this kind (`apps`, `clusters`, `App`, ...).
    #[schemars(length(max = 512))]
    pub resource_kind: Option<String>,
    /// Page size, 1 to 500 (default 100).
    #[schemars(range(min = 1, max = 500))]
    pub limit: Option<u32>,
    /// The `continue` of the previous page, with the same filters.
    #[serde(rename = "continue")]
    #[schemars(length(max = 20), regex(pattern = r"^(a[1-9][0-9]*)?$"))]
    pub continue_token: Option<String>,
}

/// One entry.
#[derive(Debug, Serialize, Deserialize, JsonSchema)]
pub struct AuditEntryView {
    pub id: i64,
    /// Who: a kubenest user's name, or `kubernetes:{user}` for another Kubernetes identity.
    pub actor: String,
    /// The kubenest user's id, when the actor is one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub actor_id: Option<String>,
    /// `rest`, `kubectl` or `gitops`.
    pub path: String,
    /// REST: `METHOD /route`; kubectl and GitOps: `{resource}.{create|update|delete}`.
    pub action: String,
    pub resource_kind: String,
    pub resource_name: String,
    /// `succeeded`, `refused` or `failed`.
    pub outcome: String,
    /// The HTTP status (for kubectl and GitOps: what the admission answered).
    pub status: i16,
    /// When, RFC 3339.
    pub at: String,
    pub details: Value,
}

/// A page of the audit log.
#[derive(Debug, Serialize, Deserialize, JsonSchema)]
pub struct AuditPage {
    pub items: Vec<AuditEntryView>,
    /// Pass as `continue` for the next page; absent on the last.
    #[serde(rename = "continue", skip_serializing_if = "Option::is_none")]
    pub continue_token: Option<String>,
}
