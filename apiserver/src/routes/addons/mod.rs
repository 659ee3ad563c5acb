//! The addon catalog (AddonDefinitions) and standalone addons (AddonInstances) with their
//! revision history, upgrades and rollbacks.

pub use kubenest_api::addons::{
    AddonRollbackBody, DefinitionResponse, InstanceQuery, InstanceResponse, NamePath,
    NewInstanceBody, PatchInstanceBody, RevisionView,
};

use crate::extract::Query;
use crate::reply::{Accepted, Removal};
use axum::Json;
use axum::extract::{Path, State};
use kube::ResourceExt;
use kube::api::{Api, Patch};
use kubenest_crds::addon::{AddonDefinition, AddonInstance, AddonInstanceSpec};
use kubenest_crds::names::annotations;
use serde_json::{Value, json};

use super::removal::{DeleteQuery, Place, RemovalResponse, force_addon, waiting_for};
use super::{IdPath, Scoped, actor_annotations, check_dns_label, patch_params, post_params};
use crate::authz::{Caller, Need};
use crate::error::{ApiError, ApiResult};
use crate::extract::Body;
use crate::k8s;
use crate::state::AppState;

mod checks;
use checks::{check_values, check_version};
pub(crate) use checks::{definition_named, values_refusal, version_refusal};
use kubenest_domain::app::ways_out::AddonChange;

fn definition_response(definition: &AddonDefinition) -> DefinitionResponse {
    let spec = &definition.spec;
    DefinitionResponse {
        name: definition.name_any(),
        display_name: spec.display_name.clone(),
        chart_repository: spec.chart.repository.clone(),
        chart_name: spec.chart.name.clone(),
        chart_version: spec.chart.version.clone(),
        exports: spec.exports.clone(),
        values_schema: spec.values_schema.clone().map(Value::Object),
        default_values: Value::Object(spec.default_values.clone()),
    }
}

/// The catalog (any signed-in user).
pub async fn definitions(
    State(state): State<AppState>,
    _caller: Caller,
) -> ApiResult<Json<Vec<DefinitionResponse>>> {
    let list: Vec<AddonDefinition> =
        k8s::list_in(state.client(), &state.settings().system_namespace).await?;
    Ok(Json(list.iter().map(definition_response).collect()))
}

/// One catalog entry.
pub async fn definition(
    State(state): State<AppState>,
    _caller: Caller,
    Path(path): Path<NamePath>,
) -> ApiResult<Json<DefinitionResponse>> {
    let found = definition_named(&state, &path.name)
        .await?
        .ok_or_else(|| ApiError::not_found("addon definition"))?;
    Ok(Json(definition_response(&found)))
}

fn instance_response(addon: &AddonInstance, project_id: Option<String>) -> InstanceResponse {
    let status = addon.status.clone().unwrap_or_default();
    let namespace = addon.namespace().unwrap_or_default();
    let message = status
        .conditions
        .iter()
        .find(|c| c.type_ == "Ready")
        .map(|c| c.message.clone())
        .unwrap_or(status.message);
    InstanceResponse {
        id: k8s::uid(addon),
        name: addon.name_any(),
        org: k8s::org_name_of(&namespace).unwrap_or_default().to_owned(),
        project: addon.spec.project.clone(),
        project_id,
        definition: addon.spec.definition.clone(),
        version: addon.spec.version.clone(),
        values: Value::Object(addon.spec.values.clone()),
        phase: status.phase.unwrap_or_else(|| "Pending".into()),
        message,
        revision: status.revision,
        observed_revision: status.observed_revision,
        export_secret: status.export_secret,
        git_commit: status.git_commit,
        gitops_error: status.gitops_error,
        sync: crate::routes::apps::sync_view(status.sync.unwrap_or_default()),
        created_at: k8s::created(addon),
        progress_deadline_seconds: addon.spec.progress_deadline_seconds,
        revisions: None,
    }
}

/// Installs a standalone addon in a project (members).
pub async fn create(
    State(state): State<AppState>,
    caller: Caller,
    Body(body): Body<NewInstanceBody>,
) -> ApiResult<Accepted<Json<InstanceResponse>>> {
    let project = super::writable_project(&state, &caller, &body.project_id).await?;
    check_dns_label("name", &body.name)?;
    let Some(definition) = definition_named(&state, &body.definition).await? else {
        return Err(ApiError::missing(
            "definition",
            "no such addon in the catalog",
        ));
    };
    check_version(body.version.as_ref())?;
    check_values(&definition, &body.values)?;
    let deadline = super::apps::check_deadline(body.progress_deadline_seconds)?;
    let namespace = project.namespace();
    if let Some(refused) =
        super::fences::addon_refusal(&state, &namespace, &project.object.name_any()).await?
    {
        return Err(ApiError::exceeded(
            refused.code,
            "project_id",
            refused.reason,
        ));
    }
    let mut addon = AddonInstance::new(
        &body.name,
        AddonInstanceSpec {
            project: project.object.name_any(),
            definition: body.definition,
            version: body.version,
            values: body.values,
            progress_deadline_seconds: deadline,
        },
    );
    addon.metadata.annotations = Some(actor_annotations(&caller));
    let api: Api<AddonInstance> = Api::namespaced(state.client().clone(), &project.namespace());
    let created = api
        .create(&post_params(), &addon)
        .await
        .map_err(|e| match e {
            kube::Error::Api(s) if s.code == 409 => ApiError::conflict(
                "exists",
                format!("an addon named {:?} exists in this organization", body.name),
            ),
            other => other.into(),
        })?;
    Ok(Accepted(Json(instance_response(
        &created,
        project.object.uid(),
    ))))
}

/// The standalone addons you have a role on.
pub async fn list(
    State(state): State<AppState>,
    caller: Caller,
    Query(query): Query<InstanceQuery>,
) -> ApiResult<Json<Vec<InstanceResponse>>> {
    let views = match &query.org {
        Some(org) => vec![super::org_view(&state, &caller, org).await?],
        None => super::visible_orgs(&state, &caller).await?,
    };
    let mut items = Vec::new();
    for view in &views {
        let addons: Vec<AddonInstance> = k8s::list_in(state.client(), &view.namespace).await?;
        for addon in &addons {
            if view.role_in_project(&caller, &addon.spec.project).is_none() {
                continue;
            }
            let project_id = view
                .projects
                .iter()
                .find(|p| p.name_any() == addon.spec.project)
                .and_then(ResourceExt::uid);
            if query.project_id.is_some() && project_id != query.project_id {
                continue;
            }
            items.push(instance_response(addon, project_id));
        }
    }
    Ok(Json(items))
}

async fn load(state: &AppState, caller: &Caller, id: &str) -> ApiResult<Scoped<AddonInstance>> {
    super::in_project(
        state,
        caller,
        k8s::Kind::AddonInstance,
        id,
        |a: &AddonInstance| &a.spec.project,
    )
    .await
}

/// One standalone addon with its revisions.
pub async fn get(
    State(state): State<AppState>,
    caller: Caller,
    Path(path): Path<IdPath>,
) -> ApiResult<Json<InstanceResponse>> {
    let scoped = load(&state, &caller, &path.id).await?;
    scoped.require(Need::Read, "addon instance")?;
    let revisions = state
        .history()
        .addon_revisions(&scoped.org.name_any(), &path.id)
        .await?;
    let mut body = instance_response(
        &scoped.object,
        scoped.project.as_ref().and_then(ResourceExt::uid),
    );
    body.revisions = Some(
        revisions
            .into_iter()
            .map(|r| RevisionView {
                revision: r.revision,
                operation: serde_json::to_value(r.operation)
                    .ok()
                    .and_then(|v| v.as_str().map(str::to_owned))
                    .unwrap_or_default(),
                chart_version: r
                    .chart
                    .get("version")
                    .and_then(Value::as_str)
                    .map(str::to_owned),
                values: r.values,
                rollback_to: r.rollback_to,
                actor: r.actor,
                result: r.status,
                message: r.message,
                created_at: r.created_at.to_rfc3339(),
            })
            .collect(),
    );
    Ok(Json(body))
}

/// Upgrades an addon or changes its values (members); a new revision.
pub async fn patch(
    State(state): State<AppState>,
    caller: Caller,
    Path(path): Path<IdPath>,
    Body(body): Body<PatchInstanceBody>,
) -> ApiResult<Accepted<Json<InstanceResponse>>> {
    let scoped = load(&state, &caller, &path.id).await?;
    scoped.require(Need::Write, "addon instance")?;
    if body.version.is_none() && body.values.is_none() {
        return Err(ApiError::bad_request(
            "nothing to change: set version or values",
        ));
    }
    check_version(body.version.as_ref())?;
    let spec = &scoped.object.spec;
    let changes = body
        .version
        .as_ref()
        .is_some_and(|v| spec.version.as_ref() != Some(v))
        || body.values.as_ref().is_some_and(|v| v != &spec.values);
    super::ways_out::admit_addon(&scoped.object, AddonChange::Patch { changes })?;
    if let Some(values) = &body.values {
        let definition = definition_named(&state, &scoped.object.spec.definition)
            .await?
            .ok_or_else(|| ApiError::conflict("no_definition", "the addon's definition is gone"))?;
        check_values(&definition, values)?;
    }
    let api: Api<AddonInstance> = Api::namespaced(state.client().clone(), &scoped.namespace());
    let name = scoped.object.name_any();
    // Who asked first, then the change; values are replaced whole (a merge patch would merge
    // the maps key by key).
    let actor = json!({"metadata": {"annotations": actor_annotations(&caller)}});
    api.patch(&name, &patch_params(), &Patch::Merge(&actor))
        .await?;
    let mut ops = Vec::new();
    if let Some(version) = &body.version {
        ops.push(json!({"op": "add", "path": "/spec/version", "value": version}));
    }
    if let Some(values) = &body.values {
        ops.push(json!({"op": "add", "path": "/spec/values", "value": values}));
    }
    let ops: json_patch::Patch =
        serde_json::from_value(Value::Array(ops)).map_err(ApiError::internal)?;
    let updated = api
        .patch(&name, &patch_params(), &Patch::<()>::Json(ops))
        .await?;
    Ok(Accepted(Json(instance_response(
        &updated,
        scoped.project.as_ref().and_then(ResourceExt::uid),
    ))))
}

/// Restores an earlier revision (members); a new revision that points at it.
pub async fn rollback(
    State(state): State<AppState>,
    caller: Caller,
    Path(path): Path<IdPath>,
    Body(body): Body<AddonRollbackBody>,
) -> ApiResult<Accepted<Json<InstanceResponse>>> {
    let scoped = load(&state, &caller, &path.id).await?;
    scoped.require(Need::Write, "addon instance")?;
    let revisions = state
        .history()
        .addon_revisions(&scoped.org.name_any(), &path.id)
        .await?;
    if !revisions.iter().any(|r| r.revision == body.revision) {
        return Err(ApiError::missing(
            "revision",
            "this addon has no such revision",
        ));
    }
    let mut annotations = actor_annotations(&caller);
    annotations.insert(
        annotations::ROLLBACK_TO.to_owned(),
        format!("{}@{}", body.revision, uuid::Uuid::new_v4().simple()),
    );
    let patch = json!({"metadata": {"annotations": annotations}});
    let api: Api<AddonInstance> = Api::namespaced(state.client().clone(), &scoped.namespace());
    let updated = api
        .patch(
            &scoped.object.name_any(),
            &patch_params(),
            &Patch::Merge(&patch),
        )
        .await?;
    Ok(Accepted(Json(instance_response(
        &updated,
        scoped.project.as_ref().and_then(ResourceExt::uid),
    ))))
}

/// Uninstalls a standalone addon (members); the answer says what the deletion waits for.
/// `?force=true` (admins) removes it from kubenest now, without its agent.
pub async fn delete(
    State(state): State<AppState>,
    caller: Caller,
    Path(path): Path<IdPath>,
    Query(query): Query<DeleteQuery>,
) -> ApiResult<Removal<Json<RemovalResponse>>> {
    let scoped = load(&state, &caller, &path.id).await?;
    scoped.require(Need::Write, "addon instance")?;
    if query.force {
        scoped.require(Need::Admin, "addon instance")?;
        let mut removed = RemovalResponse::removed();
        let place = Place {
            org: &scoped.org,
            project: scoped.project.as_ref(),
            cluster: scoped.cluster.as_ref(),
        };
        force_addon(&state, &caller, place, &scoped.object, &mut removed).await?;
        return Ok(Removal::Gone(Json(removed)));
    }
    let api: Api<AddonInstance> = Api::namespaced(state.client().clone(), &scoped.namespace());
    api.delete(&scoped.object.name_any(), &super::delete_params())
        .await?;
    let what = format!("addon {}", scoped.object.name_any());
    Ok(Removal::Started(Json(RemovalResponse::deleting(
        waiting_for(scoped.cluster.as_ref(), &what),
    ))))
}
