//! Types shared by commands and status events: identifiers, names, references, conditions.

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// An identifier of a cluster, organization, project, app or addon: a lowercase DNS label, which
/// UUIDs and Kubernetes object names both are.
#[derive(
    Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize, JsonSchema,
)]
#[serde(transparent)]
pub struct Id(
    #[schemars(
        length(min = 1, max = 63),
        regex(pattern = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
    )]
    pub String,
);

impl Id {
    /// Wraps a string; validity is checked where frames are encoded and decoded.
    pub fn new(value: impl Into<String>) -> Self {
        Self(value.into())
    }

    /// The identifier as text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Display for Id {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl From<&str> for Id {
    fn from(value: &str) -> Self {
        Self(value.to_owned())
    }
}

/// A Kubernetes object name usable as a DNS label (namespaces, components, Secrets).
#[derive(
    Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize, JsonSchema,
)]
#[serde(transparent)]
pub struct Name(
    #[schemars(
        length(min = 1, max = 63),
        regex(pattern = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
    )]
    pub String,
);

impl Name {
    /// Wraps a string; validity is checked where frames are encoded and decoded.
    pub fn new(value: impl Into<String>) -> Self {
        Self(value.into())
    }

    /// The name as text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl From<&str> for Name {
    fn from(value: &str) -> Self {
        Self(value.to_owned())
    }
}

/// Which App a command or event is about, and where it lives on the cluster.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct AppRef {
    /// The App's uid on the management cluster; stable across renames and rollbacks.
    pub app_id: Id,
    /// The App's name, used to name its objects on the cluster.
    pub name: Name,
    pub project_id: Id,
    /// The project's namespace on the cluster; every object of the App lives in it.
    pub namespace: Name,
}

/// Which standalone addon (AddonInstance) a command or event is about.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct AddonRef {
    pub addon_id: Id,
    pub name: Name,
    pub project_id: Id,
    pub namespace: Name,
}

/// A pinned Helm chart.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct ChartRef {
    /// Chart repository URL (`https://…`, `oci://…`) or a path in the agent's chart catalog.
    #[schemars(
        length(min = 1, max = 1024),
        regex(pattern = crate::patterns::CHART_REPOSITORY)
    )]
    pub repository: String,
    #[schemars(length(min = 1, max = 253), regex(pattern = crate::patterns::CHART_NAME))]
    pub name: String,
    /// An exact version: kubenest pins charts, it never resolves ranges.
    #[schemars(length(min = 1, max = 128), regex(pattern = crate::patterns::CHART_VERSION))]
    pub version: String,
}

/// Values passed to a Helm chart: a JSON object, bounded by the frame limits.
pub type HelmValues = serde_json::Map<String, serde_json::Value>;

/// Export keys an addon publishes, mapped to how the agent derives each value on the cluster
/// (e.g. `host` → `{release}-postgresql.{namespace}.svc`). Values never cross the hub.
pub type ExportMapping = BTreeMap<String, String>;

/// `True`, `False` or `Unknown`, as in Kubernetes conditions.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum ConditionStatus {
    True,
    False,
    Unknown,
}

/// A Kubernetes-style condition.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct Condition {
    #[serde(rename = "type")]
    #[schemars(length(min = 1, max = 128))]
    pub type_: String,
    pub status: ConditionStatus,
    /// A CamelCase reason, e.g. `ProgressDeadlineExceeded`.
    #[schemars(length(max = 128), regex(pattern = r"^([A-Za-z][A-Za-z0-9]*)?$"))]
    #[serde(default)]
    pub reason: String,
    #[schemars(length(max = 4096))]
    #[serde(default)]
    pub message: String,
    pub last_transition_time: DateTime<Utc>,
}

/// A Kubernetes object name from parts joined by `-`: kept when it fits a DNS label (63), else
/// cut to 54 characters plus 8 hex digits of its SHA-256, so long names stay unique and valid.
pub fn object_name(parts: &[&str]) -> String {
    use sha2::{Digest, Sha256};
    let joined = parts.join("-");
    if joined.len() <= 63 {
        return joined;
    }
    let hash: String = Sha256::digest(joined.as_bytes())
        .iter()
        .take(4)
        .map(|b| format!("{b:02x}"))
        .collect();
    let head = joined[..54].trim_end_matches('-');
    format!("{head}-{hash}")
}

/// The Secret on the cluster that holds a Git workload's repository credentials (set through
/// the API with `secret.set`: `username` and `password` for https, or `ssh-privatekey` and
/// `known_hosts` for ssh), mounted only into its build's pod, never into the workload.
pub fn git_secret(app: &str, component: &str) -> Name {
    Name::new(object_name(&[app, component, "git"]))
}

/// The `kubernetes.io/dockerconfigjson` Secret of a project's registry credentials in its
/// namespace: the namespace's pods pull with it and its builds push with it.
pub const REGISTRY_SECRET: &str = "kubenest-registry";

/// The Secret (`kubernetes.io/tls`) in a project's namespace holding the CA that signs the
/// certificates of its ingresses (`tls` without a `tls_secret`), set through the API.
pub const INGRESS_CA_SECRET: &str = "kubenest-ingress-ca";

/// The one key of a `kubernetes.io/dockerconfigjson` Secret (the registry credentials).
pub const DOCKER_CONFIG_JSON_KEY: &str = ".dockerconfigjson";

/// The Secret on the cluster that holds a workload component's own values (set through the
/// API with `secret.set`, mounted into its containers with `envFrom`).
pub fn component_secret(app: &str, component: &str) -> Name {
    Name::new(object_name(&[app, component, "env"]))
}
