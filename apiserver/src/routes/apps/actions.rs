//! Pause, resume, redeploy and rollback: each a write the App controller records as a
//! deployment (redeploy and rollback as annotations, so kubectl users have the same path).

pub use kubenest_api::apps::RollbackBody;

use crate::reply::Accepted;
use kubenest_crds::names::annotations;
use kubenest_domain::app::ways_out::Change;

use axum::Json;
use axum::extract::{Path, State};
use kube::ResourceExt;
use serde_json::json;
use uuid::Uuid;

use super::super::IdPath;
use super::*;
use crate::authz::{Caller, Need};
use crate::error::{ApiError, ApiResult};
use crate::extract::Body;
use crate::state::AppState;

async fn set_paused(
    state: AppState,
    caller: Caller,
    id: String,
    paused: bool,
) -> ApiResult<Accepted<Json<AppResponse>>> {
    let scoped = load(&state, &caller, &id).await?;
    scoped.require(Need::Write, "app")?;
    super::super::not_in_git(
        &scoped.object,
        "app",
        &format!("Set spec.paused: {paused} in its manifest in Git."),
    )?;
    if scoped.object.spec.paused == paused {
        return Err(ApiError::conflict(
            if paused {
                "already_paused"
            } else {
                "not_paused"
            },
            if paused {
                "the app is already paused"
            } else {
                "the app is not paused"
            },
        ));
    }
    admit(
        &scoped.object,
        if paused {
            Change::Pause
        } else {
            Change::Resume
        },
    )?;
    if !paused {
        // Running again takes its requests back: the project must have room for them.
        let mut spec = scoped.object.spec.clone();
        spec.paused = false;
        let name = scoped.object.name_any();
        super::check_fences(&state, &scoped.namespace(), &name, &spec).await?;
    }
    write(
        &state,
        &caller,
        &scoped,
        json!({"spec": {"paused": paused}}),
    )
    .await
}

/// Pauses an App: every workload scaled to zero, the spec kept (members).
pub async fn pause(
    State(state): State<AppState>,
    caller: Caller,
    Path(path): Path<IdPath>,
) -> ApiResult<Accepted<Json<AppResponse>>> {
    set_paused(state, caller, path.id, true).await
}

/// Resumes a paused App in its previous shape (members).
pub async fn resume(
    State(state): State<AppState>,
    caller: Caller,
    Path(path): Path<IdPath>,
) -> ApiResult<Accepted<Json<AppResponse>>> {
    set_paused(state, caller, path.id, false).await
}

/// Restarts an App's workloads with the same spec (members); a new deployment.
pub async fn redeploy(
    State(state): State<AppState>,
    caller: Caller,
    Path(path): Path<IdPath>,
) -> ApiResult<Accepted<Json<AppResponse>>> {
    let scoped = load(&state, &caller, &path.id).await?;
    scoped.require(Need::Write, "app")?;
    admit(&scoped.object, Change::Redeploy)?;
    let patch =
        json!({"metadata": {"annotations": {annotations::REDEPLOY: Uuid::new_v4().to_string()}}});
    write(&state, &caller, &scoped, patch).await
}

/// Restores the spec of an earlier deployment (members); a new deployment that points at it.
pub async fn rollback(
    State(state): State<AppState>,
    caller: Caller,
    Path(path): Path<IdPath>,
    Body(body): Body<RollbackBody>,
) -> ApiResult<Accepted<Json<AppResponse>>> {
    let scoped = load(&state, &caller, &path.id).await?;
    scoped.require(Need::Write, "app")?;
    super::super::not_in_git(
        &scoped.object,
        "app",
        "Roll back in Git: revert the commit that made the change (GET this app's deployments \
         for each one's spec).",
    )?;
    admit(&scoped.object, Change::Rollback)?;
    let Ok(target) = Uuid::parse_str(&body.deployment_id) else {
        return Err(ApiError::invalid("deployment_id", "not a deployment id"));
    };
    let found = state
        .history()
        .deployment(&scoped.org.name_any(), target)
        .await;
    match found {
        Ok(found) if found.deployment.app_id == path.id => {}
        Ok(_) | Err(kubenest_store::StoreError::NotFound) => {
            return Err(ApiError::missing(
                "deployment_id",
                "this app has no such deployment",
            ));
        }
        Err(other) => return Err(other.into()),
    }
    let patch =
        json!({"metadata": {"annotations": {annotations::ROLLBACK_TO: target.to_string()}}});
    write(&state, &caller, &scoped, patch).await
}
