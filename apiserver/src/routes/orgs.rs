//! Organizations and their members.

pub use kubenest_api::orgs::{NewOrgBody, OrgMemberPath, OrgResponse, PatchOrgBody};

use crate::reply::Created;
use axum::Json;
use axum::extract::{Path, State};
use axum::response::NoContent;
use kube::ResourceExt;
use kube::api::{Api, Patch};
use kubenest_crds::organization::{Organization, OrganizationSpec};

use super::{
    MemberBody, MemberView, OrgPath, OrgView, check_dns_label, new_member, org_view, patch_params,
    post_params, set_member,
};
use crate::authz::{self, Caller, Need};
use crate::error::{ApiError, ApiResult};
use crate::extract::Body;
use crate::model::verification::{self};
use crate::state::AppState;

fn response(caller: &Caller, org: &Organization) -> OrgResponse {
    let status = org.status.clone().unwrap_or_default();
    OrgResponse {
        name: org.name_any(),
        display_name: org.spec.display_name.clone(),
        namespace: status.namespace,
        phase: status.phase,
        role: authz::role_at(caller, org, None, None),
        verification: org
            .spec
            .verification
            .as_ref()
            .map(crate::model::verification::verification_view),
        budget: super::fences::budget_view(org.spec.budget.as_ref()),
        created_at: crate::k8s::created(org),
    }
}

/// Creates an organization (platform administrators only) and waits until it has its
/// namespace.
pub async fn create(
    State(state): State<AppState>,
    caller: Caller,
    Body(body): Body<NewOrgBody>,
) -> ApiResult<Created<Json<OrgResponse>>> {
    if !caller.platform_admin {
        return Err(ApiError::forbidden(
            "only platform administrators create organizations",
        ));
    }
    check_dns_label("name", &body.name)?;
    if body.name.len() > 59 {
        return Err(ApiError::invalid(
            "name",
            "an organization name has at most 59 characters",
        ));
    }
    if body.display_name.trim().is_empty() || body.display_name.len() > 253 {
        return Err(ApiError::invalid("display_name", "1 to 253 characters"));
    }
    let verification = body
        .verification
        .as_ref()
        .map(|v| verification::check("verification", v))
        .transpose()?;
    let mut members = Vec::new();
    for (i, member) in body.members.iter().enumerate() {
        members.push(
            new_member(
                &state,
                &format!("members[{i}].user"),
                &member.user,
                member.role,
            )
            .await?,
        );
    }
    let org = Organization::new(
        &body.name,
        OrganizationSpec {
            display_name: body.display_name,
            members,
            verification,
            budget: None,
        },
    );
    let api: Api<Organization> = Api::all(state.client().clone());
    let created = api
        .create(&post_params(), &org)
        .await
        .map_err(|e| match e {
            kube::Error::Api(s) if s.code == 409 => {
                ApiError::conflict("exists", format!("organization {:?} exists", body.name))
            }
            other => other.into(),
        })?;
    let deadline = tokio::time::Instant::now() + state.settings().mint_timeout;
    let mut current = created;
    // The controllers give a stored organization its namespace; a dry run's gets none.
    while !crate::dry_run::active()
        && current
            .status
            .as_ref()
            .and_then(|s| s.namespace.as_ref())
            .is_none()
        && tokio::time::Instant::now() < deadline
    {
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        current = api.get(&body.name).await?;
    }
    Ok(Created(Json(response(&caller, &current))))
}

/// The organizations you belong to at any scope.
pub async fn list(
    State(state): State<AppState>,
    caller: Caller,
) -> ApiResult<Json<Vec<OrgResponse>>> {
    let views = super::visible_orgs(&state, &caller).await?;
    Ok(Json(
        views.iter().map(|v| response(&caller, &v.org)).collect(),
    ))
}

/// One organization.
pub async fn get(
    State(state): State<AppState>,
    caller: Caller,
    Path(path): Path<OrgPath>,
) -> ApiResult<Json<OrgResponse>> {
    let view = org_view(&state, &caller, &path.org).await?;
    Ok(Json(response(&caller, &view.org)))
}

/// Changes an organization's default verification (organization admins).
pub async fn patch(
    State(state): State<AppState>,
    caller: Caller,
    Path(path): Path<OrgPath>,
    Body(body): Body<PatchOrgBody>,
) -> ApiResult<Json<OrgResponse>> {
    let view = org_view(&state, &caller, &path.org).await?;
    require_org_admin(&caller, &view)?;
    super::not_in_git(
        &view.org,
        "organization",
        "Change spec.verification in its manifest in Git.",
    )?;
    if body.verification.is_none() && body.budget.is_none() {
        return Err(ApiError::bad_request(
            "nothing to change: set verification or budget",
        ));
    }
    let mut patch = serde_json::json!({"spec": {}});
    if let Some(given) = &body.verification {
        let spec = given
            .as_ref()
            .map(|v| verification::check("verification", v))
            .transpose()?;
        patch["spec"]["verification"] = verification::merge_patch(spec.as_ref())?;
    }
    if let Some(given) = &body.budget {
        let budget = given
            .as_ref()
            .map(super::fences::check_budget)
            .transpose()?
            .flatten();
        patch["spec"]["budget"] = serde_json::to_value(budget).unwrap_or_default();
    }
    let api: Api<Organization> = Api::all(state.client().clone());
    let updated = api
        .patch(&path.org, &patch_params(), &Patch::Merge(&patch))
        .await?;
    state.mirror().caught_up(&updated).await;
    Ok(Json(response(&caller, &updated)))
}

/// Deletes an empty organization (platform administrators only).
pub async fn delete(
    State(state): State<AppState>,
    caller: Caller,
    Path(path): Path<OrgPath>,
) -> ApiResult<NoContent> {
    let view = org_view(&state, &caller, &path.org).await?;
    if !caller.platform_admin {
        return Err(ApiError::forbidden(
            "only platform administrators delete organizations",
        ));
    }
    if !view.clusters.is_empty() || !view.projects.is_empty() {
        return Err(ApiError::conflict(
            "not_empty",
            "delete the organization's projects and clusters first",
        ));
    }
    let api: Api<Organization> = Api::all(state.client().clone());
    api.delete(&path.org, &super::delete_params()).await?;
    Ok(NoContent)
}

pub(crate) fn require_org_admin(caller: &Caller, view: &OrgView) -> ApiResult<()> {
    authz::require(
        authz::role_at(caller, &view.org, None, None).or(Some(kubenest_crds::common::Role::Viewer)),
        Need::Admin,
        "organization",
    )
    .map(|_| ())
}

/// The organization-wide members.
pub async fn members(
    State(state): State<AppState>,
    caller: Caller,
    Path(path): Path<OrgPath>,
) -> ApiResult<Json<Vec<MemberView>>> {
    let view = org_view(&state, &caller, &path.org).await?;
    Ok(Json(
        view.org
            .spec
            .members
            .iter()
            .map(super::member_view)
            .collect(),
    ))
}

/// Gives a user a role on the organization (organization admins).
pub async fn put_member(
    State(state): State<AppState>,
    caller: Caller,
    Path(path): Path<OrgPath>,
    Body(body): Body<MemberBody>,
) -> ApiResult<Json<Vec<MemberView>>> {
    let view = org_view(&state, &caller, &path.org).await?;
    require_org_admin(&caller, &view)?;
    let api: Api<Organization> = Api::all(state.client().clone());
    let members = set_member(&state, &api, &path.org, &body.user, Some(body.role), |o| {
        &mut o.spec.members
    })
    .await?;
    Ok(Json(members))
}

/// Removes a user's organization role (organization admins).
pub async fn delete_member(
    State(state): State<AppState>,
    caller: Caller,
    Path(path): Path<OrgMemberPath>,
) -> ApiResult<Json<Vec<MemberView>>> {
    let view = org_view(&state, &caller, &path.org).await?;
    require_org_admin(&caller, &view)?;
    let api: Api<Organization> = Api::all(state.client().clone());
    let members = set_member(&state, &api, &path.org, &path.user, None, |o| {
        &mut o.spec.members
    })
    .await?;
    Ok(Json(members))
}
