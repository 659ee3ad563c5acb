//! An AddonDefinition as the build of an App needs it, and the check of values against it.

use std::collections::BTreeMap;

use kubenest_contracts as wire;
use kubenest_crds::addon::AddonDefinition;
use serde_json::{Map, Value};

/// An AddonDefinition as the build of an App needs it.
#[derive(Debug, Clone, PartialEq)]
pub struct ResolvedAddon {
    /// The chart the definition installs.
    pub chart: wire::ChartRef,
    /// What an installed addon publishes, by name.
    pub exports: BTreeMap<String, String>,
    /// Values the App's own values are merged over.
    pub default_values: Map<String, Value>,
    /// What the App's own values must satisfy (the definition's `valuesSchema`).
    pub values_schema: Option<Map<String, Value>>,
}

/// The chart, exports and default values of `definition`, in the wire's shape.
pub fn resolved_addon(definition: &AddonDefinition) -> ResolvedAddon {
    let chart = &definition.spec.chart;
    ResolvedAddon {
        chart: wire::ChartRef {
            repository: chart.repository.clone(),
            name: chart.name.clone(),
            version: chart.version.clone(),
        },
        exports: definition.spec.exports.clone(),
        default_values: definition.spec.default_values.clone(),
        values_schema: definition.spec.values_schema.clone(),
    }
}

/// The first way `values` break a definition's values schema, if they do: (the field, as
/// `values.persistence.size`, and why). The same check for an App's addon component and a
/// standalone addon, on every path.
pub fn values_refusal(
    schema: Option<&Map<String, Value>>,
    values: &Map<String, Value>,
) -> Result<Option<(String, String)>, String> {
    let Some(schema) = schema else {
        return Ok(None);
    };
    let validator = jsonschema::validator_for(&Value::Object(schema.clone()))
        .map_err(|e| format!("the definition's values schema: {e}"))?;
    let instance = Value::Object(values.clone());
    Ok(validator.iter_errors(&instance).next().map(|error| {
        let pointer = error.instance_path().to_string();
        (
            format!("values{}", pointer.replace('/', ".")),
            error.to_string(),
        )
    }))
}
