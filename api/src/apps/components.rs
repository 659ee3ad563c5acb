//! One App component as the API spells it (snake_case, unknown fields refused):
//! `{"name", "type": "workload", "workload_spec": {...}}` or `{"type": "addon", "addon_spec"}`.

use kubenest_contracts::patterns;

use crate::DNS_LABEL_PATTERN;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// One component of an App.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ComponentBody {
    /// DNS label, unique in the App.
    #[schemars(length(min = 1, max = 63), regex(pattern = DNS_LABEL_PATTERN))]
    pub name: String,
    #[serde(rename = "type")]
    pub kind: ComponentKind,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workload_spec: Option<WorkloadBody>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub addon_spec: Option<AddonBody>,
}

/// What a component is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum ComponentKind {
    Workload,
    Addon,
}

/// A container workload: exactly one of `image`, `git` or `helm`.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct WorkloadBody {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 1024))]
    pub image: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub git: Option<GitBody>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub helm: Option<HelmBody>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(max = 1000))]
    pub replicas: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 65535))]
    pub port: Option<u16>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 256))]
    pub env: Vec<EnvBody>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ingress: Option<IngressBody>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resources: Option<ResourcesBody>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub health_check: Option<HealthCheckBody>,
}

/// Build the image on the cluster from Git.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct GitBody {
    /// `https://host/path` (no user or password: set them with the git-credentials route),
    /// `ssh://[user@]host/path` or `user@host:path`.
    #[schemars(length(min = 1, max = 2048), regex(pattern = patterns::GIT_REPOSITORY))]
    pub repository: String,
    /// A branch, tag or commit.
    #[serde(rename = "ref")]
    #[schemars(length(min = 1, max = 255), regex(pattern = patterns::GIT_REF))]
    pub git_ref: String,
    /// The build's folder inside the repository (its root when absent).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 1024), regex(pattern = patterns::CONTEXT_DIR))]
    pub context_dir: Option<String>,
    /// `dockerfile` or `buildpack`.
    pub mode: String,
}

/// A pinned chart.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ChartBody {
    /// An `https://` chart repository or `oci://` registry path (no user or password), or a
    /// catalog path like `charts/addons`.
    #[schemars(length(min = 1, max = 1024), regex(pattern = patterns::CHART_REPOSITORY))]
    pub repository: String,
    #[schemars(length(min = 1, max = 253), regex(pattern = patterns::CHART_NAME))]
    pub name: String,
    /// An exact version.
    #[schemars(length(min = 1, max = 128), regex(pattern = patterns::CHART_VERSION))]
    pub version: String,
}

/// Render a Helm chart as the workload.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct HelmBody {
    pub chart: ChartBody,
    #[serde(default)]
    pub values: Map<String, Value>,
}

/// An environment variable: exactly one of `value` or `export_ref`.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct EnvBody {
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub value: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub export_ref: Option<ExportRefBody>,
}

/// An export of an addon component of the same App, resolved on the cluster.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ExportRefBody {
    pub component: String,
    pub export: String,
}

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct IngressBody {
    pub host: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
    /// Serve HTTPS, with the certificate `tls_secret` names or else one kubenest issues for
    /// `host` from the project's ingress CA (`PUT /api/v1/projects/{id}/ingress-ca`).
    #[serde(default)]
    pub tls: bool,
    /// A `kubernetes.io/tls` Secret the user made in the project's namespace.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tls_secret: Option<String>,
}

/// Kubernetes quantities.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ResourcesBody {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu_request: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu_limit: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory_request: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory_limit: Option<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct HealthCheckBody {
    pub path: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 65535))]
    pub port: Option<u16>,
    // The hub's own bounds (`wire::HealthCheck`), documented here too.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(max = 3600))]
    pub initial_delay_seconds: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 3600))]
    pub period_seconds: Option<u32>,
}

/// An addon from the catalog as a component.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct AddonBody {
    /// The AddonDefinition, e.g. `postgres`.
    pub definition: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
    #[serde(default)]
    pub values: Map<String, Value>,
}
