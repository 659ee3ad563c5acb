//! Alerts: a cluster silent past its heartbeat window, an App past its progress deadline. The
//! controllers open and resolve them; here they are listed and acknowledged. Each caller sees
//! the alerts of what they have a role on (the organization, the cluster, or the App's project)
//! and acknowledges with the member role there.

pub use kubenest_api::alerts::{AlertPath, AlertQuery, AlertResponse};

use crate::extract::Query;
use axum::Json;
use axum::extract::{Path, State};
use kube::ResourceExt;
use kubenest_crds::common::Role;
use kubenest_store::{Alert, AlertState};

use super::{OrgView, org_view};
use crate::authz::{self, Caller, Need};
use crate::error::{ApiError, ApiResult};
use crate::state::AppState;

fn state_name(state: AlertState) -> &'static str {
    match state {
        AlertState::Open => "open",
        AlertState::Acknowledged => "acknowledged",
        AlertState::Resolved => "resolved",
    }
}

fn response(alert: Alert) -> AlertResponse {
    let at = |t: chrono::DateTime<chrono::Utc>| t.to_rfc3339();
    AlertResponse {
        id: alert.id.to_string(),
        state: state_name(alert.state()).into(),
        org: alert.org_id,
        kind: alert.kind,
        severity: alert.severity,
        subject_kind: alert.subject_kind,
        subject_id: alert.subject_id,
        subject_name: alert.subject_name,
        cluster_id: alert.cluster_id,
        project_id: alert.project_id,
        message: alert.message,
        opened_at: at(alert.opened_at),
        acknowledged_at: alert.acknowledged_at.map(at),
        acknowledged_by: alert.acknowledged_by,
        resolved_at: alert.resolved_at.map(at),
        resolution: alert.resolution,
    }
}

/// The caller's role on what `alert` is about: its project (an App's), else its cluster, else
/// the organization (a subject gone since).
fn role_on(caller: &Caller, view: &OrgView, alert: &Alert) -> Option<Role> {
    let uid_is = |id: &Option<String>, uid: Option<String>| id.is_some() && *id == uid;
    if let Some(project) = view
        .projects
        .iter()
        .find(|p| uid_is(&alert.project_id, p.uid()))
    {
        return view.project_role(caller, project);
    }
    if let Some(cluster) = view
        .clusters
        .iter()
        .find(|c| uid_is(&alert.cluster_id, c.uid()))
    {
        return view.cluster_role(caller, cluster);
    }
    authz::role_at(caller, &view.org, None, None)
}

/// The organization's alerts you have a role on, newest first.
pub async fn list(
    State(state): State<AppState>,
    caller: Caller,
    Path(path): Path<super::OrgPath>,
    Query(query): Query<AlertQuery>,
) -> ApiResult<Json<Vec<AlertResponse>>> {
    let view = org_view(&state, &caller, &path.org).await?;
    let wanted = match query.state.as_deref() {
        None => None,
        Some("open") => Some(AlertState::Open),
        Some("acknowledged") => Some(AlertState::Acknowledged),
        Some("resolved") => Some(AlertState::Resolved),
        Some(_) => {
            return Err(ApiError::invalid(
                "state",
                "one of open, acknowledged or resolved",
            ));
        }
    };
    let limit = query.limit.unwrap_or(100);
    if !(1..=500).contains(&limit) {
        return Err(ApiError::invalid("limit", "between 1 and 500"));
    }
    let alerts = state
        .history()
        .alerts()
        .list(&path.org, wanted, i64::from(limit))
        .await?;
    Ok(Json(
        alerts
            .into_iter()
            .filter(|a| role_on(&caller, &view, a).is_some())
            .map(response)
            .collect(),
    ))
}

/// Acknowledges an alert (members): it stays until what it is about ends, marked as seen by
/// you. The first acknowledgement stands.
pub async fn acknowledge(
    State(state): State<AppState>,
    caller: Caller,
    Path(path): Path<AlertPath>,
) -> ApiResult<Json<AlertResponse>> {
    let view = org_view(&state, &caller, &path.org).await?;
    let id = uuid::Uuid::parse_str(&path.id).map_err(|_| ApiError::not_found("alert"))?;
    let alerts = state.history().alerts();
    let alert = alerts.get(&path.org, id).await.map_err(|e| match e {
        kubenest_store::StoreError::NotFound => ApiError::not_found("alert"),
        other => other.into(),
    })?;
    authz::require(role_on(&caller, &view, &alert), Need::Write, "alert")?;
    let acknowledged = alerts.acknowledge(&path.org, id, &caller.user).await?;
    Ok(Json(response(acknowledged)))
}
