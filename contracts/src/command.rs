//! Commands: controllers → agent. Each is idempotent on the agent (keyed by the object's id and
//! revision), so a command sent twice is harmless.

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::common::{AddonRef, AppRef, ChartRef, ExportMapping, HelmValues, Id, Name};

/// Create or update a project's namespace.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ProjectEnsure {
    pub project_id: Id,
    pub namespace: Name,
    /// Extra labels for the namespace (kubenest's own labels are always set).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    #[schemars(extend("maxProperties" = 64))]
    pub labels: BTreeMap<String, String>,
    /// A registry pull secret to keep in the namespace. Its values are set with `secret.set`;
    /// this only names it, so the namespace's service account can use it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub registry_secret: Option<Name>,
    /// The Pod Security Admission level the namespace enforces (`baseline` when absent).
    #[serde(default)]
    pub pod_security: PodSecurity,
    /// The namespace's quota, default limits and network isolation (absent: isolated, no
    /// quota, no defaults).
    #[serde(default)]
    pub fences: crate::Fences,
}

/// The Pod Security Standard a project namespace enforces. There is no `privileged`: a
/// project's pods never get the node's namespaces, host paths or added capabilities.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum PodSecurity {
    /// No known privilege escalation: no privileged or host-namespace pods, no hostPath.
    #[default]
    Baseline,
    /// Baseline, and pods run as non-root with every capability dropped.
    Restricted,
}

impl PodSecurity {
    /// The level as Pod Security Admission labels spell it.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Baseline => "baseline",
            Self::Restricted => "restricted",
        }
    }
}

/// Delete a project's namespace and everything in it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ProjectDelete {
    pub project_id: Id,
    pub namespace: Name,
}

/// The complete desired state of one App at one revision (the cluster-side StackDeploy).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct AppDeploy {
    pub app: AppRef,
    /// Hash of the App spec; the agent reports it back as observed once applied.
    #[schemars(length(min = 1, max = 64), regex(pattern = r"^[a-z0-9]+$"))]
    pub revision: String,
    /// How long components may take to become ready before the App is Failed.
    #[schemars(range(min = 10, max = 86400))]
    pub progress_deadline_seconds: u32,
    /// Paused Apps keep their spec with every workload scaled to zero.
    #[serde(default)]
    pub paused: bool,
    #[schemars(length(min = 1, max = 64))]
    pub components: Vec<Component>,
    /// How the revision is judged once it runs ([`crate::Verification`]); none: it is not.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub verification: Option<crate::Verification>,
}

/// One component of an App.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "kind", rename_all = "snake_case")]
// A workload is the larger variant; a command holds a few of them, built once per revision, so
// boxing would only make every match on them noisier.
#[allow(clippy::large_enum_variant)]
pub enum Component {
    Workload(Workload),
    Addon(Addon),
}

impl Component {
    /// The component's name, unique within its App.
    pub fn name(&self) -> &Name {
        match self {
            Self::Workload(w) => &w.name,
            Self::Addon(a) => &a.name,
        }
    }
}

/// A container workload: Deployment, Service and optional Ingress.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Workload {
    pub name: Name,
    pub source: WorkloadSource,
    #[schemars(range(max = 1000))]
    pub replicas: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 65535))]
    pub port: Option<u16>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 256))]
    pub env: Vec<EnvVar>,
    /// The component's Secret (values set with `secret.set`), mounted with `envFrom`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub secret: Option<Name>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ingress: Option<Ingress>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resources: Option<Resources>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub health_check: Option<HealthCheck>,
}

/// Where a workload's container comes from.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum WorkloadSource {
    /// A prebuilt image.
    Image {
        #[schemars(length(min = 1, max = 1024), regex(pattern = r"^[^\s]+$"))]
        image: String,
    },
    /// Built on the cluster from Git (see `build.request`).
    Git(GitSource),
    /// A Helm chart rendered by the agent.
    Helm {
        chart: ChartRef,
        #[serde(default)]
        values: HelmValues,
    },
}

/// A Git source and how to build it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct GitSource {
    #[schemars(
        length(min = 1, max = 2048),
        regex(pattern = crate::patterns::GIT_REPOSITORY)
    )]
    pub repository: String,
    /// Branch, tag or commit.
    #[schemars(length(min = 1, max = 255), regex(pattern = crate::patterns::GIT_REF))]
    pub git_ref: String,
    /// The build's folder inside the repository (its root when absent).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 1024), regex(pattern = crate::patterns::CONTEXT_DIR))]
    pub context_dir: Option<String>,
    pub mode: BuildMode,
}

/// How an image is built from source.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum BuildMode {
    /// Kaniko with the repository's Dockerfile.
    Dockerfile,
    /// Cloud Native Buildpacks.
    Buildpack,
}

/// One environment variable: a literal, an addon export or a key of the component's Secret.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct EnvVar {
    #[schemars(
        length(min = 1, max = 253),
        regex(pattern = r"^[A-Za-z_][A-Za-z0-9_.-]*$")
    )]
    pub name: String,
    #[serde(flatten)]
    pub from: EnvFrom,
}

/// Where an environment variable's value comes from. Only literals travel in the command;
/// exports and secrets become `secretKeyRef`s on the cluster.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum EnvFrom {
    Value(#[schemars(length(max = 32768))] String),
    ExportRef(ExportRef),
}

/// A key published by an addon component of the same App.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct ExportRef {
    /// The addon component's name.
    pub component: Name,
    /// The export's name, e.g. `dsn`, `host`, `password`.
    #[schemars(length(min = 1, max = 63), regex(pattern = r"^[a-z][a-z0-9_]*$"))]
    pub export: String,
}

/// Route outside traffic to the workload's port.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct Ingress {
    #[schemars(
        length(min = 1, max = 253),
        regex(pattern = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
    )]
    pub host: String,
    #[schemars(length(min = 1, max = 1024), regex(pattern = r"^/"))]
    pub path: String,
    #[serde(default)]
    pub tls: bool,
    /// The user's `kubernetes.io/tls` Secret in the namespace; without it (and with `tls`) the
    /// agent issues a certificate for `host` from the project's [`crate::INGRESS_CA_SECRET`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tls_secret: Option<Name>,
}

/// Container resources as Kubernetes quantities.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize, JsonSchema)]
pub struct Resources {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(regex(pattern = crate::patterns::CPU_QUANTITY), length(max = 32))]
    pub cpu_request: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(regex(pattern = crate::patterns::CPU_QUANTITY), length(max = 32))]
    pub cpu_limit: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(regex(pattern = crate::patterns::MEMORY_QUANTITY), length(max = 32))]
    pub memory_request: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(regex(pattern = crate::patterns::MEMORY_QUANTITY), length(max = 32))]
    pub memory_limit: Option<String>,
}

/// An HTTP readiness check.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct HealthCheck {
    #[schemars(length(min = 1, max = 1024), regex(pattern = r"^/"))]
    pub path: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 65535))]
    pub port: Option<u16>,
    #[serde(default)]
    #[schemars(range(max = 3600))]
    pub initial_delay_seconds: u32,
    #[serde(default = "default_period")]
    #[schemars(range(min = 1, max = 3600))]
    pub period_seconds: u32,
}

fn default_period() -> u32 {
    10
}

/// A backing service from the addon catalog, as a component of an App.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Addon {
    pub name: Name,
    /// The AddonDefinition it comes from, e.g. `postgres`.
    pub definition: Name,
    pub chart: ChartRef,
    #[serde(default)]
    pub values: HelmValues,
    #[serde(default)]
    #[schemars(extend("maxProperties" = 32))]
    pub exports: ExportMapping,
}

/// Remove an App and everything its StackDeploy owns.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct AppDelete {
    pub app: AppRef,
}

/// Restart an App's workloads at the same revision (a rollout restart).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct AppRedeploy {
    pub app: AppRef,
    #[schemars(length(min = 1, max = 64), regex(pattern = r"^[a-z0-9]+$"))]
    pub revision: String,
    /// Distinguishes one redeploy of a revision from the next (the deployment record's id).
    pub restart_id: Id,
}

/// Scale an App's workloads to zero, keeping the spec.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct AppPause {
    pub app: AppRef,
    #[schemars(length(min = 1, max = 64), regex(pattern = r"^[a-z0-9]+$"))]
    pub revision: String,
}

/// Restore a paused App's workloads to their previous shape.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct AppResume {
    pub app: AppRef,
    #[schemars(length(min = 1, max = 64), regex(pattern = r"^[a-z0-9]+$"))]
    pub revision: String,
}

/// Install or upgrade a standalone addon at one revision of its history.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct AddonApply {
    pub addon: AddonRef,
    #[schemars(range(min = 1))]
    pub revision: u32,
    pub definition: Name,
    pub chart: ChartRef,
    #[serde(default)]
    pub values: HelmValues,
    #[serde(default)]
    #[schemars(extend("maxProperties" = 32))]
    pub exports: ExportMapping,
}

/// Roll a standalone addon back: `revision` is the new revision, restoring `to_revision`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct AddonRollback {
    pub addon: AddonRef,
    #[schemars(range(min = 1))]
    pub revision: u32,
    #[schemars(range(min = 1))]
    pub to_revision: u32,
}

/// Uninstall a standalone addon.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct AddonDelete {
    pub addon: AddonRef,
}

/// Which Secret on the cluster a `secret.*` command changes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct SecretTarget {
    pub namespace: Name,
    /// The Secret's name (a component's Secret or a project's registry secret).
    pub secret: Name,
    /// The App the Secret belongs to, if any, for ownership and cleanup.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub app_id: Option<Id>,
    /// Credentials (a project's registry Secret, a Git workload's repository Secret): only the
    /// builds and pulls kubenest makes may use them, never a pod a chart renders.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub credentials: bool,
}

/// Set keys of a Secret on the cluster. The only message that carries secret values: they are
/// never stored or logged by the control plane, and this command is never queued.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct SecretSet {
    pub target: SecretTarget,
    /// The Secret's type; a registry credential's one key is `.dockerconfigjson`.
    #[serde(default, skip_serializing_if = "SecretKind::is_opaque")]
    pub kind: SecretKind,
    #[schemars(extend("minProperties" = 1, "maxProperties" = 128))]
    pub values: BTreeMap<String, SecretValue>,
}

/// The type of a Secret `secret.set` writes.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum SecretKind {
    /// `Opaque`: any keys.
    #[default]
    Opaque,
    /// `kubernetes.io/dockerconfigjson`: registry credentials that pods pull with.
    DockerConfigJson,
    /// `kubernetes.io/tls`: `tls.crt` and `tls.key` (a project's ingress CA).
    Tls,
}

impl SecretKind {
    /// The default, left out of a message.
    pub fn is_opaque(&self) -> bool {
        *self == SecretKind::Opaque
    }

    /// The Kubernetes Secret type.
    pub fn secret_type(self) -> &'static str {
        match self {
            SecretKind::Opaque => "Opaque",
            SecretKind::DockerConfigJson => "kubernetes.io/dockerconfigjson",
            SecretKind::Tls => "kubernetes.io/tls",
        }
    }
}

/// A secret value. Its `Debug` shows only its length.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(transparent)]
pub struct SecretValue(#[schemars(length(max = 262144))] pub String);

impl std::fmt::Debug for SecretValue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "SecretValue(<{} bytes>)", self.0.len())
    }
}

/// Delete keys of a Secret, or the whole Secret when `keys` is empty.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct SecretDelete {
    pub target: SecretTarget,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 128))]
    pub keys: Vec<String>,
}

/// Build an image from Git on the cluster.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct BuildRequest {
    pub build_id: Id,
    pub app: AppRef,
    pub component: Name,
    pub source: GitSource,
    /// Where to push the result.
    #[schemars(length(min = 1, max = 1024), regex(pattern = r"^[^\s]+$"))]
    pub image: String,
}

/// Stream a component's logs as `log.lines` until unsubscribed (fail-closed: never queued).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct LogsSubscribe {
    pub subscription_id: Id,
    pub app: AppRef,
    pub component: Name,
    #[serde(default)]
    pub follow: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 10000))]
    pub tail_lines: Option<u32>,
    /// Only lines newer than this many seconds (at most 30 days).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 2592000))]
    pub since_seconds: Option<u32>,
    /// The previous (terminated) instance of each container.
    #[serde(default)]
    pub previous: bool,
}

/// Stop a log stream.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct LogsUnsubscribe {
    pub subscription_id: Id,
}

/// Ask the agent for a fresh `snapshot`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct ResyncRequest {
    #[serde(default)]
    #[schemars(length(max = 1024))]
    pub reason: String,
}
