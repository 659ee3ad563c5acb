//! StackTemplate: a reusable App shape with parameter slots.

use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::common::{Condition, preserve_unknown_items};

/// A template: components with `${parameter}` slots, instantiated into an App.
#[derive(CustomResource, Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "kubenest.io",
    version = "v1alpha1",
    kind = "StackTemplate",
    plural = "stacktemplates",
    namespaced
)]
#[kube(
    shortname = "ktpl",
    category = "kubenest",
    status = "StackTemplateStatus"
)]
#[kube(printcolumn(name = "Scope", type_ = "string", json_path = ".spec.scope"))]
#[kube(printcolumn(
    name = "Age",
    type_ = "date",
    json_path = ".metadata.creationTimestamp"
))]
#[serde(rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-validations" = [
    {"rule": "self.scope != 'project' || has(self.project)", "message": "project scope needs project"},
    {"rule": "self.scope != 'cluster' || has(self.cluster)", "message": "cluster scope needs cluster"},
    {"rule": "self.parameters.all(p, self.parameters.exists_one(q, q.name == p.name))",
     "message": "parameter names must be unique"}
]))]
pub struct StackTemplateSpec {
    #[serde(default)]
    #[schemars(length(max = 4096))]
    pub description: String,
    pub scope: Scope,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub project: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cluster: Option<String>,
    #[serde(default)]
    #[schemars(length(max = 64))]
    pub parameters: Vec<Parameter>,
    /// App components, in the App's shape, where any string may hold `${name}` slots (a string
    /// that is exactly one slot takes the slot's typed value).
    #[schemars(length(min = 1, max = 64), transform = preserve_unknown_items)]
    pub components: Vec<serde_json::Map<String, serde_json::Value>>,
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
    #[schemars(length(min = 1, max = 63), regex(pattern = r"^[a-z][a-z0-9_]*$"))]
    pub name: String,
    #[serde(rename = "type")]
    pub type_: ParameterType,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub default: Option<String>,
    #[serde(default)]
    pub required: bool,
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

/// Conditions of a template.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct StackTemplateStatus {
    #[serde(default)]
    pub conditions: Vec<Condition>,
}
