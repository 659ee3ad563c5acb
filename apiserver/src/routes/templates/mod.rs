//! Stack templates: reusable App shapes with `${parameter}` slots, scoped to a project, a
//! cluster or the whole platform; created by hand, from a running App or from exported JSON;
//! deployed into a project by filling in the parameters.

pub use kubenest_api::templates::{
    DeployBody, FromAppBody, NewTemplateBody, PatchTemplateBody, TemplateQuery,
};

use crate::reply::{Accepted, Created};
use axum::response::NoContent;
use std::collections::BTreeMap;

use crate::extract::Query;
use axum::Json;
use axum::extract::{Path, State};
use kube::ResourceExt;
use kube::api::Api;
use kubenest_crds::StackTemplate;
use kubenest_crds::project::Project;
use kubenest_crds::template::Scope;
use kubenest_domain::template;
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Map, Value};

use super::{IdPath, actor_annotations};
use crate::authz::{self, Caller, Need};
use crate::error::{ApiError, ApiResult};
use crate::extract::Body;
use crate::k8s;
use crate::model::component_to_crd;
use crate::state::AppState;

mod chart;
mod placement;
mod view;

pub use chart::{FromChartBody, TemplateChart, from_chart_route as from_chart};

pub use placement::Placement;
use placement::store;
pub use view::TemplateResponse;
use view::{response, role_on};

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
) -> ApiResult<Created<Json<TemplateResponse>>> {
    let components = to_crd_components(body.components)?;
    store(&state, &caller, &body.at, body.parameters, components).await
}

/// Makes a template of a running App's components (add slots by editing the export).
pub async fn from_app(
    State(state): State<AppState>,
    caller: Caller,
    Body(body): Body<FromAppBody>,
) -> ApiResult<Created<Json<TemplateResponse>>> {
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
            ApiError::missing("app_id", "no such app")
        } else {
            e
        }
    })?;
    app.require(Need::Read, "app")?;
    let spec = template::from_app(&app.object.spec, body.at.scope, "")
        .map_err(|e| ApiError::invalid(e.field, e.reason))?;
    store(&state, &caller, &body.at, spec.parameters, spec.components).await
}

// The one body not in kubenest_api: its document shape is the resource's own StackTemplateSpec,
// which would bring the Kubernetes types into the API types (and the CLI); the CLI sends it as
// a placement and the user's exported template. (A line comment: a doc comment would be the
// schema's description and change the document.)
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ImportBody {
    #[serde(flatten)]
    pub at: Placement,
    /// A template as `GET /templates/{id}/export` returns it.
    #[schemars(with = "ExportedTemplate")]
    pub template: Value,
}

/// What the document says an exported template is: what `template::import_json` reads (it
/// reads the JSON itself, to name the field at fault as `template.…`).
#[derive(JsonSchema)]
#[allow(dead_code)] // a shape for the document only
struct ExportedTemplate {
    #[serde(rename = "apiVersion", default)]
    #[schemars(extend("const" = "kubenest.io/v1alpha1"))]
    api_version: Option<String>,
    #[schemars(extend("const" = "StackTemplate"))]
    kind: String,
    spec: kubenest_crds::template::StackTemplateSpec,
}

/// Imports an exported template.
pub async fn import(
    State(state): State<AppState>,
    caller: Caller,
    Body(body): Body<ImportBody>,
) -> ApiResult<Created<Json<TemplateResponse>>> {
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
) -> ApiResult<NoContent> {
    let (template, role) = load(&state, &caller, &path.id).await?;
    authz::require(role, Need::Write, "stack template")?;
    let api: Api<StackTemplate> = Api::namespaced(
        state.client().clone(),
        &template.namespace().unwrap_or_default(),
    );
    api.delete(&template.name_any(), &super::delete_params())
        .await?;
    Ok(NoContent)
}

/// Deploys a template into a project as a new App (members of the project).
pub async fn deploy(
    State(state): State<AppState>,
    caller: Caller,
    Path(path): Path<IdPath>,
    Body(body): Body<DeployBody>,
) -> ApiResult<Accepted<Json<super::apps::AppResponse>>> {
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
