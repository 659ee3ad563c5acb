//! The addon catalog (AddonDefinition) and standalone addons (AddonInstance).

use std::collections::BTreeMap;

use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::common::{
    Chart, Condition, ProgressClock, Values, conditions_by_type, default_progress_deadline,
    preserve_unknown_fields,
};

/// A catalog entry: a pinned chart, how its exports are derived, and its values' schema.
/// Global definitions live in the system namespace.
#[derive(CustomResource, Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "kubenest.io",
    version = "v1alpha1",
    kind = "AddonDefinition",
    plural = "addondefinitions",
    namespaced,
    doc = "An AddonDefinition: an entry of the addon catalog (a pinned Helm chart, its exports \
           and the schema of its values). Global definitions live in the system namespace."
)]
#[kube(
    shortname = "kaddondef",
    category = "kubenest",
    status = "AddonDefinitionStatus"
)]
#[kube(printcolumn(name = "Chart", type_ = "string", json_path = ".spec.chart.name"))]
#[kube(printcolumn(name = "Version", type_ = "string", json_path = ".spec.chart.version"))]
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
pub struct AddonDefinitionSpec {
    /// The name people see.
    #[schemars(length(min = 1, max = 253))]
    pub display_name: String,
    /// The pinned chart.
    pub chart: Chart,
    /// Export name → how the agent derives it on the cluster (e.g. `dsn`).
    #[serde(default)]
    pub exports: BTreeMap<String, String>,
    /// JSON Schema of the values users may set.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(transform = preserve_unknown_fields)]
    pub values_schema: Option<Values>,
    /// Values given to the chart unless an addon sets them.
    #[serde(default)]
    #[schemars(transform = preserve_unknown_fields)]
    pub default_values: Values,
}

/// Conditions of a definition.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct AddonDefinitionStatus {
    /// The generation of the spec the status was last written for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    /// One condition of each type.
    #[serde(default)]
    #[schemars(transform = conditions_by_type)]
    pub conditions: Vec<Condition>,
}

/// A standalone addon's project, definition, chart version and values.
#[derive(CustomResource, Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "kubenest.io",
    version = "v1alpha1",
    kind = "AddonInstance",
    plural = "addoninstances",
    namespaced,
    doc = "An AddonInstance: a standalone addon from the catalog in a project, with a revision \
           history of its own (each spec change is a revision)."
)]
#[kube(
    shortname = "kaddon",
    category = "kubenest",
    status = "AddonInstanceStatus"
)]
#[kube(printcolumn(name = "Project", type_ = "string", json_path = ".spec.project"))]
#[kube(printcolumn(name = "Definition", type_ = "string", json_path = ".spec.definition"))]
#[kube(printcolumn(name = "Phase", type_ = "string", json_path = ".status.phase"))]
#[kube(printcolumn(name = "Revision", type_ = "integer", json_path = ".status.revision"))]
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
    {"rule": "self.project == oldSelf.project", "message": "project is immutable"},
    {"rule": "self.definition == oldSelf.definition", "message": "definition is immutable"}
]))]
pub struct AddonInstanceSpec {
    /// The Project (in this namespace) the addon is deployed to.
    #[schemars(length(min = 1, max = 253))]
    pub project: String,
    /// The AddonDefinition, e.g. `postgres`.
    #[schemars(length(min = 1, max = 63))]
    pub definition: String,
    /// A chart version other than the definition's pinned one (an upgrade).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
    /// Values given to the chart, over the definition's defaults.
    #[serde(default)]
    #[schemars(transform = preserve_unknown_fields)]
    pub values: Values,
    /// Seconds a revision may take to be installed and ready on the cluster, counted from when
    /// the cluster got it, before the addon is `Failed`.
    #[serde(default = "default_progress_deadline")]
    #[schemars(range(min = 10, max = 86400))]
    pub progress_deadline_seconds: u32,
}

/// What the agent reports of the addon.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct AddonInstanceStatus {
    /// The generation of the spec the controller last wrote this status for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    /// `Pending`, `Installing`, `Ready`, `Failed` or `Deleting`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phase: Option<String>,
    /// The revision being applied.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub revision: Option<u32>,
    /// The revision the agent last reported on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_revision: Option<u32>,
    /// The Secret on the cluster holding the exports.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub export_secret: Option<String>,
    /// The phase the agent last reported for `observedRevision`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cluster_phase: Option<String>,
    /// What the agent said of it.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub message: String,
    /// The GitOps commit holding the observed revision's folder.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub git_commit: Option<String>,
    /// Why the agent could not write the addon's folder to the cluster's GitOps repository
    /// (the addon runs regardless; an alert is open while this is set).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gitops_error: Option<String>,
    /// The generation whose spec `revision` records.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub recorded_generation: Option<i64>,
    /// The last rollback request (`kubenest.io/rollback-to` annotation) that was carried out.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub handled_rollback: Option<String>,
    /// The progress deadline's clock of `revision`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub progress: Option<ProgressClock>,
    /// Drift the agent last reported: fields of the addon's objects another manager changed,
    /// which it applied back (`recoverable`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sync: Option<crate::app::Sync>,
    /// `Ready`, `Progressing`, `Synced` and the rest, one of each type.
    #[serde(default)]
    #[schemars(transform = conditions_by_type)]
    pub conditions: Vec<Condition>,
}
