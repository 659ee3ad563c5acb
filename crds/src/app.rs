//! App: a bundle of workload and addon components deployed together to a project.

use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::common::{
    Chart, Condition, Values, conditions_by_type, default_progress_deadline, items_by_name,
    preserve_unknown_fields,
};

/// What an App deploys: its components, to one project. Every change to it is a recorded
/// deployment.
#[derive(CustomResource, Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "kubenest.io",
    version = "v1alpha1",
    kind = "App",
    plural = "apps",
    namespaced,
    doc = "An App: workload and addon components deployed together to a project. Every change \
           to its spec is a recorded deployment; the status says what the cluster really runs."
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
    {"rule": "self.project == oldSelf.project", "message": "project is immutable"}
]))]
pub struct AppSpec {
    /// The Project (in this namespace) the App is deployed to.
    #[schemars(length(min = 1, max = 253))]
    pub project: String,
    /// The components, keyed by name (a server-side apply of one leaves the others).
    #[schemars(length(min = 1, max = 64), transform = items_by_name)]
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
    /// The component's name, unique in the App (a DNS label).
    #[schemars(
        length(min = 1, max = 63),
        regex(pattern = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
    )]
    pub name: String,
    /// A container workload.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workload: Option<Workload>,
    /// An addon from the catalog.
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
    /// A container image to run as it is.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 1024), regex(pattern = r"^[^\s]+$"))]
    pub image: Option<String>,
    /// An image built on the cluster from a Git repository.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub git: Option<GitSource>,
    /// A Helm chart rendered as the workload.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub helm: Option<HelmSource>,
    /// Pods to run (default 1).
    #[serde(default = "one")]
    #[schemars(range(max = 1000))]
    pub replicas: u32,
    /// The container port the workload serves on, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 65535))]
    pub port: Option<u16>,
    /// Environment variables, keyed by name.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 256), transform = items_by_name)]
    pub env: Vec<EnvVar>,
    /// Outside traffic routed to `port`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ingress: Option<Ingress>,
    /// CPU and memory requests and limits.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resources: Option<Resources>,
    /// The readiness check of the pods.
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
    /// The repository's URL.
    #[schemars(
        length(min = 1, max = 2048),
        regex(pattern = kubenest_contracts::patterns::GIT_REPOSITORY)
    )]
    pub repository: String,
    /// The branch, tag or commit to build.
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
    /// How the image is built: `dockerfile` or `buildpack`.
    pub mode: BuildMode,
}

/// How an image is built.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum BuildMode {
    /// The repository's Dockerfile.
    Dockerfile,
    /// Cloud Native Buildpacks.
    Buildpack,
}

/// Render a Helm chart as the workload.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct HelmSource {
    /// The chart.
    pub chart: Chart,
    /// Values given to the chart.
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
    /// The variable's name.
    #[schemars(
        length(min = 1, max = 253),
        regex(pattern = r"^[A-Za-z_][A-Za-z0-9_.-]*$")
    )]
    pub name: String,
    /// A literal value.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 32768))]
    pub value: Option<String>,
    /// The value an addon component of this App exports.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub export_ref: Option<ExportRef>,
}

/// An export of an addon component of the same App, resolved on the cluster.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ExportRef {
    /// The addon component's name.
    #[schemars(length(min = 1, max = 63))]
    pub component: String,
    /// The export's name, e.g. `dsn`.
    #[schemars(length(min = 1, max = 63), regex(pattern = r"^[a-z][a-z0-9_]*$"))]
    pub export: String,
}

/// Route outside traffic to the workload.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Ingress {
    /// The host name served.
    #[schemars(length(min = 1, max = 253))]
    pub host: String,
    /// The path prefix served (default `/`).
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
    /// CPU requested, e.g. `250m`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu_request: Option<String>,
    /// CPU limit, e.g. `1`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu_limit: Option<String>,
    /// Memory requested, e.g. `256Mi`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory_request: Option<String>,
    /// Memory limit, e.g. `512Mi`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory_limit: Option<String>,
}

/// An HTTP readiness check.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct HealthCheck {
    /// The HTTP path probed.
    #[schemars(regex(pattern = r"^/"))]
    pub path: String,
    /// The port probed (the workload's `port` when absent).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub port: Option<u16>,
    /// Seconds before the first probe.
    #[serde(default)]
    pub initial_delay_seconds: u32,
    /// Seconds between probes.
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
    /// Values given to the addon's chart, over the definition's defaults.
    #[serde(default)]
    #[schemars(transform = preserve_unknown_fields)]
    pub values: Values,
}

/// What the cluster runs.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct AppStatus {
    /// The generation of the spec the controller last wrote this status for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    /// `Pending`, `Deploying`, `Running`, `Failed`, `Paused` or `Deleting`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phase: Option<String>,
    /// The revision (spec hash) being deployed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub revision: Option<String>,
    /// The revision the agent reports applied.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_revision: Option<String>,
    /// Health of each component, as the agent last reported it.
    #[serde(default)]
    pub components: Vec<ComponentStatus>,
    /// The address the App's ingress answers on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ingress_address: Option<String>,
    /// Drift between the desired and the live state.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sync: Option<Sync>,
    /// The deployment record of the current revision.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deployment_id: Option<String>,
    /// When the agent last reported (RFC 3339).
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
    /// `Ready`, `Progressing`, `Synced` and the rest, one of each type.
    #[serde(default)]
    #[schemars(transform = conditions_by_type)]
    pub conditions: Vec<Condition>,
}

/// Why the agent refused a command.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Rejection {
    /// The revision the refused command carried.
    pub revision: String,
    /// Why, in a word.
    pub reason: String,
    /// Why, in a sentence.
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
    /// The component's name.
    pub name: String,
    /// Pods ready.
    pub ready_replicas: u32,
    /// Pods wanted.
    pub desired_replicas: u32,
    /// The component serves.
    pub ready: bool,
    /// Why it is not ready, if it is not.
    #[serde(default)]
    pub message: String,
}

/// Drift between desired and live state.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Sync {
    /// Another manager changed what the agent applied.
    pub drift_detected: bool,
    /// `recoverable` or `blocked_sync`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub drift_class: Option<String>,
    /// The drifted fields.
    #[serde(default)]
    pub drift_details: Vec<DriftDetail>,
}

/// One drifted field.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DriftDetail {
    /// The object, as `Kind/name`.
    pub resource: String,
    /// The field's path, e.g. `spec.replicas`.
    pub field: String,
    /// The value applied.
    pub desired: String,
    /// The value found.
    pub observed: String,
    /// The field manager that changed it, when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub manager: Option<String>,
}
