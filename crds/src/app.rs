//! App: a bundle of workload and addon components deployed together to a project.

use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::common::{Chart, Condition, Values, default_progress_deadline, preserve_unknown_fields};

/// An App. Every change to its spec is a recorded deployment; the status says what the cluster
/// really runs.
#[derive(CustomResource, Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "kubenest.io",
    version = "v1alpha1",
    kind = "App",
    plural = "apps",
    namespaced
)]
#[kube(shortname = "kapp", category = "kubenest", status = "AppStatus")]
// `kubectl get apps --field-selector spec.project=web`, and the API's list of a project's Apps.
#[kube(selectable = ".spec.project")]
#[kube(printcolumn(name = "Project", type_ = "string", json_path = ".spec.project"))]
#[kube(printcolumn(name = "Phase", type_ = "string", json_path = ".status.phase"))]
#[kube(printcolumn(
    name = "Revision",
    type_ = "string",
    json_path = ".status.observedRevision"
))]
#[kube(printcolumn(
    name = "Drift",
    type_ = "string",
    json_path = ".status.sync.driftClass"
))]
#[kube(printcolumn(
    name = "Age",
    type_ = "date",
    json_path = ".metadata.creationTimestamp"
))]
#[serde(rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-validations" = [
    {"rule": "self.project == oldSelf.project", "message": "project is immutable"},
    {"rule": "self.components.all(c, self.components.exists_one(d, d.name == c.name))",
     "message": "component names must be unique"}
]))]
pub struct AppSpec {
    /// The Project (in this namespace) the App is deployed to.
    #[schemars(length(min = 1, max = 253))]
    pub project: String,
    #[schemars(length(min = 1, max = 64))]
    pub components: Vec<Component>,
    /// Seconds components may take to become ready before the App is Failed.
    #[serde(default = "default_progress_deadline")]
    #[schemars(range(min = 10, max = 86400))]
    pub progress_deadline_seconds: u32,
    /// Paused Apps keep their spec with every workload scaled to zero.
    #[serde(default)]
    pub paused: bool,
    /// How each revision is judged once it runs; unset: the organization's default, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub verification: Option<crate::verification::VerificationSpec>,
}

/// One component: exactly one of `workload` or `addon`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-validations" = [
    {"rule": "has(self.workload) != has(self.addon)", "message": "set exactly one of workload or addon"}
]))]
pub struct Component {
    #[schemars(
        length(min = 1, max = 63),
        regex(pattern = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
    )]
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workload: Option<Workload>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub addon: Option<AddonComponent>,
}

/// A container workload: exactly one of `image`, `git` or `helm` says where it comes from.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-validations" = [
    {"rule": "[has(self.image), has(self.git), has(self.helm)].filter(x, x).size() == 1",
     "message": "set exactly one of image, git or helm"}
]))]
pub struct Workload {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 1024), regex(pattern = r"^[^\s]+$"))]
    pub image: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub git: Option<GitSource>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub helm: Option<HelmSource>,
    #[serde(default = "one")]
    #[schemars(range(max = 1000))]
    pub replicas: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 65535))]
    pub port: Option<u16>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 256))]
    pub env: Vec<EnvVar>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ingress: Option<Ingress>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resources: Option<Resources>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub health_check: Option<HealthCheck>,
}

fn one() -> u32 {
    1
}

/// Build the image on the cluster from Git.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct GitSource {
    #[schemars(
        length(min = 1, max = 2048),
        regex(pattern = kubenest_contracts::patterns::GIT_REPOSITORY)
    )]
    pub repository: String,
    #[serde(rename = "ref")]
    #[schemars(
        length(min = 1, max = 255),
        regex(pattern = kubenest_contracts::patterns::GIT_REF)
    )]
    pub git_ref: String,
    /// The build's folder inside the repository (its root when absent).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(
        length(min = 1, max = 1024),
        regex(pattern = kubenest_contracts::patterns::CONTEXT_DIR)
    )]
    pub context_dir: Option<String>,
    pub mode: BuildMode,
}

/// How an image is built.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum BuildMode {
    Dockerfile,
    Buildpack,
}

/// Render a Helm chart as the workload.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct HelmSource {
    pub chart: Chart,
    #[serde(default)]
    #[schemars(transform = preserve_unknown_fields)]
    pub values: Values,
}

/// An environment variable: exactly one of `value` or `exportRef`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-validations" = [
    {"rule": "has(self.value) != has(self.exportRef)", "message": "set exactly one of value or exportRef"}
]))]
pub struct EnvVar {
    #[schemars(
        length(min = 1, max = 253),
        regex(pattern = r"^[A-Za-z_][A-Za-z0-9_.-]*$")
    )]
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 32768))]
    pub value: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub export_ref: Option<ExportRef>,
}

/// An export of an addon component of the same App, resolved on the cluster.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ExportRef {
    #[schemars(length(min = 1, max = 63))]
    pub component: String,
    #[schemars(length(min = 1, max = 63), regex(pattern = r"^[a-z][a-z0-9_]*$"))]
    pub export: String,
}

/// Route outside traffic to the workload.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Ingress {
    #[schemars(length(min = 1, max = 253))]
    pub host: String,
    #[serde(default = "root")]
    #[schemars(regex(pattern = r"^/"))]
    pub path: String,
    /// Serve HTTPS. The certificate is the Secret `tlsSecret` names, or else one kubenest
    /// issues for `host` from the project's ingress CA.
    #[serde(default)]
    pub tls: bool,
    /// A `kubernetes.io/tls` Secret in the project's namespace, made by the user (with `tls`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(
        length(min = 1, max = 63),
        regex(pattern = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
    )]
    pub tls_secret: Option<String>,
}

fn root() -> String {
    "/".into()
}

/// Container resources as Kubernetes quantities.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Resources {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu_request: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu_limit: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory_request: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory_limit: Option<String>,
}

/// An HTTP readiness check.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct HealthCheck {
    #[schemars(regex(pattern = r"^/"))]
    pub path: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub port: Option<u16>,
    #[serde(default)]
    pub initial_delay_seconds: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub period_seconds: Option<u32>,
}

/// An addon from the catalog as a component of this App.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct AddonComponent {
    /// The AddonDefinition, e.g. `postgres`.
    #[schemars(length(min = 1, max = 63))]
    pub definition: String,
    /// A chart version other than the definition's pinned one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
    #[serde(default)]
    #[schemars(transform = preserve_unknown_fields)]
    pub values: Values,
}

/// What the cluster runs.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct AppStatus {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phase: Option<String>,
    /// The revision (spec hash) being deployed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub revision: Option<String>,
    /// The revision the agent reports applied.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_revision: Option<String>,
    #[serde(default)]
    pub components: Vec<ComponentStatus>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ingress_address: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sync: Option<Sync>,
    /// The deployment record of the current revision.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deployment_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_at: Option<String>,
    /// The phase the agent last reported (the controller derives `phase` from it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cluster_phase: Option<String>,
    /// Why the agent reports the App not ready, when it says (e.g. `NamespaceViolation: …`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cluster_message: Option<String>,
    /// Why the agent could not write the App's addon folders to the cluster's GitOps
    /// repository (the App runs regardless; an alert is open while this is set).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gitops_error: Option<String>,
    /// The last revision the agent stored durably (`command.accepted`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub accepted_revision: Option<String>,
    /// The verdict on the last revision verified (`spec.verification`), and what was done
    /// with it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub verification: Option<crate::verification::VerificationStatus>,
    /// The agent's refusal of the current revision, with the reason and field.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rejection: Option<Rejection>,
    /// The sequence number of the last status event applied; older events are dropped.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_sequence: Option<u64>,
    /// The generation whose spec `revision` and `deploymentId` record.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub recorded_generation: Option<i64>,
    /// When the current revision's rollout started (its deadline counts from here).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rollout_started_at: Option<String>,
    /// The last redeploy request (`kubenest.io/redeploy` annotation) that was carried out.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub handled_redeploy: Option<String>,
    /// While the App's cluster is unreachable (`Ready=Unknown`, reason `ClusterUnreachable`):
    /// when the cluster last reported. The rest of the status is as of then.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_observation: Option<String>,
    #[serde(default)]
    pub conditions: Vec<Condition>,
}

/// Why the agent refused a command.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Rejection {
    /// The revision the refused command carried.
    pub revision: String,
    pub reason: String,
    #[serde(default)]
    pub message: String,
    /// The offending field, when the agent named one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub field: Option<String>,
}

/// Health of one component.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ComponentStatus {
    pub name: String,
    pub ready_replicas: u32,
    pub desired_replicas: u32,
    pub ready: bool,
    #[serde(default)]
    pub message: String,
}

/// Drift between desired and live state.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Sync {
    pub drift_detected: bool,
    /// `recoverable` or `blocked_sync`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub drift_class: Option<String>,
    #[serde(default)]
    pub drift_details: Vec<DriftDetail>,
}

/// One drifted field.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DriftDetail {
    pub resource: String,
    pub field: String,
    pub desired: String,
    pub observed: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub manager: Option<String>,
}
