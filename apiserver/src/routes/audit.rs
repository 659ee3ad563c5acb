//! An organization's audit log (organization admins): every mutation by every path, newest
//! first, filtered and paged.

pub use kubenest_api::audit::{AuditEntryView, AuditPage, AuditQuery};

use crate::extract::Query;
use axum::Json;
use axum::extract::{Path, State};
use kubenest_store::{AuditEntry, AuditFilter, AuditPath, Outcome};

use super::orgs::require_org_admin;
use super::{OrgPath, org_view};
use crate::authz::Caller;
use crate::error::{ApiError, ApiResult};
use crate::state::AppState;

/// An audit row as the API answers it.
pub fn audit_entry_view(entry: AuditEntry) -> AuditEntryView {
    AuditEntryView {
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
        items: entries.into_iter().map(audit_entry_view).collect(),
        continue_token,
    }))
}
