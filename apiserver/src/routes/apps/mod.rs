//! Apps: create (202, Pending), read with phase, components, sync and drift, change, delete,
//! pause, resume, redeploy, roll back, their deployment history, and component secrets.
//!
//! Every change is a write to the App object; the App controller records it as a deployment
//! and delivers it. Redeploy and rollback are annotations the controller acts on, so kubectl
//! users have the same path. An App that does not converge (`blocked_sync`, or `Failed`) takes
//! only the ways out — a rollback, a change of the failing components, a pause, a delete — and
//! refuses other changes with a 409 that lists them (`ways_out`).

pub use kubenest_api::apps::{NewAppBody, PatchAppBody};

use crate::reply::{Accepted, Removal};
use kubenest_crds::names::finalizers;

use crate::extract::Query;
use axum::Json;
use axum::extract::{Path, State};
use kube::ResourceExt;
use kube::api::{Api, Patch};
use kubenest_crds::App;
use kubenest_crds::app::AppSpec;
use kubenest_domain::app::ways_out::Change;
use serde_json::{Value, json};

use super::removal::{DeleteQuery, Place, RemovalResponse, force_app, waiting_for};
use super::{IdPath, Scoped, actor_annotations, check_dns_label, patch_params, post_params};
use crate::authz::{Caller, Need};
use crate::error::{ApiError, ApiResult};
use crate::extract::Body;
use crate::k8s;
use crate::model::verification::{self};
use crate::state::AppState;

mod actions;
mod checks;
mod history;
mod list;
mod logs;
mod objects;
mod secrets;
mod views;

pub use actions::{RollbackBody, pause, redeploy, resume, rollback};
use checks::*;
pub(crate) use checks::{admit, buildable, check_deadline};
pub use history::{DeploymentView, HistoryQuery, deployments};
pub use list::{AppList, ListQuery, list};
pub use logs::{LogsQuery, logs};
pub use objects::{AppObjects, LiveObjectView, ObjectStatusView, objects};
pub use secrets::{
    ComponentPath, GitCredentialsBody, GitCredentialsResponse, SecretBody, SecretDeleteQuery,
    SecretResponse, delete_git_credentials, delete_secret, put_git_credentials, put_secret,
};
pub use views::*;

/// Refuses (409 `not_deployed`) what reads an App on its cluster before the cluster has
/// received it: there is nothing there yet (`nothing` says what).
pub(super) fn require_deployed(app: &App, nothing: &str) -> ApiResult<()> {
    let deployed = app
        .status
        .as_ref()
        .is_some_and(|s| s.observed_revision.is_some());
    if deployed {
        return Ok(());
    }
    Err(ApiError::conflict(
        "not_deployed",
        format!("the App has not been deployed to its cluster yet; {nothing}"),
    ))
}

pub(super) async fn load(state: &AppState, caller: &Caller, id: &str) -> ApiResult<Scoped<App>> {
    super::in_project(state, caller, k8s::Kind::App, id, |a: &App| &a.spec.project).await
}

/// Creates an App (members of its project). It is Pending until its deployment is recorded
/// and delivered.
pub async fn create(
    State(state): State<AppState>,
    caller: Caller,
    Body(body): Body<NewAppBody>,
) -> ApiResult<Accepted<Json<AppResponse>>> {
    let project = super::writable_project(&state, &caller, &body.project_id).await?;
    let spec = AppSpec {
        project: project.object.name_any(),
        components: check_components(&body.components)?,
        progress_deadline_seconds: check_deadline(body.progress_deadline_seconds)?,
        paused: false,
        verification: body
            .verification
            .as_ref()
            .map(|v| verification::check("verification", v))
            .transpose()?,
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
) -> ApiResult<Accepted<Json<AppResponse>>> {
    check_dns_label("name", name)?;
    let namespace = project.namespace();
    check_buildable(state, &namespace, &spec).await?;
    check_fences(state, &namespace, name, &spec).await?;
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
    state.mirror().wrote(&created);
    let scoped = Scoped {
        object: created.clone(),
        org: project.org,
        cluster: project.cluster,
        project: Some(project.object),
        role: project.role,
    };
    Ok(Accepted(Json(response(&created, Some(&scoped)))))
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

pub(super) async fn write(
    state: &AppState,
    caller: &Caller,
    scoped: &Scoped<App>,
    patch: Value,
) -> ApiResult<Accepted<Json<AppResponse>>> {
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
    state.mirror().wrote(&updated);
    Ok(Accepted(Json(response(&updated, Some(scoped)))))
}

/// Changes an App's components, deadline or verification (members); a new deployment.
pub async fn patch(
    State(state): State<AppState>,
    caller: Caller,
    Path(path): Path<IdPath>,
    Body(body): Body<PatchAppBody>,
) -> ApiResult<Accepted<Json<AppResponse>>> {
    let scoped = load(&state, &caller, &path.id).await?;
    scoped.require(Need::Write, "app")?;
    super::not_in_git(&scoped.object, "app", "Change its manifest in Git.")?;
    if body.components.is_none()
        && body.progress_deadline_seconds.is_none()
        && body.verification.is_none()
    {
        return Err(ApiError::bad_request(
            "nothing to change: set components, progress_deadline_seconds or verification",
        ));
    }
    let mut spec = scoped.object.spec.clone();
    if let Some(components) = &body.components {
        spec.components = check_components(components)?;
    }
    if body.progress_deadline_seconds.is_some() {
        spec.progress_deadline_seconds = check_deadline(body.progress_deadline_seconds)?;
    }
    if let Some(given) = &body.verification {
        spec.verification = given
            .as_ref()
            .map(|v| verification::check("verification", v))
            .transpose()?;
    }
    admit(
        &scoped.object,
        Change::Patch {
            before: &scoped.object.spec.components,
            after: &spec.components,
        },
    )?;
    check_buildable(&state, &scoped.namespace(), &spec).await?;
    check_fences(
        &state,
        &scoped.namespace(),
        &scoped.object.name_any(),
        &spec,
    )
    .await?;
    let mut patch = json!({"spec": {
        "components": spec.components,
        "progressDeadlineSeconds": spec.progress_deadline_seconds,
    }});
    if body.verification.is_some() {
        patch["spec"]["verification"] = verification::merge_patch(spec.verification.as_ref())?;
    }
    write(&state, &caller, &scoped, patch).await
}

/// Deletes an App and everything it runs on its cluster (members); the answer says what the
/// deletion waits for. `?force=true` (admins) removes it from kubenest now, without its agent.
pub async fn delete(
    State(state): State<AppState>,
    caller: Caller,
    Path(path): Path<IdPath>,
    Query(query): Query<DeleteQuery>,
) -> ApiResult<Removal<Json<RemovalResponse>>> {
    let scoped = load(&state, &caller, &path.id).await?;
    scoped.require(Need::Write, "app")?;
    if query.force {
        scoped.require(Need::Admin, "app")?;
        let mut removed = RemovalResponse::removed();
        let place = Place {
            org: &scoped.org,
            project: scoped.project.as_ref(),
            cluster: scoped.cluster.as_ref(),
        };
        force_app(&state, &caller, place, &scoped.object, &mut removed).await?;
        return Ok(Removal::Gone(Json(removed)));
    }
    super::not_in_git(&scoped.object, "app", "Remove its manifest from Git.")?;
    let api: Api<App> = Api::namespaced(state.client().clone(), &scoped.namespace());
    // Who asked is recorded before the delete, for the history's delete row.
    let patch = json!({"metadata": {"annotations": actor_annotations(&caller)}});
    api.patch(
        &scoped.object.name_any(),
        &patch_params(),
        &Patch::Merge(&patch),
    )
    .await?;
    api.delete(&scoped.object.name_any(), &super::delete_params())
        .await?;
    let what = format!("app {}", scoped.object.name_any());
    Ok(Removal::Started(Json(RemovalResponse::deleting(
        waiting_for(scoped.cluster.as_ref(), &what),
    ))))
}
