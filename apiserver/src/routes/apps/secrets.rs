//! Component secrets: fail-closed through the hub, values never stored on the control plane.

use std::collections::BTreeMap;

use crate::extract::Query;
use axum::Json;
use axum::extract::{Path, State};
use kube::ResourceExt;
use kubenest_contracts::{
    self as wire, Envelope, SecretDelete, SecretSet, SecretTarget, SecretValue,
};
use kubenest_crds::App;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::super::Scoped;
use super::*;
use crate::authz::{Caller, Need};
use crate::error::{ApiError, ApiResult};
use crate::extract::Body;
use crate::k8s;
use crate::state::AppState;

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
    admit(
        &scoped.object,
        Change::Secret {
            component: &path.component,
        },
    )?;
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
        kind: wire::SecretKind::Opaque,
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
    admit(
        &scoped.object,
        Change::Secret {
            component: &path.component,
        },
    )?;
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
