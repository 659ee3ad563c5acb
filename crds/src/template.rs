//! StackTemplate: a reusable App shape with parameter slots.

use kube::CustomResource;
/// The scopes and slots are the REST API's words too: one definition, in the API types.
pub use kubenest_api::templates::{Parameter, ParameterType, Scope};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::common::{Condition, conditions_by_type, items_by_name, preserve_unknown_items};

/// A template's scope, parameters and components with `${parameter}` slots.
#[derive(CustomResource, Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "kubenest.io",
    version = "v1alpha1",
    kind = "StackTemplate",
    plural = "stacktemplates",
    namespaced,
    doc = "A StackTemplate: a reusable App shape, components with `${parameter}` slots, \
           instantiated into an App. Ready when it instantiates into a valid App."
)]
#[kube(
    shortname = "ktpl",
    category = "kubenest",
    status = "StackTemplateStatus"
)]
#[kube(printcolumn(name = "Scope", type_ = "string", json_path = ".spec.scope"))]
#[kube(printcolumn(
    name = "Ready",
    type_ = "string",
    json_path = r#".status.conditions[?(@.type=="Ready")].status"#,
    description = "The status of the Ready condition"
))]
#[kube(printcolumn(
    name = "Status",
    type_ = "string",
    json_path = r#".status.conditions[?(@.type=="Ready")].message"#,
    description = "The message of the Ready condition"
))]
#[kube(printcolumn(
    name = "Age",
    type_ = "date",
    json_path = ".metadata.creationTimestamp"
))]
#[serde(rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-validations" = [
    {"rule": "self.scope != 'project' || has(self.project)", "message": "project scope needs project"},
    {"rule": "self.scope != 'cluster' || has(self.cluster)", "message": "cluster scope needs cluster"}
]))]
pub struct StackTemplateSpec {
    /// What the template is for.
    #[serde(default)]
    #[schemars(length(max = 4096))]
    pub description: String,
    /// Where it can be used: `project`, `cluster` or `global`.
    pub scope: Scope,
    /// The Project it is for (with `scope: project`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub project: Option<String>,
    /// The Cluster it is for (with `scope: cluster`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cluster: Option<String>,
    /// The parameter slots, keyed by name.
    #[serde(default)]
    #[schemars(length(max = 64), transform = items_by_name)]
    pub parameters: Vec<Parameter>,
    /// App components, in the App's shape, where any string may hold `${name}` slots (a string
    /// that is exactly one slot takes the slot's typed value); keyed by `name`, like an App's.
    #[schemars(length(min = 1, max = 64), transform = named_items)]
    pub components: Vec<serde_json::Map<String, serde_json::Value>>,
}

/// Free-form components keyed by a required `name`: the map list type needs its key in the
/// item schema.
fn named_items(schema: &mut schemars::Schema) {
    preserve_unknown_items(schema);
    if let Some(items) = schema.get_mut("items").and_then(|v| v.as_object_mut()) {
        items.insert("type".into(), "object".into());
        items.insert(
            "properties".into(),
            serde_json::json!({"name": {
                "type": "string",
                "minLength": 1,
                "description": "The component's name (it may be a `${parameter}` slot)."
            }}),
        );
        items.insert("required".into(), serde_json::json!(["name"]));
    }
    items_by_name(schema);
}

/// Conditions of a template.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct StackTemplateStatus {
    /// The generation of the spec the controller last wrote this status for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    /// `Ready`, one condition of each type.
    #[serde(default)]
    #[schemars(transform = conditions_by_type)]
    pub conditions: Vec<Condition>,
}
