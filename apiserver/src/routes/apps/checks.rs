//! What an App must satisfy before it is stored: the domain's rules, the addon definitions it
//! names, the deadline bounds, and the rule for an App that does not converge (only the ways
//! out are allowed).

use std::collections::BTreeMap;

use kube::ResourceExt;
use kube::api::Api;
use kubenest_crds::App;
use kubenest_crds::addon::AddonDefinition;
use kubenest_crds::app::{AppSpec, Component};
use kubenest_crds::project::Project;
use kubenest_domain::app::ways_out::{self, Change, StuckReason};
use kubenest_domain::app::{
    AppIdentity, BuildError, ResolvedAddon, build_deploy, check_component_names, resolved_addon,
};
use uuid::Uuid;

use super::super::api_field;
use crate::error::{ApiError, ApiResult};
use crate::k8s;
use crate::model::{ComponentBody, components_to_crd};
use crate::state::AppState;

/// Refuses a change that piles onto an App that does not converge ([`ways_out::admit`]): the
/// 409 says why and lists the requests that remain allowed.
pub(crate) fn admit(app: &App, change: Change<'_>) -> ApiResult<()> {
    let name = app.name_any();
    let found = ways_out::stuck(&name, &app.spec.components, app.status.as_ref());
    let Err(refused) = ways_out::admit(found.as_ref(), app.spec.paused, change) else {
        return Ok(());
    };
    let ready = app
        .status
        .as_ref()
        .and_then(|s| s.conditions.iter().find(|c| c.type_ == "Ready"))
        .map(|c| c.message.clone())
        .unwrap_or_default();
    let details: Vec<String> = app
        .status
        .as_ref()
        .and_then(|s| s.sync.as_ref())
        .map(|s| s.drift_details.as_slice())
        .unwrap_or_default()
        .iter()
        .map(|d| {
            format!(
                "{} {}: desired {}, observed {}",
                d.resource, d.field, d.desired, d.observed
            )
        })
        .collect();
    let mut why = ready;
    if !details.is_empty() {
        if !why.is_empty() {
            why.push_str("; ");
        }
        why.push_str(&details.join("; "));
    }
    let (code, state) = match refused.stuck.reason {
        StuckReason::BlockedSync => (
            "blocked_sync",
            "in blocked_sync: its workloads are not converging",
        ),
        StuckReason::Failed => ("app_failed", "Failed: its revision did not become ready"),
    };
    let base = format!("/api/v1/apps/{}", k8s::uid(app));
    let message = format!(
        "the app is {state} ({why}); this change would pile onto it without touching what \
         fails ({}). The ways out: roll back to a recorded deployment, change a failing \
         component, pause, or delete",
        refused.stuck.failing.join(", ")
    );
    let ways = super::super::ways_out::requests(&base, refused.ways_out);
    Err(ApiError::stuck(code, message, ways))
}

/// Checks components the way the controller will build them: definitions exist, exports
/// are published by an addon of the App, exactly one source per workload, and an ingress
/// whose certificate the project's ingress CA issues has one to issue it.
pub(super) async fn check_buildable(
    state: &AppState,
    namespace: &str,
    spec: &AppSpec,
) -> ApiResult<()> {
    buildable(state, namespace, spec)
        .await?
        .map_err(|e| ApiError::invalid(api_field(&e.field), e.reason))
}

/// A change that would take the App's project past its quota, or its cluster or organization
/// past a budget, is refused: 422 `quota_exceeded` / `budget_exceeded` naming the field that
/// asks for it, the limit and the use ([`super::super::fences::refusal`]).
pub(crate) async fn check_fences(
    state: &AppState,
    namespace: &str,
    name: &str,
    spec: &AppSpec,
) -> ApiResult<()> {
    match super::super::fences::refusal(state, namespace, &spec.project, name, spec).await? {
        Some(refused) => Err(ApiError::exceeded(
            refused.code,
            api_field(&refused.field),
            refused.reason,
        )),
        None => Ok(()),
    }
}

/// [`check_buildable`] with the refusal in the App's own terms (`spec.components[0]...`), for
/// every door.
pub(crate) async fn buildable(
    state: &AppState,
    namespace: &str,
    spec: &AppSpec,
) -> ApiResult<Result<(), BuildError>> {
    let mut addons: BTreeMap<String, ResolvedAddon> = BTreeMap::new();
    for component in &spec.components {
        let Some(addon) = &component.addon else {
            continue;
        };
        // A name no object can have is no definition (and no request): `build_deploy`
        // refuses it as unknown, naming the field.
        if !kubenest_domain::names::is_dns_subdomain(&addon.definition) {
            continue;
        }
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
        default_verification: None,
    };
    if let Err(error) = build_deploy(&identity, spec, &addons) {
        return Ok(Err(error));
    }
    Ok(ingress_ca_refusal(state, namespace, spec)
        .await?
        .map_or(Ok(()), Err))
}

/// An ingress with `tls` and no `tls_secret` gets its certificate from the project's ingress
/// CA, which the agent could not issue while the project has none: refused then, at every
/// door, naming the first such ingress's `tls`.
async fn ingress_ca_refusal(
    state: &AppState,
    namespace: &str,
    spec: &AppSpec,
) -> ApiResult<Option<BuildError>> {
    let Some(i) = spec.components.iter().position(|c| {
        c.workload
            .as_ref()
            .and_then(|w| w.ingress.as_ref())
            .is_some_and(|ingress| ingress.tls && ingress.tls_secret.is_none())
    }) else {
        return Ok(None);
    };
    // A project that is not there is refused by name elsewhere (admission, REST's lookup).
    if !kubenest_domain::names::is_dns_subdomain(&spec.project) {
        return Ok(None);
    }
    let api: Api<Project> = Api::namespaced(state.client().clone(), namespace);
    let Some(project) = api.get_opt(&spec.project).await? else {
        return Ok(None);
    };
    if project.spec.ingress_ca {
        return Ok(None);
    }
    let (name, id) = (project.name_any(), k8s::uid(&project));
    Ok(Some(BuildError {
        field: format!("spec.components[{i}].workload.ingress.tls"),
        reason: format!(
            "project {name} has no ingress CA to issue this ingress's certificate: a project \
             admin sets one with PUT /api/v1/projects/{id}/ingress-ca (kubenest projects \
             ingress-ca set {name} --cert ca.crt --key ca.key), or name a kubernetes.io/tls \
             Secret of your own in tls_secret (tlsSecret in the App resource)"
        ),
    }))
}

pub(crate) fn check_deadline(deadline: Option<u32>) -> ApiResult<u32> {
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
pub(super) fn check_components(components: &[ComponentBody]) -> ApiResult<Vec<Component>> {
    let names: Vec<&str> = components.iter().map(|c| c.name.as_str()).collect();
    check_component_names(&names).map_err(|e| ApiError::invalid(api_field(&e.field), e.reason))?;
    components_to_crd(components)
}
