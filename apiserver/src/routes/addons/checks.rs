//! What a standalone addon must satisfy before it is stored, for every door: its definition is
//! in the catalog, its chart version is exact, its values fit the definition's schema.

use kube::api::Api;
use kubenest_crds::addon::AddonDefinition;
use serde_json::{Map, Value};

use crate::error::{ApiError, ApiResult};
use crate::k8s;
use crate::state::AppState;

pub(crate) async fn definition_named(
    state: &AppState,
    name: &str,
) -> ApiResult<Option<AddonDefinition>> {
    if !k8s::is_name(name) {
        return Ok(None);
    }
    let api: Api<AddonDefinition> =
        Api::namespaced(state.client().clone(), &state.settings().system_namespace);
    Ok(api.get_opt(name).await?)
}

/// Checks values against the definition's JSON Schema, naming the first bad field.
pub(super) fn check_values(
    definition: &AddonDefinition,
    values: &Map<String, Value>,
) -> ApiResult<()> {
    match values_refusal(definition, values)? {
        Some((field, reason)) => Err(ApiError::invalid(field, reason)),
        None => Ok(()),
    }
}

/// The first value the definition's JSON Schema refuses: its field (`values.auth.database`)
/// and why.
pub(crate) fn values_refusal(
    definition: &AddonDefinition,
    values: &Map<String, Value>,
) -> ApiResult<Option<(String, String)>> {
    kubenest_domain::app::values_refusal(definition.spec.values_schema.as_ref(), values)
        .map_err(ApiError::internal)
}

pub(super) fn check_version(version: Option<&String>) -> ApiResult<()> {
    match version_refusal(version) {
        Some(reason) => Err(ApiError::invalid("version", reason)),
        None => Ok(()),
    }
}

/// Why a chart version is refused (only exact versions are taken).
pub(crate) fn version_refusal(version: Option<&String>) -> Option<&'static str> {
    let version = version?;
    let core = version.trim_start_matches('v');
    let core = core.split(['-', '+']).next().unwrap_or_default();
    let exact = core.split('.').count() == 3
        && core
            .split('.')
            .all(|p| !p.is_empty() && p.chars().all(|c| c.is_ascii_digit()));
    (!exact).then_some("an exact chart version such as 16.2.3; ranges are refused")
}
