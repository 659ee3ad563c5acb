//! Stack templates: reusable App shapes with `${parameter}` slots, scoped to a project, a
//! cluster or the whole platform; created by hand, from a running App or from exported JSON;
//! deployed into a project by filling in the parameters.

use std::collections::BTreeMap;

use axum::Json;
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use kube::ResourceExt;
use kube::api::{Api, DeleteParams};
use kubenest_crds::StackTemplate;
use kubenest_crds::project::Project;
use kubenest_crds::template::{Parameter, Scope, StackTemplateSpec};
use kubenest_domain::template;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::{IdPath, OrgView, actor_annotations, check_dns_label, post_params};
use crate::authz::{self, Caller, Need};
use crate::error::{ApiError, ApiResult};
use crate::extract::Body;
use crate::k8s;
use crate::model::{component_from_crd, component_to_crd};
use crate::state::AppState;

/// A template.
#[derive(Debug, Serialize, JsonSchema)]
pub struct TemplateResponse {
    pub id: String,
    pub name: String,
    /// Absent for global templates.
    pub org: Option<String>,
    /// `project`, `cluster` or `global`.
    pub scope: Scope,
    pub project: Option<String>,
    pub cluster: Option<String>,
    pub description: String,
    pub parameters: Vec<Parameter>,
    /// Components in the App's shape; strings may hold `${name}` slots.
    pub components: Vec<Value>,
    /// Whether the template instantiates into a valid App, and why not.
    pub valid: bool,
    pub message: String,
    pub created_at: Option<String>,
}

fn response(template: &StackTemplate) -> TemplateResponse {
    let namespace = template.namespace().unwrap_or_default();
    let (valid, message) = match template::check(&template.spec) {
        Ok(()) => (true, String::new()),
        Err(e) => (false, e.to_string()),
    };
    TemplateResponse {
        id: k8s::uid(template),
        name: template.name_any(),
        org: k8s::org_name_of(&namespace).map(str::to_owned),
        scope: template.spec.scope,
        project: template.spec.project.clone(),
        cluster: template.spec.cluster.clone(),
        description: template.spec.description.clone(),
        parameters: template.spec.parameters.clone(),
        components: template
            .spec
            .components
            .iter()
            .map(|c| component_from_crd(Value::Object(c.clone())))
            .collect(),
        valid,
        message,
        created_at: k8s::created(template),
    }
}

/// The caller's role on a template (global ones: everyone reads, platform admins write).
fn role_on(
    caller: &Caller,
    view: Option<&OrgView>,
    template: &StackTemplateSpec,
) -> Option<kubenest_crds::common::Role> {
    let Some(view) = view else {
        return Some(if caller.platform_admin {
            kubenest_crds::common::Role::Admin
        } else {
            kubenest_crds::common::Role::Viewer
        });
    };
    match template.scope {
        Scope::Project => {
            view.role_in_project(caller, template.project.as_deref().unwrap_or_default())
        }
        Scope::Cluster => match view
            .clusters
            .iter()
            .find(|c| Some(c.name_any()) == template.cluster)
        {
            Some(cluster) => view.cluster_role(caller, cluster),
            None => authz::role_at(caller, &view.org, None, None),
        },
        Scope::Global => authz::role_at(caller, &view.org, None, None),
    }
}

/// Where a new template goes.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Placement {
    /// DNS label, unique where the template lives.
    pub name: String,
    /// `project` (needs `project_id`), `cluster` (needs `cluster_id`) or `global` (platform
    /// administrators).
    pub scope: Scope,
    #[serde(default)]
    pub project_id: Option<String>,
    #[serde(default)]
    pub cluster_id: Option<String>,
    #[serde(default)]
    pub description: Option<String>,
}

/// Resolves a placement to (namespace, project name, cluster name), checking write access.
async fn place(
    state: &AppState,
    caller: &Caller,
    at: &Placement,
) -> ApiResult<(String, Option<String>, Option<String>)> {
    check_dns_label("name", &at.name)?;
    match at.scope {
        Scope::Global => {
            if !caller.platform_admin {
                return Err(ApiError::forbidden(
                    "only platform administrators make global templates",
                ));
            }
            Ok((state.settings().system_namespace.clone(), None, None))
        }
        Scope::Project => {
            let id = at.project_id.as_deref().ok_or_else(|| {
                ApiError::invalid("project_id", "a project template needs project_id")
            })?;
            let project = super::writable_project(state, caller, id).await?;
            Ok((project.namespace(), Some(project.object.name_any()), None))
        }
        Scope::Cluster => {
            let id = at.cluster_id.as_deref().ok_or_else(|| {
                ApiError::invalid("cluster_id", "a cluster template needs cluster_id")
            })?;
            let cluster = match super::cluster(state, caller, id).await {
                Ok(c) if c.role.is_some() => c,
                Ok(_) => return Err(ApiError::invalid("cluster_id", "no such cluster")),
                Err(e) if e.status == 404 => {
                    return Err(ApiError::invalid("cluster_id", "no such cluster"));
                }
                Err(e) => return Err(e),
            };
            cluster.require(Need::Write, "cluster")?;
            Ok((cluster.namespace(), None, Some(cluster.object.name_any())))
        }
    }
}

async fn store(
    state: &AppState,
    caller: &Caller,
    at: &Placement,
    parameters: Vec<Parameter>,
    components: Vec<Map<String, Value>>,
) -> ApiResult<(StatusCode, Json<TemplateResponse>)> {
    let (namespace, project, cluster) = place(state, caller, at).await?;
    let spec = StackTemplateSpec {
        description: at.description.clone().unwrap_or_default(),
        scope: at.scope,
        project,
        cluster,
        parameters,
        components,
    };
    if spec.components.is_empty() || spec.components.len() > 64 {
        return Err(ApiError::invalid("components", "1 to 64 components"));
    }
    template::check(&spec).map_err(|e| ApiError::invalid(super::api_field(&e.field), e.reason))?;
    let mut object = StackTemplate::new(&at.name, spec);
    object.metadata.annotations = Some(actor_annotations(caller));
    let api: Api<StackTemplate> = Api::namespaced(state.client().clone(), &namespace);
    let created = api
        .create(&post_params(), &object)
        .await
        .map_err(|e| match e {
            kube::Error::Api(s) if s.code == 409 => ApiError::conflict(
                "exists",
                format!("a template named {:?} exists there", at.name),
            ),
            other => other.into(),
        })?;
    Ok((StatusCode::CREATED, Json(response(&created))))
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct NewTemplateBody {
    #[serde(flatten)]
    pub at: Placement,
    #[serde(default)]
    pub parameters: Vec<Parameter>,
    /// Components in the App's shape; any string may hold `${name}` slots.
    pub components: Vec<Value>,
}

fn to_crd_components(components: Vec<Value>) -> ApiResult<Vec<Map<String, Value>>> {
    components
        .into_iter()
        .enumerate()
        .map(
            |(i, c)| match component_to_crd(c, &format!("components[{i}]"))? {
                Value::Object(map) => Ok(map),
                _ => Err(ApiError::invalid(
                    format!("components[{i}]"),
                    "a component is an object",
                )),
            },
        )
        .collect()
}

/// Creates a template.
pub async fn create(
    State(state): State<AppState>,
    caller: Caller,
    Body(body): Body<NewTemplateBody>,
) -> ApiResult<(StatusCode, Json<TemplateResponse>)> {
    let components = to_crd_components(body.components)?;
    store(&state, &caller, &body.at, body.parameters, components).await
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct FromAppBody {
    pub app_id: String,
    #[serde(flatten)]
    pub at: Placement,
}

/// Makes a template of a running App's components (add slots by editing the export).
pub async fn from_app(
    State(state): State<AppState>,
    caller: Caller,
    Body(body): Body<FromAppBody>,
) -> ApiResult<(StatusCode, Json<TemplateResponse>)> {
    let app = super::in_project(
        &state,
        &caller,
        k8s::Kind::App,
        &body.app_id,
        |a: &kubenest_crds::App| &a.spec.project,
    )
    .await
    .map_err(|e| {
        if e.status == 404 {
            ApiError::invalid("app_id", "no such app")
        } else {
            e
        }
    })?;
    app.require(Need::Read, "app")?;
    let spec = template::from_app(&app.object.spec, body.at.scope, "")
        .map_err(|e| ApiError::invalid(e.field, e.reason))?;
    store(&state, &caller, &body.at, spec.parameters, spec.components).await
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ImportBody {
    #[serde(flatten)]
    pub at: Placement,
    /// A template as `GET /templates/{id}/export` returns it.
    pub template: Value,
}

/// Imports an exported template.
pub async fn import(
    State(state): State<AppState>,
    caller: Caller,
    Body(body): Body<ImportBody>,
) -> ApiResult<(StatusCode, Json<TemplateResponse>)> {
    let text = serde_json::to_string(&body.template).map_err(ApiError::internal)?;
    let spec = template::import_json(&text).map_err(|e| {
        ApiError::invalid(
            format!("template.{}", e.field)
                .trim_end_matches('.')
                .to_owned(),
            e.reason,
        )
    })?;
    store(&state, &caller, &body.at, spec.parameters, spec.components).await
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct TemplateQuery {
    pub org: Option<String>,
}

/// Global templates and those of your organizations you have a role on.
pub async fn list(
    State(state): State<AppState>,
    caller: Caller,
    Query(query): Query<TemplateQuery>,
) -> ApiResult<Json<Vec<TemplateResponse>>> {
    let views = match &query.org {
        Some(org) => vec![super::org_view(&state, &caller, org).await?],
        None => super::visible_orgs(&state, &caller).await?,
    };
    let mut items: Vec<TemplateResponse> =
        k8s::list_in::<StackTemplate>(state.client(), &state.settings().system_namespace)
            .await?
            .iter()
            .map(response)
            .collect();
    for view in &views {
        let templates: Vec<StackTemplate> = k8s::list_in(state.client(), &view.namespace).await?;
        items.extend(
            templates
                .iter()
                .filter(|t| role_on(&caller, Some(view), &t.spec).is_some())
                .map(response),
        );
    }
    Ok(Json(items))
}

/// A template and the caller's role on it.
async fn load(
    state: &AppState,
    caller: &Caller,
    id: &str,
) -> ApiResult<(StackTemplate, Option<kubenest_crds::common::Role>)> {
    let template: StackTemplate =
        k8s::by_id(state.client(), state.index(), k8s::Kind::StackTemplate, id)
            .await?
            .ok_or_else(|| ApiError::not_found("stack template"))?;
    let namespace = template.namespace().unwrap_or_default();
    let role = match k8s::org_name_of(&namespace) {
        Some(org) => match super::org_view(state, caller, org).await {
            Ok(view) => role_on(caller, Some(&view), &template.spec),
            Err(e) if e.status == 404 => None,
            Err(e) => return Err(e),
        },
        None if namespace == state.settings().system_namespace => {
            role_on(caller, None, &template.spec)
        }
        None => None,
    };
    Ok((template, role))
}

/// One template.
pub async fn get(
    State(state): State<AppState>,
    caller: Caller,
    Path(path): Path<IdPath>,
) -> ApiResult<Json<TemplateResponse>> {
    let (template, role) = load(&state, &caller, &path.id).await?;
    authz::require(role, Need::Read, "stack template")?;
    Ok(Json(response(&template)))
}

/// A template as portable JSON, for `POST /templates/import` elsewhere.
pub async fn export(
    State(state): State<AppState>,
    caller: Caller,
    Path(path): Path<IdPath>,
) -> ApiResult<Json<Value>> {
    let (template, role) = load(&state, &caller, &path.id).await?;
    authz::require(role, Need::Read, "stack template")?;
    let text = template::export_json(&template.spec);
    Ok(Json(
        serde_json::from_str(&text).map_err(ApiError::internal)?,
    ))
}

/// Deletes a template (members where it lives; platform administrators for global ones).
pub async fn delete(
    State(state): State<AppState>,
    caller: Caller,
    Path(path): Path<IdPath>,
) -> ApiResult<StatusCode> {
    let (template, role) = load(&state, &caller, &path.id).await?;
    authz::require(role, Need::Write, "stack template")?;
    let api: Api<StackTemplate> = Api::namespaced(
        state.client().clone(),
        &template.namespace().unwrap_or_default(),
    );
    api.delete(&template.name_any(), &DeleteParams::default())
        .await?;
    Ok(StatusCode::NO_CONTENT)
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct DeployBody {
    pub project_id: String,
    /// The new App's name.
    pub name: String,
    /// Parameter values (strings, numbers or booleans as the parameter's type says).
    #[serde(default)]
    pub parameters: BTreeMap<String, Value>,
}

/// Deploys a template into a project as a new App (members of the project).
pub async fn deploy(
    State(state): State<AppState>,
    caller: Caller,
    Path(path): Path<IdPath>,
    Body(body): Body<DeployBody>,
) -> ApiResult<(StatusCode, Json<super::apps::AppResponse>)> {
    let (template, role) = load(&state, &caller, &path.id).await?;
    authz::require(role, Need::Read, "stack template")?;
    let project: super::Scoped<Project> =
        super::writable_project(&state, &caller, &body.project_id).await?;
    let fits = match template.spec.scope {
        Scope::Global => true,
        Scope::Project => {
            template.spec.project.as_deref() == Some(project.object.name_any().as_str())
                && template.namespace() == project.object.namespace()
        }
        Scope::Cluster => {
            template.spec.cluster.as_deref() == Some(project.object.spec.cluster.as_str())
                && template.namespace() == project.object.namespace()
        }
    };
    if !fits {
        return Err(ApiError::invalid(
            "project_id",
            "this template's scope does not include that project",
        ));
    }
    let given: BTreeMap<String, String> = body
        .parameters
        .into_iter()
        .map(|(k, v)| {
            let text = match v {
                Value::String(s) => s,
                other => other.to_string(),
            };
            (k, text)
        })
        .collect();
    let spec =
        template::instantiate(&template.spec, &project.object.name_any(), &given).map_err(|e| {
            let field = if e.field.starts_with("parameters") || e.field.is_empty() {
                e.field.clone()
            } else {
                super::api_field(&e.field)
            };
            ApiError::invalid(field, e.reason)
        })?;
    super::apps::create_in(&state, &caller, project, &body.name, spec).await
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PatchTemplateBody {
    #[serde(default)]
    pub description: Option<String>,
    /// The new parameters (the whole list).
    #[serde(default)]
    pub parameters: Option<Vec<Parameter>>,
    /// The new components (the whole list), in the App's shape with `${name}` slots.
    #[serde(default)]
    pub components: Option<Vec<Value>>,
}

/// Changes a template's description, parameters or components (members where it lives;
/// platform administrators for global ones). The result must still instantiate.
pub async fn patch(
    State(state): State<AppState>,
    caller: Caller,
    Path(path): Path<IdPath>,
    Body(body): Body<PatchTemplateBody>,
) -> ApiResult<Json<TemplateResponse>> {
    let (template, role) = load(&state, &caller, &path.id).await?;
    authz::require(role, Need::Write, "stack template")?;
    if body.description.is_none() && body.parameters.is_none() && body.components.is_none() {
        return Err(ApiError::bad_request(
            "nothing to change: set description, parameters or components",
        ));
    }
    let mut spec = template.spec.clone();
    if let Some(description) = body.description {
        spec.description = description;
    }
    if let Some(parameters) = body.parameters {
        spec.parameters = parameters;
    }
    if let Some(components) = body.components {
        if components.is_empty() || components.len() > 64 {
            return Err(ApiError::invalid("components", "1 to 64 components"));
        }
        spec.components = to_crd_components(components)?;
    }
    template::check(&spec).map_err(|e| ApiError::invalid(super::api_field(&e.field), e.reason))?;
    let api: Api<StackTemplate> = Api::namespaced(
        state.client().clone(),
        &template.namespace().unwrap_or_default(),
    );
    let ops: json_patch::Patch = serde_json::from_value(serde_json::json!([
        {"op": "add", "path": "/spec/description", "value": spec.description},
        {"op": "add", "path": "/spec/parameters", "value": spec.parameters},
        {"op": "add", "path": "/spec/components", "value": spec.components},
    ]))
    .map_err(ApiError::internal)?;
    let actor = serde_json::json!({"metadata": {"annotations": actor_annotations(&caller)}});
    api.patch(
        &template.name_any(),
        &super::patch_params(),
        &kube::api::Patch::Merge(&actor),
    )
    .await?;
    let updated = api
        .patch(
            &template.name_any(),
            &super::patch_params(),
            &kube::api::Patch::<()>::Json(ops),
        )
        .await?;
    Ok(Json(response(&updated)))
}
