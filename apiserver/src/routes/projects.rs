//! Projects: one namespace on one cluster.

pub use kubenest_api::projects::{NewProjectBody, ProjectResponse};

use crate::extract::Query;
use crate::reply::{Created, Removal};
use axum::Json;
use axum::extract::{Path, State};
use kube::ResourceExt;
use kube::api::Api;
use kubenest_crds::App;
use kubenest_crds::addon::AddonInstance;
use kubenest_crds::cluster::ClusterState;
use kubenest_crds::project::{PodSecurity, Project, ProjectSpec};
use std::time::Duration;

use super::removal::{DeleteQuery, RemovalResponse, force_project, waiting_for};
use super::{
    IdPath, MemberBody, MemberPath, MemberView, OrgPath, actor_annotations, change_member,
    check_dns_label, org_view, post_params,
};
use crate::authz::{self, Caller, Need};
use crate::error::{ApiError, ApiResult};
use crate::extract::Body;
use crate::k8s;
use crate::state::AppState;

/// The API shape of a project.
pub fn response(project: &Project, cluster_id: Option<String>) -> ProjectResponse {
    let status = project.status.clone().unwrap_or_default();
    let namespace = project.namespace().unwrap_or_default();
    let message = status
        .conditions
        .iter()
        .find(|c| c.type_ == "Ready")
        .map(|c| c.message.clone())
        .unwrap_or(status.cluster_message);
    ProjectResponse {
        id: k8s::uid(project),
        name: project.name_any(),
        org: k8s::org_name_of(&namespace).unwrap_or_default().to_owned(),
        cluster: project.spec.cluster.clone(),
        cluster_id,
        namespace: project.spec.namespace.clone(),
        phase: format!("{:?}", status.phase),
        message,
        last_observation: status.last_observation,
        registry_secret: project.spec.registry_secret.clone(),
        ingress_ca: project.spec.ingress_ca,
        members: project
            .spec
            .members
            .iter()
            .map(super::member_view)
            .collect(),
        created_at: k8s::created(project),
        progress_deadline_seconds: project.spec.progress_deadline_seconds,
        pod_security: project.spec.pod_security.unwrap_or_default(),
        fences: super::fences::view(
            project.spec.quota.as_ref(),
            project.spec.defaults.as_ref(),
            project.spec.network.as_ref(),
        ),
        fences_healed: project
            .status
            .as_ref()
            .map(|s| s.healed.clone())
            .unwrap_or_default(),
    }
}

/// Creates a project on a cluster (members of the organization or the cluster).
pub async fn create(
    State(state): State<AppState>,
    caller: Caller,
    Path(path): Path<OrgPath>,
    Body(body): Body<NewProjectBody>,
) -> ApiResult<Created<Json<ProjectResponse>>> {
    let view = org_view(&state, &caller, &path.org).await?;
    check_dns_label("name", &body.name)?;
    let namespace = body.namespace.clone().unwrap_or_else(|| body.name.clone());
    check_dns_label("namespace", &namespace)?;
    // The field that named the namespace: `name` when it defaulted to it.
    let field = if body.namespace.is_some() {
        "namespace"
    } else {
        "name"
    };
    if let Some(reason) = kubenest_domain::names::reserved_namespace(&namespace) {
        return Err(ApiError::invalid(field, reason));
    }
    if let Some(secret) = &body.registry_secret {
        check_dns_label("registry_secret", secret)?;
    }
    let Some(cluster) = view
        .clusters
        .iter()
        .find(|c| c.uid().as_deref() == Some(body.cluster_id.as_str()))
    else {
        return Err(ApiError::missing(
            "cluster_id",
            "no such cluster in this organization",
        ));
    };
    let role = view.cluster_role(&caller, cluster);
    if role.is_none() {
        return Err(ApiError::missing(
            "cluster_id",
            "no such cluster in this organization",
        ));
    }
    authz::require(role, Need::Write, "cluster")?;
    check_pod_security(&caller, &view.org, body.pod_security)?;
    let (quota, defaults, network) = match &body.fences {
        Some(fences) => {
            let org_role = authz::role_at(&caller, &view.org, None, None);
            if !org_role.is_some_and(|role| authz::allows(role, Need::Admin)) {
                return Err(ApiError {
                    field: Some("fences".into()),
                    ..ApiError::forbidden(
                        "fences: setting a project's fences needs the admin role in its \
                         organization",
                    )
                });
            }
            let names: Vec<String> = view.projects.iter().map(ResourceExt::name_any).collect();
            super::fences::check_fences(fences, &body.name, &names)?
        }
        None => (None, None, None),
    };
    let deadline = super::apps::check_deadline(body.progress_deadline_seconds)?;
    if let Some(other) = view.projects.iter().find(|p| {
        p.spec.cluster == cluster.name_any()
            && p.spec.namespace == namespace
            && kubenest_domain::project::holds_namespace(p)
    }) {
        return Err(ApiError::conflict(
            "namespace_taken",
            format!(
                "project {:?} already uses namespace {namespace:?} on this cluster",
                other.name_any()
            ),
        ));
    }
    let mut project = Project::new(
        &body.name,
        ProjectSpec {
            cluster: cluster.name_any(),
            namespace,
            registry_secret: body.registry_secret,
            ingress_ca: false,
            members: vec![],
            progress_deadline_seconds: deadline,
            pod_security: body.pod_security,
            quota,
            defaults,
            network,
        },
    );
    project.metadata.annotations = Some(actor_annotations(&caller));
    let api: Api<Project> = Api::namespaced(state.client().clone(), &view.namespace);
    let created = api
        .create(&post_params(), &project)
        .await
        .map_err(|e| match e {
            kube::Error::Api(s) if s.code == 409 => ApiError::conflict(
                "exists",
                format!(
                    "a project named {:?} exists in this organization",
                    body.name
                ),
            ),
            other => other.into(),
        })?;
    // Its fences hold from the caller's next request on (`fences::refusal` reads the mirror).
    state.mirror().caught_up(&created).await;
    // The agent takes a stored project's namespace; a dry run's reaches no agent.
    let connected = cluster.status.as_ref().map(|s| s.state) == Some(ClusterState::Connected)
        && !crate::dry_run::active();
    let created = if connected {
        confirmed(&api, created, field).await?
    } else {
        created
    };
    Ok(Created(Json(response(&created, cluster.uid()))))
}

/// A Pod Security level other than the default is the organization's admins' to choose: a
/// project's members run its pods, so they do not pick the rules those pods are held to.
fn check_pod_security(
    caller: &Caller,
    org: &kubenest_crds::Organization,
    level: Option<PodSecurity>,
) -> ApiResult<()> {
    let org_role = authz::role_at(caller, org, None, None);
    match level {
        Some(level) if level != PodSecurity::default() => {
            if org_role.is_some_and(|role| authz::allows(role, Need::Admin)) {
                Ok(())
            } else {
                Err(ApiError {
                    field: Some("pod_security".into()),
                    ..ApiError::forbidden(
                        "pod_security: choosing a project's Pod Security level needs the admin \
                         role in its organization",
                    )
                })
            }
        }
        _ => Ok(()),
    }
}

/// How long a project's creation waits for a connected cluster's agent to take its namespace.
const CONFIRM_WAIT: Duration = Duration::from_secs(5);

/// Waits (at most [`CONFIRM_WAIT`]) for the agent of a connected cluster to take or refuse the
/// new project's namespace. A namespace that already exists on the cluster and is not
/// kubenest's (or is another project's) is refused at the door: the project, which never owned
/// it, is removed again and the answer is a 422 on `field` with the agent's reason. A slow
/// agent leaves the project `Pending`, as a disconnected cluster does.
async fn confirmed(api: &Api<Project>, created: Project, field: &str) -> ApiResult<Project> {
    let name = created.name_any();
    let deadline = tokio::time::Instant::now() + CONFIRM_WAIT;
    let mut latest = created;
    while tokio::time::Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(100)).await;
        let Some(project) = api.get_opt(&name).await? else {
            break;
        };
        let status = project.status.clone().unwrap_or_default();
        if status.cluster_phase.as_deref() == Some("Failed")
            && !kubenest_domain::project::owns_namespace(&status)
        {
            api.delete(&name, &super::delete_params()).await?;
            return Err(ApiError::invalid(
                field,
                format!(
                    "the cluster refused namespace {}: {}",
                    project.spec.namespace, status.cluster_message
                ),
            ));
        }
        let ready = status.phase == kubenest_crds::project::ProjectPhase::Ready;
        latest = project;
        if ready {
            break;
        }
    }
    Ok(latest)
}

/// The organization's projects you have a role on.
pub async fn list(
    State(state): State<AppState>,
    caller: Caller,
    Path(path): Path<OrgPath>,
) -> ApiResult<Json<Vec<ProjectResponse>>> {
    let view = org_view(&state, &caller, &path.org).await?;
    let cluster_id = |project: &Project| {
        view.clusters
            .iter()
            .find(|c| c.name_any() == project.spec.cluster)
            .and_then(ResourceExt::uid)
    };
    Ok(Json(
        view.projects
            .iter()
            .filter(|p| view.project_role(&caller, p).is_some())
            .map(|p| response(p, cluster_id(p)))
            .collect(),
    ))
}

/// One project.
pub async fn get(
    State(state): State<AppState>,
    caller: Caller,
    Path(path): Path<IdPath>,
) -> ApiResult<Json<ProjectResponse>> {
    let scoped = super::project(&state, &caller, &path.id).await?;
    scoped.require(Need::Read, "project")?;
    let cluster_id = scoped.cluster.as_ref().and_then(ResourceExt::uid);
    Ok(Json(response(&scoped.object, cluster_id)))
}

/// Deletes a project and its namespace on the cluster (admins); refused while it holds apps or
/// standalone addons, and the answer says what the deletion waits for. `?force=true` removes
/// the project, its Apps and addons from kubenest now, without its agent.
pub async fn delete(
    State(state): State<AppState>,
    caller: Caller,
    Path(path): Path<IdPath>,
    Query(query): Query<DeleteQuery>,
) -> ApiResult<Removal<Json<RemovalResponse>>> {
    let scoped = super::project(&state, &caller, &path.id).await?;
    scoped.require(Need::Admin, "project")?;
    if query.force {
        let mut removed = RemovalResponse::removed();
        force_project(
            &state,
            &caller,
            &scoped.org,
            scoped.cluster.as_ref(),
            &scoped.object,
            &mut removed,
        )
        .await?;
        return Ok(Removal::Gone(Json(removed)));
    }
    super::not_in_git(&scoped.object, "project", "Remove its manifest from Git.")?;
    let name = scoped.object.name_any();
    let namespace = scoped.namespace();
    let apps: Vec<App> = k8s::list_in(state.client(), &namespace).await?;
    let addons: Vec<AddonInstance> = k8s::list_in(state.client(), &namespace).await?;
    let held: Vec<String> = apps
        .iter()
        .filter(|a| a.spec.project == name)
        .map(|a| format!("app {}", a.name_any()))
        .chain(
            addons
                .iter()
                .filter(|a| a.spec.project == name)
                .map(|a| format!("addon {}", a.name_any())),
        )
        .collect();
    if !held.is_empty() {
        return Err(ApiError::conflict(
            "not_empty",
            format!(
                "delete what the project holds first: {}; if its cluster will not come back, \
                 ?force=true removes the project with everything in it from kubenest alone",
                held.join(", ")
            ),
        ));
    }
    let api: Api<Project> = Api::namespaced(state.client().clone(), &namespace);
    api.delete(&name, &super::delete_params()).await?;
    let status = scoped.object.status.clone().unwrap_or_default();
    // A namespace the agent never took (it refused it) is not waited for.
    let owned = kubenest_domain::project::owns_namespace(&status);
    let waiting = if owned {
        let what = format!("namespace {}", scoped.object.spec.namespace);
        waiting_for(scoped.cluster.as_ref(), &what)
    } else {
        vec![]
    };
    Ok(Removal::Started(Json(RemovalResponse::deleting(waiting))))
}

/// Gives a user a role on this project (admins).
pub async fn put_member(
    State(state): State<AppState>,
    caller: Caller,
    Path(path): Path<IdPath>,
    Body(body): Body<MemberBody>,
) -> ApiResult<Json<Vec<MemberView>>> {
    let scoped = super::project(&state, &caller, &path.id).await?;
    scoped.require(Need::Admin, "project")?;
    super::not_in_git(
        &scoped.object,
        "project",
        "Change spec.members in its manifest in Git.",
    )?;
    change_member(
        &state,
        &scoped,
        "project",
        &body.user,
        Some(body.role),
        |p| &mut p.spec.members,
    )
    .await
    .map(Json)
}

/// Removes a user's role on this project (admins).
pub async fn delete_member(
    State(state): State<AppState>,
    caller: Caller,
    Path(path): Path<MemberPath>,
) -> ApiResult<Json<Vec<MemberView>>> {
    let scoped = super::project(&state, &caller, &path.id).await?;
    scoped.require(Need::Admin, "project")?;
    super::not_in_git(
        &scoped.object,
        "project",
        "Change spec.members in its manifest in Git.",
    )?;
    change_member(&state, &scoped, "project", &path.user, None, |p| {
        &mut p.spec.members
    })
    .await
    .map(Json)
}
