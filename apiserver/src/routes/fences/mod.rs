//! Fences: a project's quota, default limits and network isolation, a cluster's and an
//! organization's budget, what each uses, and the check of every App change against them.
//!
//! Fences are their organization's admins' to set (a project's members run the pods they hold
//! in); the kubectl path is held the same way by the `kubenest-members` admission policy. The
//! check itself is [`kubenest_domain::fences`]: the same on REST and in the admission webhook.

pub use kubenest_api::fences::{
    AmountsView, OrgUsageResponse, ProjectUsageResponse, ProjectUsageRow, ScopeUsage,
};

mod body;

use std::sync::Arc;

use axum::Json;
use axum::extract::{Path, State};
use kube::ResourceExt;
use kube::api::{Api, Patch};
use kubenest_crds::App;
use kubenest_crds::cluster::Cluster;
use kubenest_crds::organization::Organization;
use kubenest_crds::project::Project;
use kubenest_domain::fences::{
    Amounts, Ledger, Resource, format_amount, project_use, project_uses,
};

pub use body::{
    BudgetBody, DefaultsBody, FencesBody, QuotaBody, budget_view, check_budget, check_fences, view,
};

use super::{IdPath, OrgPath, org_view, patch_params};
use crate::authz::{self, Caller, Need};
use crate::error::{ApiError, ApiResult};
use crate::extract::Body;
use crate::k8s;
use crate::state::AppState;

fn amounts(a: &Amounts) -> AmountsView {
    let f = |r| format_amount(r, a.get(r));
    AmountsView {
        cpu: f(Resource::Cpu),
        memory: f(Resource::Memory),
        storage: f(Resource::Storage),
        pods: f(Resource::Pods),
        load_balancers: f(Resource::LoadBalancers),
    }
}

/// One project's use.
pub async fn project_usage(
    State(state): State<AppState>,
    caller: Caller,
    Path(path): Path<IdPath>,
) -> ApiResult<Json<ProjectUsageResponse>> {
    let scoped = super::project(&state, &caller, &path.id).await?;
    scoped.require(Need::Read, "project")?;
    let namespace = scoped.namespace();
    let apps = listed(k8s::list_in(state.client(), &namespace).await?);
    let projects = [scoped.object.clone()];
    let ledger = Ledger {
        org: &scoped.org,
        clusters: &[],
        projects: &projects,
        apps: &apps,
    };
    let name = scoped.object.name_any();
    let used = project_use(&ledger, &name);
    let spec = &scoped.object.spec;
    Ok(Json(ProjectUsageResponse {
        project: name,
        cluster: spec.cluster.clone(),
        fences: body::view(
            spec.quota.as_ref(),
            spec.defaults.as_ref(),
            spec.network.as_ref(),
        ),
        used: amounts(&used.counted),
        declared: amounts(&used.declared),
        reported: amounts(&used.reported),
    }))
}

/// Sets a project's fences, replacing all three (organization admins). Absent parts: no
/// quota, no defaults, isolated.
pub async fn put_project_fences(
    State(state): State<AppState>,
    caller: Caller,
    Path(path): Path<IdPath>,
    Body(body): Body<FencesBody>,
) -> ApiResult<Json<ProjectUsageResponse>> {
    let scoped = super::project(&state, &caller, &path.id).await?;
    scoped.require(Need::Read, "project")?;
    require_org_admin(&caller, &scoped.org, "setting a project's fences")?;
    super::not_in_git(
        &scoped.object,
        "project",
        "Change spec.quota, spec.defaults and spec.network in its manifest in Git.",
    )?;
    let namespace = scoped.namespace();
    let projects: Vec<Project> = k8s::list_in(state.client(), &namespace).await?;
    let names: Vec<String> = projects.iter().map(ResourceExt::name_any).collect();
    let (quota, defaults, network) = body::check_fences(&body, &scoped.object.name_any(), &names)?;
    let patch = serde_json::json!({"spec": {
        "quota": quota, "defaults": defaults, "network": network,
    }});
    let updated = Api::<Project>::namespaced(state.client().clone(), &namespace)
        .patch(
            &scoped.object.name_any(),
            &patch_params(),
            &Patch::Merge(&patch),
        )
        .await?;
    state.mirror().caught_up(&updated).await;
    project_usage(State(state), caller, Path(path)).await
}

/// Sets a cluster's budget, across its projects (organization admins); `{}` removes it.
pub async fn put_cluster_budget(
    State(state): State<AppState>,
    caller: Caller,
    Path(path): Path<IdPath>,
    Body(body): Body<BudgetBody>,
) -> ApiResult<Json<Option<BudgetBody>>> {
    let scoped = super::cluster(&state, &caller, &path.id).await?;
    scoped.require(Need::Read, "cluster")?;
    require_org_admin(&caller, &scoped.org, "setting a cluster's budget")?;
    super::not_in_git(
        &scoped.object,
        "cluster",
        "Change spec.budget in its manifest in Git.",
    )?;
    let budget = check_budget(&body)?;
    let patch = serde_json::json!({"spec": {"budget": budget}});
    let updated = Api::<Cluster>::namespaced(state.client().clone(), &scoped.namespace())
        .patch(
            &scoped.object.name_any(),
            &patch_params(),
            &Patch::Merge(&patch),
        )
        .await?;
    state.mirror().caught_up(&updated).await;
    Ok(Json(budget_view(updated.spec.budget.as_ref())))
}

fn require_org_admin(
    caller: &Caller,
    org: &kubenest_crds::Organization,
    what: &str,
) -> ApiResult<()> {
    let role = authz::role_at(caller, org, None, None);
    if role.is_some_and(|r| authz::allows(r, Need::Admin)) {
        Ok(())
    } else {
        Err(ApiError::forbidden(format!(
            "{what} needs the admin role in its organization"
        )))
    }
}

/// What the organization uses against its budgets (anyone with a role in the organization
/// itself).
pub async fn org_usage(
    State(state): State<AppState>,
    caller: Caller,
    Path(path): Path<OrgPath>,
) -> ApiResult<Json<OrgUsageResponse>> {
    let view = org_view(&state, &caller, &path.org).await?;
    authz::require(
        authz::role_at(&caller, &view.org, None, None),
        Need::Read,
        "organization usage",
    )?;
    let apps = listed(k8s::list_in(state.client(), &view.namespace).await?);
    let ledger = Ledger {
        org: &view.org,
        clusters: &view.clusters,
        projects: &view.projects,
        apps: &apps,
    };
    let uses = project_uses(&ledger);
    let used: Vec<(&Project, Amounts)> = view
        .projects
        .iter()
        .map(|p| {
            let used = uses.get(&p.name_any()).copied().unwrap_or_default();
            (p, used.counted)
        })
        .collect();
    let sum = |on: Option<&str>| {
        used.iter()
            .filter(|(p, _)| on.is_none_or(|c| p.spec.cluster == c))
            .fold(Amounts::default(), |s, (_, a)| s.plus(a))
    };
    Ok(Json(OrgUsageResponse {
        organization: ScopeUsage {
            scope: "organization".into(),
            cluster_id: None,
            budget: budget_view(view.org.spec.budget.as_ref()),
            used: amounts(&sum(None)),
        },
        clusters: view
            .clusters
            .iter()
            .map(|c| ScopeUsage {
                scope: c.name_any(),
                cluster_id: c.uid(),
                budget: budget_view(c.spec.budget.as_ref()),
                used: amounts(&sum(Some(&c.name_any()))),
            })
            .collect(),
        projects: used
            .iter()
            .map(|(p, a)| ProjectUsageRow {
                project: p.name_any(),
                project_id: k8s::uid(*p),
                cluster: p.spec.cluster.clone(),
                quota: body::view(p.spec.quota.as_ref(), None, None).quota,
                used: amounts(a),
            })
            .collect(),
    }))
}

/// Whether App `app` of `project` (in the organization namespace `namespace`) may have
/// `spec`: its project's quota and its cluster's and organization's budgets, each resource it
/// asks more of. The refusal is in the App's own terms (`spec.components[1]...`).
pub(crate) async fn refusal(
    state: &AppState,
    namespace: &str,
    project: &str,
    app: &str,
    spec: &kubenest_crds::app::AppSpec,
) -> ApiResult<Option<kubenest_domain::fences::FenceRefusal>> {
    let org_name =
        k8s::org_name_of(namespace).ok_or_else(|| ApiError::not_found("organization"))?;
    let (org, projects, clusters) = fences_of(state, org_name, namespace, project).await?;
    let quota = projects
        .iter()
        .any(|p| p.name_any() == project && p.spec.quota.is_some());
    let budgeted = org.spec.budget.is_some() || clusters.iter().any(|c| c.spec.budget.is_some());
    if !quota && !budgeted {
        return Ok(None);
    }
    let apps = super::mirrored::apps_in(state, namespace).await?;
    let ledger = Ledger {
        org: &org,
        clusters: &clusters,
        projects: &projects,
        apps: &apps,
    };
    Ok(kubenest_domain::fences::check_change(&ledger, project, app, spec).err())
}

/// Whether a new standalone addon of `project` finds room in its quota
/// ([`kubenest_domain::fences::check_room`]); the refusal names `spec.project`.
pub(crate) async fn addon_refusal(
    state: &AppState,
    namespace: &str,
    project: &str,
) -> ApiResult<Option<kubenest_domain::fences::FenceRefusal>> {
    let projects: Vec<Project> = k8s::list_in(state.client(), namespace).await?;
    if !projects
        .iter()
        .any(|p| p.name_any() == project && p.spec.quota.is_some())
    {
        return Ok(None);
    }
    let org_name =
        k8s::org_name_of(namespace).ok_or_else(|| ApiError::not_found("organization"))?;
    let Some(org) = k8s::organization(state.client(), org_name).await? else {
        return Err(ApiError::not_found("organization"));
    };
    let apps = super::mirrored::apps_in(state, namespace).await?;
    let ledger = Ledger {
        org: &org,
        clusters: &[],
        projects: &projects,
        apps: &apps,
    };
    Ok(kubenest_domain::fences::check_room(&ledger, project).err())
}

/// An organization with its Projects and Clusters, whose fences the check of a change in
/// `project` reads: the [`crate::mirror`]'s, or the API server's until the mirror has them all
/// (the project too). A fence set through this replica holds from the caller's next request on
/// (the write waits for the mirror, [`crate::mirror::Mirror::caught_up`]); one set elsewhere,
/// from the watch's delay on.
async fn fences_of(
    state: &AppState,
    org_name: &str,
    namespace: &str,
    project: &str,
) -> ApiResult<(Organization, Vec<Project>, Vec<Cluster>)> {
    if let Some(objects) = state.mirror().org(org_name)
        && objects.projects.iter().any(|p| p.name_any() == project)
    {
        let (org, clusters, projects) = objects.owned();
        return Ok((org, projects, clusters));
    }
    let Some(org) = k8s::organization(state.client(), org_name).await? else {
        return Err(ApiError::not_found("organization"));
    };
    let projects: Vec<Project> = k8s::list_in(state.client(), namespace).await?;
    let clusters: Vec<Cluster> = k8s::list_in(state.client(), namespace).await?;
    Ok((org, projects, clusters))
}

/// Apps as read from the API server, shared as the mirror shares them.
fn listed(apps: Vec<App>) -> Vec<Arc<App>> {
    apps.into_iter().map(Arc::new).collect()
}
