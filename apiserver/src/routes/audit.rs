//! An organization's audit log (organization admins): every mutation by every path, newest
//! first, filtered and paged.

use crate::extract::Query;
use axum::Json;
use axum::extract::{Path, State};
use kubenest_store::{AuditEntry, AuditFilter, AuditPath, Outcome};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::orgs::require_org_admin;
use super::{OrgPath, org_view};
use crate::authz::Caller;
use crate::error::{ApiError, ApiResult};
use crate::state::AppState;

/// Filters and paging of the audit log.
#[derive(Debug, Deserialize, JsonSchema)]
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
#[derive(Debug, Serialize, JsonSchema)]
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

impl From<AuditEntry> for AuditEntryView {
    fn from(entry: AuditEntry) -> Self {
        Self {
            id: entry.id,
            actor: entry.actor,
            actor_id: entry.actor_id,
            path: entry.path.as_str().to_owned(),
            action: entry.action,
            resource_kind: entry.resource_kind,
            resource_name: entry.resource_name,
            outcome: entry.outcome.as_str().to_owned(),
            status: entry.status,
            at: entry.at.to_rfc3339(),
            details: entry.details,
        }
    }
}

/// A page of the audit log.
#[derive(Debug, Serialize, JsonSchema)]
pub struct AuditPage {
    pub items: Vec<AuditEntryView>,
    /// Pass as `continue` for the next page; absent on the last.
    #[serde(rename = "continue", skip_serializing_if = "Option::is_none")]
    pub continue_token: Option<String>,
}

/// The continue token: `a{id}`, the last id of the page.
fn decode(token: &str) -> ApiResult<i64> {
    token
        .strip_prefix('a')
        .and_then(|id| id.parse().ok())
        .filter(|id: &i64| *id > 0)
        .ok_or_else(|| ApiError::invalid("continue", "not a continue token of this list"))
}

/// The organization's audit log (organization admins).
pub async fn list(
    State(state): State<AppState>,
    caller: Caller,
    Path(path): Path<OrgPath>,
    Query(query): Query<AuditQuery>,
) -> ApiResult<Json<AuditPage>> {
    let view = org_view(&state, &caller, &path.org).await?;
    require_org_admin(&caller, &view)?;
    let limit = query.limit.unwrap_or(100);
    if !(1..=500).contains(&limit) {
        return Err(ApiError::invalid("limit", "between 1 and 500"));
    }
    for (field, value) in [
        ("actor", &query.actor),
        ("resource_kind", &query.resource_kind),
    ] {
        if value
            .as_deref()
            .is_some_and(|v| v.len() > 512 || v.contains('\0'))
        {
            return Err(ApiError::invalid(
                field,
                "at most 512 characters, without NUL",
            ));
        }
    }
    let filter = AuditFilter {
        actor: query.actor,
        path: query
            .path
            .map(|p| {
                AuditPath::parse(&p)
                    .ok_or_else(|| ApiError::invalid("path", "one of rest, kubectl, gitops"))
            })
            .transpose()?,
        outcome: query
            .outcome
            .map(|o| {
                Outcome::parse(&o).ok_or_else(|| {
                    ApiError::invalid("outcome", "one of succeeded, refused, failed")
                })
            })
            .transpose()?,
        resource_kind: query.resource_kind,
        // An empty `continue` is the first page, as in Kubernetes' own lists.
        before_id: query
            .continue_token
            .as_deref()
            .filter(|token| !token.is_empty())
            .map(decode)
            .transpose()?,
    };
    let mut entries = state
        .history()
        .audit_page(&path.org, &filter, i64::from(limit) + 1)
        .await?;
    let more = entries.len() > limit as usize;
    entries.truncate(limit as usize);
    let continue_token = more
        .then(|| entries.last().map(|e| format!("a{}", e.id)))
        .flatten();
    Ok(Json(AuditPage {
        items: entries.into_iter().map(AuditEntryView::from).collect(),
        continue_token,
    }))
}
