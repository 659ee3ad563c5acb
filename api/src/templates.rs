//! Stack templates: reusable App shapes with parameter slots.

use std::collections::BTreeMap;

use kubenest_contracts::patterns;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// Where a new template goes.
#[derive(Debug, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(extend("allOf" = [
    {"if": {"properties": {"scope": {"const": "project"}}},
     "then": {"required": ["project_id"], "properties": {"project_id": {"type": "string"}}}},
    {"if": {"properties": {"scope": {"const": "cluster"}}},
     "then": {"required": ["cluster_id"], "properties": {"cluster_id": {"type": "string"}}}}
]))]
pub struct Placement {
    /// DNS label, unique where the template lives.
    #[schemars(length(min = 1, max = 63), regex(pattern = crate::DNS_LABEL_PATTERN))]
    pub name: String,
    /// `project` (needs `project_id`), `cluster` (needs `cluster_id`) or `global` (platform
    /// administrators).
    pub scope: Scope,
    #[serde(default)]
    pub project_id: Option<String>,
    #[serde(default)]
    pub cluster_id: Option<String>,
    #[serde(default)]
    pub description: Option<String>,
}

/// The chart of a template.
#[derive(Debug, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct TemplateChart {
    /// `https://…` (a chart repository) or `oci://…` (a registry path holding the chart); no
    /// credentials (`user:password@`) in it.
    #[schemars(length(min = 1, max = 2048), regex(pattern = patterns::CHART_SOURCE))]
    pub repository: String,
    #[schemars(length(min = 1, max = 253), regex(pattern = patterns::CHART_NAME))]
    pub name: String,
    /// An exact version.
    #[schemars(length(min = 1, max = 128), regex(pattern = patterns::CHART_VERSION))]
    pub version: String,
}

#[derive(Debug, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct FromChartBody {
    #[serde(flatten)]
    pub at: Placement,
    pub chart: TemplateChart,
}

#[derive(Debug, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct NewTemplateBody {
    #[serde(flatten)]
    pub at: Placement,
    #[serde(default)]
    pub parameters: Vec<Parameter>,
    /// Components in the App's shape; any string may hold `${name}` slots.
    pub components: Vec<Value>,
}

#[derive(Debug, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct FromAppBody {
    pub app_id: String,
    #[serde(flatten)]
    pub at: Placement,
}

#[derive(Debug, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct TemplateQuery {
    pub org: Option<String>,
}

#[derive(Debug, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct DeployBody {
    pub project_id: String,
    /// The new App's name.
    pub name: String,
    /// Parameter values (strings, numbers or booleans as the parameter's type says).
    #[serde(default)]
    pub parameters: BTreeMap<String, Value>,
}

#[derive(Debug, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PatchTemplateBody {
    #[serde(default)]
    pub description: Option<String>,
    /// The new parameters (the whole list).
    #[serde(default)]
    pub parameters: Option<Vec<Parameter>>,
    /// The new components (the whole list), in the App's shape with `${name}` slots.
    #[serde(default)]
    pub components: Option<Vec<Value>>,
}

/// A template.
#[derive(Debug, Serialize, Deserialize, JsonSchema)]
pub struct TemplateResponse {
    pub id: String,
    pub name: String,
    /// Absent for global templates.
    pub org: Option<String>,
    /// `project`, `cluster` or `global`.
    pub scope: Scope,
    pub project: Option<String>,
    pub cluster: Option<String>,
    pub description: String,
    pub parameters: Vec<Parameter>,
    /// Components in the App's shape; strings may hold `${name}` slots.
    pub components: Vec<Value>,
    /// Whether the template instantiates into a valid App, and why not.
    pub valid: bool,
    pub message: String,
    pub created_at: Option<String>,
}

/// Where a template can be used.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Scope {
    Project,
    Cluster,
    Global,
}

/// A parameter slot.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Parameter {
    /// The slot's name, as `${name}` in the components.
    #[schemars(length(min = 1, max = 63), regex(pattern = r"^[a-z][a-z0-9_]*$"))]
    pub name: String,
    /// `string`, `integer` or `boolean`.
    #[serde(rename = "type")]
    pub type_: ParameterType,
    /// The value when none is given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub default: Option<String>,
    /// A value must be given (unless there is a default).
    #[serde(default)]
    pub required: bool,
    /// What the parameter is for.
    #[serde(default)]
    #[schemars(length(max = 1024))]
    pub description: String,
}

/// The type a parameter's value must have.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum ParameterType {
    String,
    Integer,
    Boolean,
}
