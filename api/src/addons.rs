//! The addon catalog and standalone addon instances.

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// A catalog entry.
#[derive(Debug, Serialize, Deserialize, JsonSchema)]
pub struct DefinitionResponse {
    pub name: String,
    pub display_name: String,
    pub chart_repository: String,
    pub chart_name: String,
    /// The pinned version.
    pub chart_version: String,
    /// Export name → what it holds (`host`, `port`, `dsn`, ...).
    pub exports: BTreeMap<String, String>,
    /// JSON Schema of the values you may set.
    pub values_schema: Option<Value>,
    pub default_values: Value,
}

/// `{name}` in a path.
#[derive(Debug, Deserialize, Serialize, JsonSchema)]
pub struct NamePath {
    pub name: String,
}

/// One revision of a standalone addon.
#[derive(Debug, Serialize, Deserialize, JsonSchema)]
pub struct RevisionView {
    pub revision: i32,
    /// `install`, `upgrade`, `values` or `rollback`.
    pub operation: String,
    pub chart_version: Option<String>,
    pub values: Value,
    pub rollback_to: Option<i32>,
    pub actor: String,
    pub result: String,
    pub message: String,
    pub created_at: String,
}

/// A standalone addon.
#[derive(Debug, Serialize, Deserialize, JsonSchema)]
pub struct InstanceResponse {
    pub id: String,
    pub name: String,
    pub org: String,
    pub project: String,
    pub project_id: Option<String>,
    pub definition: String,
    pub version: Option<String>,
    pub values: Value,
    pub phase: String,
    pub message: String,
    pub revision: Option<u32>,
    pub observed_revision: Option<u32>,
    /// The Secret on the cluster holding the addon's exports (never its values).
    pub export_secret: Option<String>,
    pub git_commit: Option<String>,
    /// Why the agent could not write the addon's folder to the cluster's GitOps repository
    /// (the addon runs regardless; an alert is open meanwhile).
    pub gitops_error: Option<String>,
    /// Fields of the addon's objects another manager changed, as the agent last reported them
    /// (it applies them back, then reports the addon in sync).
    pub sync: crate::apps::SyncView,
    pub created_at: Option<String>,
    /// Seconds an install or change may take to become ready.
    pub progress_deadline_seconds: u32,
    /// Newest first; only on single reads.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub revisions: Option<Vec<RevisionView>>,
}

#[derive(Debug, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct NewInstanceBody {
    pub project_id: String,
    /// DNS label, unique in the organization.
    #[schemars(length(min = 1, max = 63), regex(pattern = crate::DNS_LABEL_PATTERN))]
    pub name: String,
    /// The AddonDefinition, e.g. `postgres`.
    pub definition: String,
    /// A chart version other than the definition's pinned one.
    #[serde(default)]
    pub version: Option<String>,
    #[serde(default)]
    pub values: Map<String, Value>,
    /// Seconds an install or change may take to become ready before it is `Failed`: 10 to
    /// 86400 (default 600).
    #[serde(default)]
    #[schemars(range(min = 10, max = 86400))]
    pub progress_deadline_seconds: Option<u32>,
}

#[derive(Debug, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct InstanceQuery {
    pub org: Option<String>,
    pub project_id: Option<String>,
}

#[derive(Debug, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PatchInstanceBody {
    /// Upgrade (or downgrade) to this exact chart version.
    #[serde(default)]
    pub version: Option<String>,
    /// The new values (replacing the old).
    #[serde(default)]
    pub values: Option<Map<String, Value>>,
}

#[derive(Debug, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct AddonRollbackBody {
    /// The revision whose chart and values to restore.
    pub revision: i32,
}
