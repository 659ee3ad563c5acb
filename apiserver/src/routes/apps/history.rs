//! An App's deployment history, each deployment with its diff.

pub use kubenest_api::apps::{DeploymentView, HistoryQuery};

use crate::extract::Query;
use axum::Json;
use axum::extract::{Path, State};
use kube::ResourceExt;
use serde_json::json;

use super::super::IdPath;
use super::*;
use crate::authz::{Caller, Need};
use crate::error::{ApiError, ApiResult};
use crate::state::AppState;

/// An App's deployments, newest first.
pub async fn deployments(
    State(state): State<AppState>,
    caller: Caller,
    Path(path): Path<IdPath>,
    Query(query): Query<HistoryQuery>,
) -> ApiResult<Json<Vec<DeploymentView>>> {
    let limit = query.limit.unwrap_or(100);
    if !(1..=500).contains(&limit) {
        return Err(ApiError::invalid("limit", "between 1 and 500"));
    }
    let scoped = load(&state, &caller, &path.id).await?;
    scoped.require(Need::Read, "app")?;
    let rows = state
        .history()
        .app_history(&scoped.org.name_any(), &path.id, limit)
        .await?;
    Ok(Json(
        rows.into_iter()
            .map(|d| {
                let before = d.spec_before.clone().unwrap_or_else(|| json!({}));
                let diff = serde_json::to_value(json_patch::diff(&before, &d.spec_after))
                    .unwrap_or_default();
                DeploymentView {
                    id: d.id.to_string(),
                    revision: d.revision,
                    operation: d.operation.as_str().to_owned(),
                    actor: d.actor,
                    result: d.status.as_str().to_owned(),
                    message: d.message,
                    created_at: d.created_at.to_rfc3339(),
                    finished_at: d.finished_at.map(|t| t.to_rfc3339()),
                    rollback_of: d.rollback_of.map(|id| id.to_string()),
                    diff,
                    verification: crate::model::verdict::verdict_of_row(d.verification.as_ref()),
                    reason: d.reason,
                }
            })
            .collect(),
    ))
}
