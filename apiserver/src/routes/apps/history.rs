//! An App's deployment history, each deployment with its diff.

use crate::extract::Query;
use axum::Json;
use axum::extract::{Path, State};
use kube::ResourceExt;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use super::super::IdPath;
use super::*;
use crate::authz::{Caller, Need};
use crate::error::{ApiError, ApiResult};
use crate::state::AppState;

/// One deployment of an App.
#[derive(Debug, Serialize, JsonSchema)]
pub struct DeploymentView {
    pub id: String,
    pub revision: String,
    /// `create`, `update`, `rollback`, `pause`, `resume`, `redeploy` or `delete`.
    pub operation: String,
    /// Who: a kubenest user, or `kubernetes:<user>` for another Kubernetes identity (kubectl,
    /// GitOps), as the admission webhook stamped it.
    pub actor: String,
    /// `pending`, `succeeded`, `failed`, `superseded`, or `forced` (an admin removed the App
    /// without its cluster's confirmation; the message says what may be left there).
    pub result: String,
    pub message: String,
    pub created_at: String,
    pub finished_at: Option<String>,
    /// The deployment this one restored, for rollbacks.
    pub rollback_of: Option<String>,
    /// JSON Patch (RFC 6902) from the spec before to the spec after.
    pub diff: Value,
    /// The verdict on this deployment's revision once it ran, when it was verified.
    pub verification: Option<crate::model::verdict::VerdictView>,
    /// Why kubenest made this deployment itself (an automatic rollback after a failed
    /// verification); empty for a person's.
    pub reason: String,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct HistoryQuery {
    /// At most this many, newest first (1 to 500, default 100).
    #[schemars(range(min = 1, max = 500))]
    pub limit: Option<i64>,
}

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
                    verification: crate::model::verdict::VerdictView::of_row(
                        d.verification.as_ref(),
                    ),
                    reason: d.reason,
                }
            })
            .collect(),
    ))
}
