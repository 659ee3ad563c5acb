//! Forced removal: an App, addon, project or cluster record released from kubenest without its
//! agent, each recorded in the audit log once it is gone (an App also as a `forced` delete
//! deployment), each saying what may be left on the cluster. Refused (409) while the cluster's
//! agent is connected (`agent_connected`: an ordinary deletion will be confirmed), unless the
//! object's deletion already failed its deadline (something on the cluster holds it, which
//! the failure names), and for
//! anything kept in Git (`gitops_owned`: the engine would bring it back); a project or cluster
//! is checked whole, with what it holds, before anything goes.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::ResourceExt;
use kube::api::{Api, Patch};
use kubenest_crds::App;
use kubenest_crds::addon::AddonInstance;
use kubenest_crds::cluster::{Cluster, ClusterState};
use kubenest_crds::organization::Organization;
use kubenest_crds::project::Project;
use kubenest_domain::names::AGENT_NAMESPACE;
use kubenest_store::{
    AuditPath, DeploymentStatus, NewAuditEntry, NewDeployment, Operation, Outcome, StoreError,
};
use serde_json::json;

use super::{RemovalResponse, release};
use crate::authz::Caller;
use crate::error::{ApiError, ApiResult};
use crate::k8s;
use crate::routes::{actor_annotations, not_in_git, patch_params};
use crate::state::AppState;

/// Where an object being removed sits.
#[derive(Debug, Clone, Copy)]
pub struct Place<'a> {
    pub org: &'a Organization,
    pub project: Option<&'a Project>,
    pub cluster: Option<&'a Cluster>,
}

impl Place<'_> {
    fn cluster_name(&self) -> String {
        self.cluster
            .map(ResourceExt::name_any)
            .or_else(|| self.project.map(|p| p.spec.cluster.clone()))
            .unwrap_or_else(|| "(unknown)".into())
    }

    fn cluster_id(&self) -> String {
        self.cluster
            .map(|c| {
                c.status
                    .as_ref()
                    .and_then(|s| s.cluster_id.clone())
                    .unwrap_or_else(|| k8s::uid(c))
            })
            .unwrap_or_default()
    }

    fn namespace(&self) -> String {
        self.project
            .map(|p| p.spec.namespace.clone())
            .unwrap_or_default()
    }
}

/// Refuses a forced removal while the cluster's agent is connected (the state the hub's
/// heartbeats and session keep): that agent would confirm an ordinary deletion, and removing
/// the object behind its back leaves what it runs on the cluster with no owner. A deletion
/// that failed its deadline (`conditions` say so) is the exception: the agent is there, and
/// something on the cluster keeps it from finishing.
fn not_while_connected(cluster: Option<&Cluster>, conditions: &[Condition]) -> ApiResult<()> {
    let Some(cluster) = cluster else {
        return Ok(());
    };
    if kubenest_domain::deletion::overdue(conditions).is_some() {
        return Ok(());
    }
    let connected = cluster.status.as_ref().map(|s| s.state) == Some(ClusterState::Connected);
    if !connected {
        return Ok(());
    }
    Err(ApiError::conflict(
        "agent_connected",
        format!(
            "the agent of cluster {} is connected: delete without ?force=true and the agent \
             removes it from the cluster. Forced removal is for a cluster whose agent will not \
             answer again, or for a deletion that failed its deadline",
            cluster.name_any()
        ),
    ))
}

/// Refuses a forced removal of an object kept in Git: its GitOps engine would create it again
/// at its next reconcile.
fn not_kept_in_git<K: kube::Resource>(object: &K, what: &str) -> ApiResult<()> {
    not_in_git(
        object,
        what,
        "Remove its manifest from Git; the deletion then waits for the cluster as any other.",
    )
}

/// Everything that refuses forcing project `project` (and its Apps and addons) off `cluster`,
/// checked before anything is removed.
async fn project_forceable(
    state: &AppState,
    cluster: Option<&Cluster>,
    project: &Project,
) -> ApiResult<(Vec<App>, Vec<AddonInstance>)> {
    let conditions = project.status.as_ref().map(|s| s.conditions.as_slice());
    not_while_connected(cluster, conditions.unwrap_or_default())?;
    not_kept_in_git(project, "project")?;
    let name = project.name_any();
    let namespace = k8s::namespace(project);
    let apps: Vec<App> = k8s::list_in(state.client(), &namespace).await?;
    let apps: Vec<App> = apps
        .into_iter()
        .filter(|a| a.spec.project == name)
        .collect();
    for app in &apps {
        not_kept_in_git(app, "app")?;
    }
    let addons: Vec<AddonInstance> = k8s::list_in(state.client(), &namespace).await?;
    let addons: Vec<AddonInstance> = addons
        .into_iter()
        .filter(|a| a.spec.project == name)
        .collect();
    for addon in &addons {
        not_kept_in_git(addon, "addon instance")?;
    }
    Ok((apps, addons))
}

/// Records the actor on the object (for whoever reads it before it goes).
async fn mark<K>(api: &Api<K>, name: &str, caller: &Caller) -> ApiResult<()>
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    let patch = json!({"metadata": {"annotations": actor_annotations(caller)}});
    match api
        .patch(name, &patch_params(), &Patch::Merge(&patch))
        .await
    {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(status)) if status.code == 404 => Ok(()),
        Err(error) => Err(error.into()),
    }
}

async fn audit(
    state: &AppState,
    place: &Place<'_>,
    caller: &Caller,
    kind: &str,
    name: &str,
    left: &[String],
) -> ApiResult<()> {
    // A dry run's attempt is the audit layer's to record, marked as one.
    if crate::dry_run::active() {
        return Ok(());
    }
    state
        .history()
        .audit(&NewAuditEntry {
            org_id: place.org.name_any(),
            actor: caller.user.clone(),
            actor_id: Some(caller.id.clone()),
            action: format!("{kind}.force_delete"),
            resource_kind: kind.to_owned(),
            resource_name: name.to_owned(),
            path: AuditPath::Rest,
            outcome: Outcome::Succeeded,
            status: 200,
            details: json!({
                "cluster": place.cluster_name(),
                "namespace": place.namespace(),
                "left_on_cluster": left,
            }),
        })
        .await?;
    crate::audit::note_recorded();
    Ok(())
}

/// Removes App `app` from kubenest without its agent.
pub async fn force_app(
    state: &AppState,
    caller: &Caller,
    place: Place<'_>,
    app: &App,
    out: &mut RemovalResponse,
) -> ApiResult<()> {
    let conditions = app.status.as_ref().map(|s| s.conditions.as_slice());
    not_while_connected(place.cluster, conditions.unwrap_or_default())?;
    not_kept_in_git(app, "app")?;
    remove_app(state, caller, place, app, out).await
}

/// [`force_app`] once it is allowed: the App goes first, then the history and the audit log
/// say so.
async fn remove_app(
    state: &AppState,
    caller: &Caller,
    place: Place<'_>,
    app: &App,
    out: &mut RemovalResponse,
) -> ApiResult<()> {
    let name = app.name_any();
    let uid = k8s::uid(app);
    let status = app.status.clone().unwrap_or_default();
    let api: Api<App> = Api::namespaced(state.client().clone(), &k8s::namespace(app));
    mark(&api, &name, caller).await?;
    release(&api, &name).await?;
    let mut left = Vec::new();
    // Only a recorded revision was ever sent to the cluster.
    if let Some(revision) = &status.revision {
        left.push(format!(
            "cluster {}, namespace {}: what App {name} ran (objects labelled \
             kubenest.io/app-id={uid}), and its StackDeploy {name} in namespace \
             {AGENT_NAMESPACE}",
            place.cluster_name(),
            place.namespace(),
        ));
        // A dry run has judged everything above; it keeps no history.
        if crate::dry_run::active() {
            out.removed.push(format!("app/{name}"));
            out.left_on_cluster.extend(left);
            return Ok(());
        }
        let spec = serde_json::to_value(&app.spec).map_err(ApiError::internal)?;
        let new = NewDeployment {
            // The controllers' own delete row of this App, if they wrote it already.
            intent_key: format!("{uid}/delete"),
            org_id: place.org.name_any(),
            project_id: place.project.map(k8s::uid).unwrap_or_default(),
            cluster_id: place.cluster_id(),
            app_id: uid.clone(),
            app_name: name.clone(),
            revision: revision.clone(),
            operation: Operation::Delete,
            actor: caller.user.clone(),
            spec_before: Some(spec.clone()),
            spec_after: spec,
            rollback_of: None,
        };
        let (row, _) = state.history().record_deployment(&new).await?;
        let message = format!(
            "removed by force by {} without the cluster's confirmation; may be left: {}",
            caller.user,
            left.join("; ")
        );
        match state
            .history()
            .finish_deployment(&row.org_id, row.id, DeploymentStatus::Forced, &message)
            .await
        {
            // The agent confirmed the removal just before: the row already says so.
            Ok(_) | Err(StoreError::InvalidTransition(_)) => {}
            Err(error) => return Err(error.into()),
        }
    }
    audit(state, &place, caller, "app", &name, &left).await?;
    out.removed.push(format!("app/{name}"));
    out.left_on_cluster.extend(left);
    Ok(())
}

/// Removes standalone addon `addon` from kubenest without its agent.
pub async fn force_addon(
    state: &AppState,
    caller: &Caller,
    place: Place<'_>,
    addon: &AddonInstance,
    out: &mut RemovalResponse,
) -> ApiResult<()> {
    let conditions = addon.status.as_ref().map(|s| s.conditions.as_slice());
    not_while_connected(place.cluster, conditions.unwrap_or_default())?;
    not_kept_in_git(addon, "addon instance")?;
    remove_addon(state, caller, place, addon, out).await
}

/// [`force_addon`] once it is allowed: the addon goes first, then the audit log says so.
async fn remove_addon(
    state: &AppState,
    caller: &Caller,
    place: Place<'_>,
    addon: &AddonInstance,
    out: &mut RemovalResponse,
) -> ApiResult<()> {
    let name = addon.name_any();
    let uid = k8s::uid(addon);
    let api: Api<AddonInstance> = Api::namespaced(state.client().clone(), &k8s::namespace(addon));
    mark(&api, &name, caller).await?;
    release(&api, &name).await?;
    let mut left = Vec::new();
    if addon.status.as_ref().and_then(|s| s.revision).is_some() {
        left.push(format!(
            "cluster {}, namespace {}: addon {name}'s Helm release (objects labelled \
             kubenest.io/addon-id={uid}), and its AddonRelease {name} in namespace \
             {AGENT_NAMESPACE}",
            place.cluster_name(),
            place.namespace(),
        ));
    }
    audit(state, &place, caller, "addon", &name, &left).await?;
    out.removed.push(format!("addon/{name}"));
    out.left_on_cluster.extend(left);
    Ok(())
}

/// Removes project `project`, its Apps and its standalone addons from kubenest without its
/// agent.
pub async fn force_project(
    state: &AppState,
    caller: &Caller,
    org: &Organization,
    cluster: Option<&Cluster>,
    project: &Project,
    out: &mut RemovalResponse,
) -> ApiResult<()> {
    let held = project_forceable(state, cluster, project).await?;
    remove_project(state, caller, org, cluster, project, held, out).await
}

/// [`force_project`] once it is allowed, with the Apps and addons the project holds.
async fn remove_project(
    state: &AppState,
    caller: &Caller,
    org: &Organization,
    cluster: Option<&Cluster>,
    project: &Project,
    (apps, addons): (Vec<App>, Vec<AddonInstance>),
    out: &mut RemovalResponse,
) -> ApiResult<()> {
    let name = project.name_any();
    let namespace = k8s::namespace(project);
    let place = Place {
        org,
        project: Some(project),
        cluster,
    };
    for app in &apps {
        remove_app(state, caller, place, app, out).await?;
    }
    for addon in &addons {
        remove_addon(state, caller, place, addon, out).await?;
    }
    let api: Api<Project> = Api::namespaced(state.client().clone(), &namespace);
    mark(&api, &name, caller).await?;
    release(&api, &name).await?;
    let status = project.status.clone().unwrap_or_default();
    let mut left = Vec::new();
    // The namespace is the project's only if the agent ever took it.
    let owned = kubenest_domain::project::owns_namespace(&status);
    if owned {
        left.push(format!(
            "cluster {}: namespace {} with everything in it",
            place.cluster_name(),
            project.spec.namespace
        ));
    }
    audit(state, &place, caller, "project", &name, &left).await?;
    out.removed.push(format!("project/{name}"));
    out.left_on_cluster.extend(left);
    Ok(())
}

/// Removes cluster record `cluster` and every project on it from kubenest without its agent.
/// Nothing is removed unless everything may be.
pub async fn force_cluster(
    state: &AppState,
    caller: &Caller,
    org: &Organization,
    cluster: &Cluster,
    out: &mut RemovalResponse,
) -> ApiResult<()> {
    not_while_connected(Some(cluster), &[])?;
    not_kept_in_git(cluster, "cluster")?;
    let name = cluster.name_any();
    let namespace = k8s::namespace(cluster);
    let projects: Vec<Project> = k8s::list_in(state.client(), &namespace).await?;
    let mut held = Vec::new();
    for project in projects.iter().filter(|p| p.spec.cluster == name) {
        held.push((
            project,
            project_forceable(state, Some(cluster), project).await?,
        ));
    }
    for (project, holds) in held {
        remove_project(state, caller, org, Some(cluster), project, holds, out).await?;
    }
    let place = Place {
        org,
        project: None,
        cluster: Some(cluster),
    };
    let left = vec![format!(
        "cluster {name}: the kubenest agent (Helm release kubenest-agent in namespace \
         {AGENT_NAMESPACE}) and the StackDeploy, AddonRelease and BuildRequest objects it holds; \
         `helm uninstall kubenest-agent -n {AGENT_NAMESPACE}` removes it. Its token no longer \
         connects."
    )];
    let api: Api<Cluster> = Api::namespaced(state.client().clone(), &namespace);
    mark(&api, &name, caller).await?;
    release(&api, &name).await?;
    audit(state, &place, caller, "cluster", &name, &left).await?;
    out.removed.push(format!("cluster/{name}"));
    out.left_on_cluster.extend(left);
    Ok(())
}
