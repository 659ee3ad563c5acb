//! Apps: create (202, Pending), read with phase, components, sync and drift, change, delete,
//! pause, resume, redeploy, roll back, their deployment history, and component secrets.
//!
//! Every change is a write to the App object; the App controller records it as a deployment
//! and delivers it. Redeploy and rollback are annotations the controller acts on, so kubectl
//! users have the same path. An App in `blocked_sync` refuses changes (409) until it converges
//! again; deleting it is still allowed.

use kubenest_crds::names::{annotations, finalizers};
use std::collections::BTreeMap;

use axum::Json;
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use kube::ResourceExt;
use kube::api::{Api, DeleteParams, ListParams, Patch};
use kubenest_contracts::{
    self as wire, Envelope, SecretDelete, SecretSet, SecretTarget, SecretValue,
};
use kubenest_crds::App;
use kubenest_crds::addon::AddonDefinition;
use kubenest_crds::app::{AppSpec, Component};
use kubenest_domain::app::{
    AppIdentity, ResolvedAddon, build_deploy, check_component_names, resolved_addon,
};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use uuid::Uuid;

use super::{
    IdPath, Scoped, actor_annotations, api_field, check_dns_label, patch_params, post_params,
};
use crate::authz::{Caller, Need};
use crate::error::{ApiError, ApiResult};
use crate::extract::Body;
use crate::k8s;
use crate::model::{ComponentBody, components_from_crd, components_to_crd};
use crate::state::AppState;

/// Health of one component.
#[derive(Debug, Serialize, JsonSchema)]
pub struct ComponentStatusView {
    pub name: String,
    pub ready: bool,
    pub ready_replicas: u32,
    pub desired_replicas: u32,
    pub message: String,
}

/// One drifted field.
#[derive(Debug, Serialize, JsonSchema)]
pub struct DriftView {
    pub resource: String,
    pub field: String,
    pub desired: String,
    pub observed: String,
    /// The field manager that changed it, when known.
    pub manager: Option<String>,
}

/// Drift between what the App says and what runs.
#[derive(Debug, Serialize, JsonSchema)]
pub struct SyncView {
    pub drift_detected: bool,
    /// `recoverable` (kubenest re-applies it) or `blocked_sync` (changes are refused until it
    /// clears).
    pub drift_class: Option<String>,
    pub drift_details: Vec<DriftView>,
}

/// An App.
#[derive(Debug, Serialize, JsonSchema)]
pub struct AppResponse {
    pub id: String,
    pub name: String,
    pub org: String,
    pub project: String,
    pub project_id: Option<String>,
    pub cluster_id: Option<String>,
    /// `Pending`, `Deploying`, `Running`, `Paused`, `Failed`, ...
    pub phase: String,
    /// Why, for people (the Ready condition's message).
    pub message: String,
    pub paused: bool,
    pub progress_deadline_seconds: u32,
    #[schemars(with = "Vec<ComponentBody>")]
    pub components: Vec<Value>,
    pub component_status: Vec<ComponentStatusView>,
    pub sync: SyncView,
    pub revision: Option<String>,
    pub observed_revision: Option<String>,
    pub deployment_id: Option<String>,
    pub ingress_address: Option<String>,
    pub observed_at: Option<String>,
    pub created_at: Option<String>,
    /// The App's conditions (`Ready`, `RollbackFailed`, ...), each with its reason.
    pub conditions: Vec<ConditionView>,
}

/// One condition of an object.
#[derive(Debug, Serialize, JsonSchema)]
pub struct ConditionView {
    #[serde(rename = "type")]
    pub kind: String,
    /// `True`, `False` or `Unknown`.
    pub status: String,
    pub reason: String,
    pub message: String,
}

fn response(app: &App, scoped: Option<&Scoped<App>>) -> AppResponse {
    let status = app.status.clone().unwrap_or_default();
    let namespace = app.namespace().unwrap_or_default();
    let sync = status.sync.clone().unwrap_or_default();
    let message = status
        .conditions
        .iter()
        .find(|c| c.type_ == "Ready")
        .map(|c| c.message.clone())
        .unwrap_or_default();
    AppResponse {
        id: k8s::uid(app),
        name: app.name_any(),
        org: k8s::org_name_of(&namespace).unwrap_or_default().to_owned(),
        project: app.spec.project.clone(),
        project_id: scoped
            .and_then(|s| s.project.as_ref())
            .and_then(ResourceExt::uid),
        cluster_id: scoped
            .and_then(|s| s.cluster.as_ref())
            .and_then(|c| c.status.as_ref()?.cluster_id.clone()),
        phase: status.phase.clone().unwrap_or_else(|| "Pending".into()),
        message,
        paused: app.spec.paused,
        progress_deadline_seconds: app.spec.progress_deadline_seconds,
        components: components_from_crd(&app.spec.components),
        component_status: status
            .components
            .iter()
            .map(|c| ComponentStatusView {
                name: c.name.clone(),
                ready: c.ready,
                ready_replicas: c.ready_replicas,
                desired_replicas: c.desired_replicas,
                message: c.message.clone(),
            })
            .collect(),
        sync: SyncView {
            drift_detected: sync.drift_detected,
            drift_class: sync.drift_class,
            drift_details: sync
                .drift_details
                .into_iter()
                .map(|d| DriftView {
                    resource: d.resource,
                    field: d.field,
                    desired: d.desired,
                    observed: d.observed,
                    manager: d.manager,
                })
                .collect(),
        },
        revision: status.revision,
        observed_revision: status.observed_revision,
        deployment_id: status.deployment_id,
        ingress_address: status.ingress_address,
        observed_at: status.observed_at,
        created_at: k8s::created(app),
        conditions: status
            .conditions
            .iter()
            .map(|c| ConditionView {
                kind: c.type_.clone(),
                status: c.status.clone(),
                reason: c.reason.clone(),
                message: c.message.clone(),
            })
            .collect(),
    }
}

async fn load(state: &AppState, caller: &Caller, id: &str) -> ApiResult<Scoped<App>> {
    super::in_project(state, caller, k8s::Kind::App, id, |a: &App| &a.spec.project).await
}

/// Refuses changes to an App whose cluster reports it cannot converge.
fn refuse_blocked(app: &App) -> ApiResult<()> {
    let Some(sync) = app.status.as_ref().and_then(|s| s.sync.as_ref()) else {
        return Ok(());
    };
    if sync.drift_class.as_deref() != Some("blocked_sync") {
        return Ok(());
    }
    let details: Vec<String> = sync
        .drift_details
        .iter()
        .map(|d| {
            format!(
                "{} {}: desired {}, observed {}",
                d.resource, d.field, d.desired, d.observed
            )
        })
        .collect();
    let message = app
        .status
        .as_ref()
        .and_then(|s| s.conditions.iter().find(|c| c.type_ == "Ready"))
        .map(|c| c.message.clone())
        .unwrap_or_default();
    Err(ApiError::conflict(
        "blocked_sync",
        format!(
            "the app is in blocked_sync: its workloads are not converging ({}{}); \
             changes are refused until that clears",
            message,
            if details.is_empty() {
                String::new()
            } else {
                format!("; {}", details.join("; "))
            }
        ),
    ))
}

/// Checks components the way the controller will build them: definitions exist, exports
/// are published by an addon of the App, exactly one source per workload.
async fn check_buildable(state: &AppState, namespace: &str, spec: &AppSpec) -> ApiResult<()> {
    let mut addons: BTreeMap<String, ResolvedAddon> = BTreeMap::new();
    for component in &spec.components {
        let Some(addon) = &component.addon else {
            continue;
        };
        for ns in [namespace, state.settings().system_namespace.as_str()] {
            let api: Api<AddonDefinition> = Api::namespaced(state.client().clone(), ns);
            if let Some(definition) = api.get_opt(&addon.definition).await? {
                addons.insert(addon.definition.clone(), resolved_addon(&definition));
                break;
            }
        }
    }
    let identity = AppIdentity {
        app_id: Uuid::nil().to_string(),
        name: "check".into(),
        project_id: Uuid::nil().to_string(),
        namespace: "check".into(),
    };
    build_deploy(&identity, spec, &addons)
        .map(|_| ())
        .map_err(|e| ApiError::invalid(api_field(&e.field), e.reason))
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct NewAppBody {
    pub project_id: String,
    /// DNS label, unique in the organization.
    pub name: String,
    #[schemars(length(min = 1, max = 64))]
    pub components: Vec<ComponentBody>,
    /// Seconds components may take to become ready before the App is Failed (default 600).
    #[serde(default)]
    #[schemars(range(min = 10, max = 86400))]
    pub progress_deadline_seconds: Option<u32>,
}

fn check_deadline(deadline: Option<u32>) -> ApiResult<u32> {
    let deadline = deadline.unwrap_or(600);
    if (10..=86400).contains(&deadline) {
        Ok(deadline)
    } else {
        Err(ApiError::invalid(
            "progress_deadline_seconds",
            "between 10 and 86400 seconds",
        ))
    }
}

/// Checks the components' names the way every path does ([`check_component_names`]), then
/// maps them to the CRD's shape.
fn check_components(components: &[ComponentBody]) -> ApiResult<Vec<Component>> {
    let names: Vec<&str> = components.iter().map(|c| c.name.as_str()).collect();
    check_component_names(&names).map_err(|e| ApiError::invalid(api_field(&e.field), e.reason))?;
    components_to_crd(components)
}

/// Creates an App (members of its project). It is Pending until its deployment is recorded
/// and delivered.
pub async fn create(
    State(state): State<AppState>,
    caller: Caller,
    Body(body): Body<NewAppBody>,
) -> ApiResult<(StatusCode, Json<AppResponse>)> {
    let project = super::writable_project(&state, &caller, &body.project_id).await?;
    let spec = AppSpec {
        project: project.object.name_any(),
        components: check_components(&body.components)?,
        progress_deadline_seconds: check_deadline(body.progress_deadline_seconds)?,
        paused: false,
    };
    create_in(&state, &caller, project, &body.name, spec).await
}

/// Creates an App with `spec` in a project the caller may write to (also a template's deploy).
pub async fn create_in(
    state: &AppState,
    caller: &Caller,
    project: Scoped<kubenest_crds::project::Project>,
    name: &str,
    spec: AppSpec,
) -> ApiResult<(StatusCode, Json<AppResponse>)> {
    check_dns_label("name", name)?;
    let namespace = project.namespace();
    check_buildable(state, &namespace, &spec).await?;
    let mut app = App::new(name, spec);
    app.metadata.annotations = Some(actor_annotations(caller));
    // Created holding the controllers' cleanup finalizer, which they would otherwise add in
    // a write of their own before sending anything to the cluster (an App made with kubectl
    // still gets it that way).
    app.metadata.finalizers = Some(vec![finalizers::APP.to_owned()]);
    let api: Api<App> = Api::namespaced(state.client().clone(), &namespace);
    let created = api
        .create(&post_params(), &app)
        .await
        .map_err(|e| match e {
            kube::Error::Api(s) if s.code == 409 => ApiError::conflict(
                "exists",
                format!("an app named {name:?} exists in this organization"),
            ),
            other => other.into(),
        })?;
    let scoped = Scoped {
        object: created.clone(),
        org: project.org,
        cluster: project.cluster,
        project: Some(project.object),
        role: project.role,
    };
    Ok((
        StatusCode::ACCEPTED,
        Json(response(&created, Some(&scoped))),
    ))
}

/// Filters and paging of the App list.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ListQuery {
    /// Only this organization's Apps.
    pub org: Option<String>,
    /// Only this project's Apps.
    pub project_id: Option<String>,
    /// Page size, 1 to 500 (default 100).
    pub limit: Option<u32>,
    /// The `continue` of the previous page, with the same filters.
    #[serde(rename = "continue")]
    pub continue_token: Option<String>,
}

/// A page of Apps.
#[derive(Debug, Serialize, JsonSchema)]
pub struct AppList {
    pub items: Vec<AppResponse>,
    /// Pass as `continue` for the next page; absent on the last.
    #[serde(rename = "continue", skip_serializing_if = "Option::is_none")]
    pub continue_token: Option<String>,
}

/// Where the next page of an App list starts: an organization, and the Kubernetes `continue`
/// of its namespace's list (none at the organization's first App). As text,
/// `{organization}/{continue}`, which the caller passes back unread.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Cursor {
    org: String,
    after: Option<String>,
}

impl Cursor {
    fn encode(&self) -> String {
        format!("{}/{}", self.org, self.after.as_deref().unwrap_or_default())
    }

    /// The error for a token this list did not give out.
    fn foreign() -> ApiError {
        ApiError::invalid("continue", "not a continue token of this list")
    }

    fn decode(token: &str) -> ApiResult<Self> {
        let (org, after) = token.split_once('/').ok_or_else(Self::foreign)?;
        if !k8s::is_name(org) {
            return Err(Self::foreign());
        }
        Ok(Self {
            org: org.to_owned(),
            after: (!after.is_empty()).then(|| after.to_owned()),
        })
    }
}

/// The Apps you have a role on, organization by organization (by name), each in the order
/// Kubernetes lists them. A page holds up to `limit` Apps and a `continue` when more follow;
/// only a project's Apps are read when `project_id` is given (a field selector).
pub async fn list(
    State(state): State<AppState>,
    caller: Caller,
    Query(query): Query<ListQuery>,
) -> ApiResult<Json<AppList>> {
    let limit = query.limit.unwrap_or(100);
    if !(1..=500).contains(&limit) {
        return Err(ApiError::invalid("limit", "between 1 and 500"));
    }
    let cursor = query
        .continue_token
        .as_deref()
        .map(Cursor::decode)
        .transpose()?;
    let project_name = match &query.project_id {
        Some(id) => {
            let project = super::project(&state, &caller, id).await?;
            project.require(Need::Read, "project")?;
            Some((project.org.name_any(), project.object.name_any()))
        }
        None => None,
    };
    let views = match (&project_name, &query.org) {
        // A project of another organization than the one asked for: none of its Apps.
        (Some((org, _)), Some(asked)) if org != asked => Vec::new(),
        (Some((org, _)), _) => vec![super::org_view(&state, &caller, org).await?],
        (None, Some(org)) => vec![super::org_view(&state, &caller, org).await?],
        (None, None) => super::visible_orgs(&state, &caller).await?,
    };
    let first = match &cursor {
        Some(cursor) => views
            .iter()
            .position(|v| v.org.name_any() == cursor.org)
            .ok_or_else(Cursor::foreign)?,
        None => 0,
    };
    let limit = limit as usize;
    let mut after = cursor.and_then(|c| c.after);
    let mut items = Vec::new();
    let mut next = None;
    'orgs: for (at, view) in views.iter().enumerate().skip(first) {
        let api: Api<App> = Api::namespaced(state.client().clone(), &view.namespace);
        loop {
            let mut params = ListParams::default().limit((limit - items.len()) as u32);
            let resumed = after.is_some();
            if let Some(token) = after.take() {
                params = params.continue_token(&token);
            }
            if let Some((_, name)) = &project_name {
                params = params.fields(&format!("spec.project={name}"));
            }
            let page = api.list(&params).await.map_err(|e| match e {
                kube::Error::Api(s) if s.code == 410 => {
                    ApiError::invalid("continue", "the page token expired; start again")
                }
                kube::Error::Api(s) if s.code == 400 && resumed => Cursor::foreign(),
                other => other.into(),
            })?;
            items.extend(
                page.items
                    .iter()
                    .filter(|app| view.role_in_project(&caller, &app.spec.project).is_some())
                    .map(|app| list_item(view, app)),
            );
            let more = page.metadata.continue_.filter(|c| !c.is_empty());
            if items.len() >= limit {
                next = match more {
                    Some(token) => Some(Cursor {
                        org: view.org.name_any(),
                        after: Some(token),
                    }),
                    None => views.get(at + 1).map(|v| Cursor {
                        org: v.org.name_any(),
                        after: None,
                    }),
                };
                break 'orgs;
            }
            match more {
                Some(token) => after = Some(token),
                None => break,
            }
        }
    }
    Ok(Json(AppList {
        items,
        continue_token: next.map(|c| c.encode()),
    }))
}

/// An App of the list, with the ids of its project and cluster from the organization's view.
fn list_item(view: &super::OrgView, app: &App) -> AppResponse {
    let project = view
        .projects
        .iter()
        .find(|p| p.name_any() == app.spec.project);
    let cluster = project.and_then(|p| {
        view.clusters
            .iter()
            .find(|c| c.name_any() == p.spec.cluster)
    });
    let mut item = response(app, None);
    item.project_id = project.and_then(ResourceExt::uid);
    item.cluster_id = cluster.and_then(|c| c.status.as_ref()?.cluster_id.clone());
    item
}

/// One App.
pub async fn get(
    State(state): State<AppState>,
    caller: Caller,
    Path(path): Path<IdPath>,
) -> ApiResult<Json<AppResponse>> {
    let scoped = load(&state, &caller, &path.id).await?;
    scoped.require(Need::Read, "app")?;
    Ok(Json(response(&scoped.object, Some(&scoped))))
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PatchAppBody {
    /// The new components (the whole list).
    #[serde(default)]
    pub components: Option<Vec<ComponentBody>>,
    #[serde(default)]
    pub progress_deadline_seconds: Option<u32>,
}

async fn write(
    state: &AppState,
    caller: &Caller,
    scoped: &Scoped<App>,
    patch: Value,
) -> ApiResult<(StatusCode, Json<AppResponse>)> {
    let mut patch = patch;
    // Only the fields of this change are sent: the controllers' concurrent status and finalizer
    // writes neither conflict with it nor get overwritten.
    let mut annotations = patch["metadata"]["annotations"]
        .as_object()
        .cloned()
        .unwrap_or_default();
    for (key, value) in actor_annotations(caller) {
        annotations.insert(key, value.into());
    }
    patch["metadata"]["annotations"] = Value::Object(annotations);
    let api: Api<App> = Api::namespaced(state.client().clone(), &scoped.namespace());
    let updated = api
        .patch(
            &scoped.object.name_any(),
            &patch_params(),
            &Patch::Merge(&patch),
        )
        .await?;
    Ok((StatusCode::ACCEPTED, Json(response(&updated, Some(scoped)))))
}

/// Changes an App's components or deadline (members); a new deployment.
pub async fn patch(
    State(state): State<AppState>,
    caller: Caller,
    Path(path): Path<IdPath>,
    Body(body): Body<PatchAppBody>,
) -> ApiResult<(StatusCode, Json<AppResponse>)> {
    let scoped = load(&state, &caller, &path.id).await?;
    scoped.require(Need::Write, "app")?;
    refuse_blocked(&scoped.object)?;
    if body.components.is_none() && body.progress_deadline_seconds.is_none() {
        return Err(ApiError::bad_request(
            "nothing to change: set components or progress_deadline_seconds",
        ));
    }
    let mut spec = scoped.object.spec.clone();
    if let Some(components) = &body.components {
        spec.components = check_components(components)?;
    }
    if body.progress_deadline_seconds.is_some() {
        spec.progress_deadline_seconds = check_deadline(body.progress_deadline_seconds)?;
    }
    check_buildable(&state, &scoped.namespace(), &spec).await?;
    let patch = json!({"spec": {
        "components": spec.components,
        "progressDeadlineSeconds": spec.progress_deadline_seconds,
    }});
    write(&state, &caller, &scoped, patch).await
}

/// Deletes an App and everything it runs on its cluster (members).
pub async fn delete(
    State(state): State<AppState>,
    caller: Caller,
    Path(path): Path<IdPath>,
) -> ApiResult<StatusCode> {
    let scoped = load(&state, &caller, &path.id).await?;
    scoped.require(Need::Write, "app")?;
    let api: Api<App> = Api::namespaced(state.client().clone(), &scoped.namespace());
    // Who asked is recorded before the delete, for the history's delete row.
    let patch = json!({"metadata": {"annotations": actor_annotations(&caller)}});
    api.patch(
        &scoped.object.name_any(),
        &patch_params(),
        &Patch::Merge(&patch),
    )
    .await?;
    api.delete(&scoped.object.name_any(), &DeleteParams::default())
        .await?;
    Ok(StatusCode::ACCEPTED)
}

async fn set_paused(
    state: AppState,
    caller: Caller,
    id: String,
    paused: bool,
) -> ApiResult<(StatusCode, Json<AppResponse>)> {
    let scoped = load(&state, &caller, &id).await?;
    scoped.require(Need::Write, "app")?;
    refuse_blocked(&scoped.object)?;
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
) -> ApiResult<(StatusCode, Json<AppResponse>)> {
    set_paused(state, caller, path.id, true).await
}

/// Resumes a paused App in its previous shape (members).
pub async fn resume(
    State(state): State<AppState>,
    caller: Caller,
    Path(path): Path<IdPath>,
) -> ApiResult<(StatusCode, Json<AppResponse>)> {
    set_paused(state, caller, path.id, false).await
}

/// Restarts an App's workloads with the same spec (members); a new deployment.
pub async fn redeploy(
    State(state): State<AppState>,
    caller: Caller,
    Path(path): Path<IdPath>,
) -> ApiResult<(StatusCode, Json<AppResponse>)> {
    let scoped = load(&state, &caller, &path.id).await?;
    scoped.require(Need::Write, "app")?;
    refuse_blocked(&scoped.object)?;
    let patch =
        json!({"metadata": {"annotations": {annotations::REDEPLOY: Uuid::new_v4().to_string()}}});
    write(&state, &caller, &scoped, patch).await
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RollbackBody {
    /// A deployment of this App whose spec to restore.
    pub deployment_id: String,
}

/// Restores the spec of an earlier deployment (members); a new deployment that points at it.
pub async fn rollback(
    State(state): State<AppState>,
    caller: Caller,
    Path(path): Path<IdPath>,
    Body(body): Body<RollbackBody>,
) -> ApiResult<(StatusCode, Json<AppResponse>)> {
    let scoped = load(&state, &caller, &path.id).await?;
    scoped.require(Need::Write, "app")?;
    refuse_blocked(&scoped.object)?;
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
            return Err(ApiError::invalid(
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

/// One deployment of an App.
#[derive(Debug, Serialize, JsonSchema)]
pub struct DeploymentView {
    pub id: String,
    pub revision: String,
    /// `create`, `update`, `rollback`, `pause`, `resume`, `redeploy` or `delete`.
    pub operation: String,
    /// Who: a kubenest user, or `kubernetes:<field manager>` for kubectl and GitOps changes.
    pub actor: String,
    /// `pending`, `succeeded`, `failed` or `superseded`.
    pub result: String,
    pub message: String,
    pub created_at: String,
    pub finished_at: Option<String>,
    /// The deployment this one restored, for rollbacks.
    pub rollback_of: Option<String>,
    /// JSON Patch (RFC 6902) from the spec before to the spec after.
    pub diff: Value,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct HistoryQuery {
    /// At most this many, newest first (1 to 500, default 100).
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
                }
            })
            .collect(),
    ))
}

/// `{id}/components/{component}` in a path.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct ComponentPath {
    pub id: String,
    pub component: String,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SecretBody {
    /// Keys and values to set (other keys are kept). Never stored or echoed by kubenest.
    pub values: BTreeMap<String, String>,
}

/// What changed (the keys, never the values).
#[derive(Debug, Serialize, JsonSchema)]
pub struct SecretResponse {
    pub component: String,
    pub keys: Vec<String>,
}

/// Where a component's Secret is, and who can reach it.
struct SecretPlace {
    cluster_id: String,
    org: String,
    target: SecretTarget,
}

fn secret_place(scoped: &Scoped<App>, component: &str) -> ApiResult<SecretPlace> {
    let app = &scoped.object;
    let is_workload = app
        .spec
        .components
        .iter()
        .any(|c| c.name == component && c.workload.is_some());
    if !is_workload {
        return Err(ApiError::not_found("workload component"));
    }
    let project = scoped
        .project
        .as_ref()
        .ok_or_else(|| ApiError::conflict("no_project", "the app's project is gone"))?;
    let cluster_id = scoped
        .cluster
        .as_ref()
        .and_then(|c| c.status.as_ref()?.cluster_id.clone())
        .ok_or_else(|| {
            ApiError::unavailable("cluster_unreachable", "the app's cluster is not registered")
        })?;
    Ok(SecretPlace {
        cluster_id,
        org: scoped.org.name_any(),
        target: SecretTarget {
            namespace: wire::Name::new(&project.spec.namespace),
            secret: wire::component_secret(&app.name_any(), component),
            app_id: Some(wire::Id::new(k8s::uid(app))),
        },
    })
}

fn check_keys<'a>(keys: impl Iterator<Item = &'a String>, field: &str) -> ApiResult<Vec<String>> {
    let mut out = Vec::new();
    for key in keys {
        let ok = !key.is_empty()
            && key.len() <= 253
            && key
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'));
        if !ok {
            return Err(ApiError::invalid(
                format!("{field}.{key}"),
                "a key holds only letters, digits, '-', '_' and '.'",
            ));
        }
        out.push(key.clone());
    }
    Ok(out)
}

/// Sets values of a workload component's Secret on the cluster (members). Fails closed: a
/// non-2xx unless the agent confirms it stored them.
pub async fn put_secret(
    State(state): State<AppState>,
    caller: Caller,
    Path(path): Path<ComponentPath>,
    Body(body): Body<SecretBody>,
) -> ApiResult<Json<SecretResponse>> {
    let scoped = load(&state, &caller, &path.id).await?;
    scoped.require(Need::Write, "app")?;
    refuse_blocked(&scoped.object)?;
    if body.values.is_empty() || body.values.len() > 128 {
        return Err(ApiError::invalid("values", "1 to 128 keys"));
    }
    let keys = check_keys(body.values.keys(), "values")?;
    if let Some((key, _)) = body.values.iter().find(|(_, v)| v.len() > 262_144) {
        return Err(ApiError::invalid(
            format!("values.{key}"),
            "at most 256 KiB",
        ));
    }
    let place = secret_place(&scoped, &path.component)?;
    let command = Envelope::new(SecretSet {
        target: place.target,
        values: body
            .values
            .into_iter()
            .map(|(k, v)| (k, SecretValue(v)))
            .collect(),
    })
    .for_cluster(wire::Id::new(place.cluster_id), wire::Id::new(place.org));
    state.secrets().send(command).await?;
    Ok(Json(SecretResponse {
        component: path.component,
        keys,
    }))
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SecretDeleteQuery {
    /// Comma-separated keys to remove; without it the whole Secret is deleted.
    pub keys: Option<String>,
}

/// Removes keys of a component's Secret, or the whole Secret (members). Fails closed.
pub async fn delete_secret(
    State(state): State<AppState>,
    caller: Caller,
    Path(path): Path<ComponentPath>,
    Query(query): Query<SecretDeleteQuery>,
) -> ApiResult<Json<SecretResponse>> {
    let scoped = load(&state, &caller, &path.id).await?;
    scoped.require(Need::Write, "app")?;
    refuse_blocked(&scoped.object)?;
    let keys: Vec<String> = query
        .keys
        .as_deref()
        .map(|k| k.split(',').map(str::to_owned).collect())
        .unwrap_or_default();
    let keys = check_keys(keys.iter(), "keys")?;
    let place = secret_place(&scoped, &path.component)?;
    let command = Envelope::new(SecretDelete {
        target: place.target,
        keys: keys.clone(),
    })
    .for_cluster(wire::Id::new(place.cluster_id), wire::Id::new(place.org));
    state.secrets().send(command).await?;
    Ok(Json(SecretResponse {
        component: path.component,
        keys,
    }))
}
