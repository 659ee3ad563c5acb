//! Where a new template goes: its scope resolved to a namespace with the caller's write access
//! checked, and the template stored there.

pub use kubenest_api::templates::Placement;

use crate::reply::Created;
use axum::Json;
use kube::ResourceExt;
use kube::api::Api;
use kubenest_crds::StackTemplate;
use kubenest_crds::template::{Parameter, Scope, StackTemplateSpec};
use kubenest_domain::template;
use serde_json::{Map, Value};

use super::super::{actor_annotations, check_dns_label, post_params};
use super::view::{TemplateResponse, response};
use crate::authz::{Caller, Need};
use crate::error::{ApiError, ApiResult};
use crate::state::AppState;

/// Where a placement resolved to, the caller's write access checked.
#[derive(Debug)]
pub(super) struct Placed {
    namespace: String,
    project: Option<String>,
    cluster: Option<String>,
}

/// Resolves a placement to its namespace (and project or cluster name), checking write access.
pub(super) async fn place(state: &AppState, caller: &Caller, at: &Placement) -> ApiResult<Placed> {
    let (namespace, project, cluster) = resolve(state, caller, at).await?;
    Ok(Placed {
        namespace,
        project,
        cluster,
    })
}

async fn resolve(
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
            let project = super::super::writable_project(state, caller, id).await?;
            Ok((project.namespace(), Some(project.object.name_any()), None))
        }
        Scope::Cluster => {
            let id = at.cluster_id.as_deref().ok_or_else(|| {
                ApiError::invalid("cluster_id", "a cluster template needs cluster_id")
            })?;
            let cluster = match super::super::cluster(state, caller, id).await {
                Ok(c) if c.role.is_some() => c,
                Ok(_) => return Err(ApiError::missing("cluster_id", "no such cluster")),
                Err(e) if e.status == 404 => {
                    return Err(ApiError::missing("cluster_id", "no such cluster"));
                }
                Err(e) => return Err(e),
            };
            cluster.require(Need::Write, "cluster")?;
            Ok((cluster.namespace(), None, Some(cluster.object.name_any())))
        }
    }
}

pub(super) async fn store(
    state: &AppState,
    caller: &Caller,
    at: &Placement,
    parameters: Vec<Parameter>,
    components: Vec<Map<String, Value>>,
) -> ApiResult<Created<Json<TemplateResponse>>> {
    let placed = place(state, caller, at).await?;
    store_at(state, caller, at, placed, parameters, components).await
}

/// Stores a template where [`place`] resolved it to.
pub(super) async fn store_at(
    state: &AppState,
    caller: &Caller,
    at: &Placement,
    placed: Placed,
    parameters: Vec<Parameter>,
    components: Vec<Map<String, Value>>,
) -> ApiResult<Created<Json<TemplateResponse>>> {
    let Placed {
        namespace,
        project,
        cluster,
    } = placed;
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
    template::check(&spec)
        .map_err(|e| ApiError::invalid(super::super::api_field(&e.field), e.reason))?;
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
    Ok(Created(Json(response(&created))))
}
