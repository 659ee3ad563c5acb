//! The rules the REST handlers apply before they store an object, applied to an object a
//! kubectl or GitOps writer sends. Each refusal is the REST one (same code, same reason) with
//! the field in the resource's own spelling (`spec.components[1].workload.image` where REST
//! says `components[1].workload_spec.image`).
//!
//! What the custom resource definitions already check (types, bounds, patterns, one source per
//! workload, immutable fields) is left to their schemas and CEL rules; what needs other objects
//! (the project, the cluster, the addon catalog, the App's status) is here.

use kube::ResourceExt;
use kube::api::Api;
use kube::core::DynamicObject;
use kube::core::admission::AdmissionRequest;
use kubenest_crds::App;
use kubenest_crds::addon::AddonInstance;
use kubenest_crds::cluster::Cluster;
use kubenest_crds::common::Member;
use kubenest_crds::names::annotations;
use kubenest_crds::organization::Organization;
use kubenest_crds::project::Project;
use kubenest_crds::template::StackTemplate;
use kubenest_domain::app::check_component_names;
use kubenest_domain::app::ways_out::{AddonChange, Change};
use serde::de::DeserializeOwned;

use crate::error::{ApiError, ApiResult};
use crate::k8s;
use crate::routes::{addons, apps, ways_out};
use crate::state::AppState;

/// Checks a create or update of any kubenest resource.
pub async fn check(state: &AppState, request: &AdmissionRequest<DynamicObject>) -> ApiResult<()> {
    let namespace = request.namespace.clone().unwrap_or_default();
    match request.resource.resource.as_str() {
        "apps" => {
            let (new, old) = objects::<App>(request)?;
            app(state, &namespace, &new, old.as_ref()).await
        }
        "addoninstances" => {
            let (new, old) = objects::<AddonInstance>(request)?;
            addon(state, &namespace, &new, old.as_ref()).await
        }
        "organizations" => {
            let (new, _) = objects::<Organization>(request)?;
            members(&new.spec.members)
        }
        "clusters" => {
            let (new, _) = objects::<Cluster>(request)?;
            members(&new.spec.members)
        }
        "projects" => {
            let (new, old) = objects::<Project>(request)?;
            members(&new.spec.members)?;
            project(state, &namespace, &new, old.as_ref()).await
        }
        "stacktemplates" => {
            let (new, _) = objects::<StackTemplate>(request)?;
            kubenest_domain::template::check(&new.spec)
                .map_err(|e| ApiError::invalid(spec_field(&e.field), e.reason))
        }
        _ => Ok(()),
    }
}

/// The object written and the one it replaces, typed.
fn objects<K: DeserializeOwned>(
    request: &AdmissionRequest<DynamicObject>,
) -> ApiResult<(K, Option<K>)> {
    let typed = |object: &DynamicObject| {
        serde_json::to_value(object)
            .and_then(serde_json::from_value::<K>)
            .map_err(|e| ApiError::invalid("spec", e.to_string()))
    };
    let new = request
        .object
        .as_ref()
        .ok_or_else(|| ApiError::bad_request("an admission request without its object"))?;
    let old = request.old_object.as_ref().map(typed).transpose()?;
    Ok((typed(new)?, old))
}

/// A field of the spec, `spec.`-prefixed as Kubernetes clients name it.
fn spec_field(field: &str) -> String {
    if field == "spec" || field.starts_with("spec.") {
        field.to_owned()
    } else {
        format!("spec.{field}")
    }
}

fn invalid(field: &str, reason: impl Into<String>) -> ApiError {
    ApiError::invalid(spec_field(field), reason)
}

/// A members list: each member names the user's id, which is what the role binds. A name alone
/// would be accepted and grant nothing, silently (the REST API always fills the id in).
fn members(members: &[Member]) -> ApiResult<()> {
    match members.iter().position(|m| m.user_id.is_none()) {
        Some(i) => Err(invalid(
            &format!("members[{i}].userId"),
            format!(
                "member {:?} has no userId: a role binds the user's id (`kubenest users list`), \
                 never a name alone",
                members[i].user
            ),
        )),
        None => Ok(()),
    }
}

/// Whether project `name` exists: the [`crate::mirror`] says so, or else the API server does.
async fn project_exists(state: &AppState, namespace: &str, name: &str) -> ApiResult<()> {
    let mirrored = k8s::org_name_of(namespace)
        .and_then(|org| state.mirror().org(org))
        .is_some_and(|org| org.projects.iter().any(|p| p.name_any() == name));
    if mirrored {
        return Ok(());
    }
    let api: Api<Project> = Api::namespaced(state.client().clone(), namespace);
    match api.get_opt(name).await? {
        Some(_) => Ok(()),
        None => Err(invalid("project", "no such project in this organization")),
    }
}

/// An App: its project exists, its components are named as every path requires, a change of
/// an App that does not converge is one of the ways out, and the controller can build it.
async fn app(state: &AppState, namespace: &str, new: &App, old: Option<&App>) -> ApiResult<()> {
    project_exists(state, namespace, &new.spec.project).await?;
    let names: Vec<&str> = new
        .spec
        .components
        .iter()
        .map(|c| c.name.as_str())
        .collect();
    check_component_names(&names).map_err(|e| invalid(&e.field, e.reason))?;
    if let Some(old) = old {
        for change in changes(old, new) {
            apps::admit(old, change)?;
        }
    }
    apps::buildable(state, namespace, &new.spec)
        .await?
        .map_err(|e| invalid(&e.field, e.reason))?;
    match crate::routes::fences::refusal(
        state,
        namespace,
        &new.spec.project,
        &new.name_any(),
        &new.spec,
    )
    .await?
    {
        Some(refused) => Err(ApiError::exceeded(
            refused.code,
            refused.field,
            refused.reason,
        )),
        None => Ok(()),
    }
}

/// What an update of an App asks for, in the terms of the ways out.
fn changes<'a>(old: &'a App, new: &'a App) -> Vec<Change<'a>> {
    let annotation = |app: &App, key: &str| app.annotations().get(key).cloned();
    let mut changes = Vec::new();
    if annotation(new, annotations::ROLLBACK_TO).is_some()
        && annotation(new, annotations::ROLLBACK_TO) != annotation(old, annotations::ROLLBACK_TO)
    {
        changes.push(Change::Rollback);
    }
    if annotation(new, annotations::REDEPLOY) != annotation(old, annotations::REDEPLOY) {
        changes.push(Change::Redeploy);
    }
    match (old.spec.paused, new.spec.paused) {
        (false, true) => changes.push(Change::Pause),
        (true, false) => changes.push(Change::Resume),
        _ => {}
    }
    // As REST's PATCH, whichever of these fields it changes.
    if old.spec.components != new.spec.components
        || old.spec.progress_deadline_seconds != new.spec.progress_deadline_seconds
        || old.spec.verification != new.spec.verification
    {
        changes.push(Change::Patch {
            before: &old.spec.components,
            after: &new.spec.components,
        });
    }
    changes
}

/// A standalone addon: its project and definition exist, the version is exact, the values fit
/// the definition's schema, and a failed addon takes only its ways out.
async fn addon(
    state: &AppState,
    namespace: &str,
    new: &AddonInstance,
    old: Option<&AddonInstance>,
) -> ApiResult<()> {
    project_exists(state, namespace, &new.spec.project).await?;
    let Some(definition) = addons::definition_named(state, &new.spec.definition).await? else {
        return Err(invalid("definition", "no such addon in the catalog"));
    };
    if let Some(reason) = addons::version_refusal(new.spec.version.as_ref()) {
        return Err(invalid("version", reason));
    }
    if let Some(old) = old {
        let changes = old.spec.version != new.spec.version || old.spec.values != new.spec.values;
        let rollback = new.annotations().get(annotations::ROLLBACK_TO).is_some()
            && new.annotations().get(annotations::ROLLBACK_TO)
                != old.annotations().get(annotations::ROLLBACK_TO);
        let change = if rollback {
            AddonChange::Rollback
        } else {
            AddonChange::Patch { changes }
        };
        if old.spec != new.spec || rollback {
            ways_out::admit_addon(old, change)?;
        }
    }
    if old.is_none()
        && let Some(refused) =
            crate::routes::fences::addon_refusal(state, namespace, &new.spec.project).await?
    {
        return Err(ApiError::exceeded(
            refused.code,
            refused.field,
            refused.reason,
        ));
    }
    match addons::values_refusal(&definition, &new.spec.values)? {
        Some((field, reason)) => Err(invalid(&field, reason)),
        None => Ok(()),
    }
}

/// A project: its namespace is not Kubernetes' own, its cluster is one of the organization's,
/// and no other project uses its namespace on that cluster.
async fn project(
    state: &AppState,
    namespace: &str,
    new: &Project,
    old: Option<&Project>,
) -> ApiResult<()> {
    if let Some(reason) = kubenest_domain::names::reserved_namespace(&new.spec.namespace) {
        return Err(invalid("namespace", reason));
    }
    if old.is_some() {
        // Cluster and namespace are immutable (the CRD's rules); nothing else needs a lookup.
        return Ok(());
    }
    let clusters: Api<Cluster> = Api::namespaced(state.client().clone(), namespace);
    let named = kubenest_domain::names::is_dns_subdomain(&new.spec.cluster);
    if !named || clusters.get_opt(&new.spec.cluster).await?.is_none() {
        return Err(invalid("cluster", "no such cluster in this organization"));
    }
    let projects: Api<Project> = Api::namespaced(state.client().clone(), namespace);
    let taken = projects
        .list(&Default::default())
        .await?
        .items
        .into_iter()
        .find(|p| {
            p.name_any() != new.name_any()
                && p.spec.cluster == new.spec.cluster
                && p.spec.namespace == new.spec.namespace
                && kubenest_domain::project::holds_namespace(p)
        });
    match taken {
        Some(other) => Err(ApiError::conflict(
            "namespace_taken",
            format!(
                "project {:?} already uses namespace {:?} on this cluster",
                other.name_any(),
                new.spec.namespace
            ),
        )),
        None => Ok(()),
    }
}
