//! Project: one namespace on one cluster.

use kube::CustomResource;
/// The standards are the REST API's words too: one definition, in the API types.
pub use kubenest_api::projects::PodSecurity;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::common::{
    Condition, Member, ProgressClock, conditions_by_type, default_progress_deadline,
};

/// A project's cluster, namespace, members and namespace settings.
#[derive(CustomResource, Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "kubenest.io",
    version = "v1alpha1",
    kind = "Project",
    plural = "projects",
    namespaced,
    doc = "A Project: one namespace on one cluster, holding apps, standalone addons and \
           secrets. Ready once the agent reports the namespace ready for the current generation."
)]
#[kube(shortname = "kproj", category = "kubenest", status = "ProjectStatus")]
#[kube(printcolumn(name = "Cluster", type_ = "string", json_path = ".spec.cluster"))]
#[kube(printcolumn(name = "Namespace", type_ = "string", json_path = ".spec.namespace"))]
#[kube(printcolumn(name = "Phase", type_ = "string", json_path = ".status.phase"))]
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
    // `namespace` is a CEL keyword: fields of that name are written `__namespace__` in rules.
    {"rule": "self.cluster == oldSelf.cluster", "message": "cluster is immutable"},
    {"rule": "self.__namespace__ == oldSelf.__namespace__", "message": "namespace is immutable"}
]))]
pub struct ProjectSpec {
    /// The Cluster (in this namespace) the project lives on.
    #[schemars(length(min = 1, max = 253))]
    pub cluster: String,
    /// The namespace on that cluster.
    #[schemars(
        length(min = 1, max = 63),
        regex(pattern = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
    )]
    pub namespace: String,
    /// A registry pull secret to keep in the namespace (values set through the API).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub registry_secret: Option<String>,
    /// The project has an ingress CA: the Secret `kubenest-ingress-ca` in its namespace (values
    /// set through the API), which signs a certificate for each ingress with `tls` and no
    /// `tlsSecret`.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub ingress_ca: bool,
    /// Roles on this project only.
    #[serde(default)]
    #[schemars(length(max = 1000))]
    pub members: Vec<Member>,
    /// Seconds the cluster may take to confirm the namespace, counted from when it got the
    /// request, before the project is `Failed`.
    #[serde(default = "default_progress_deadline")]
    #[schemars(range(min = 10, max = 86400))]
    pub progress_deadline_seconds: u32,
    /// The Pod Security Standard the namespace enforces (`baseline` when absent). Set and
    /// changed by organization admins only (the `kubenest-members` admission policy).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pod_security: Option<PodSecurity>,
    /// Hard limits on what the project's namespace may request in all (a ResourceQuota kept
    /// by the agent). Organization admins only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub quota: Option<crate::fences::ProjectQuota>,
    /// Requests and limits of containers that set none (a LimitRange kept by the agent).
    /// Organization admins only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub defaults: Option<crate::app::Resources>,
    /// Network isolation (NetworkPolicies kept by the agent); absent: isolated. Organization
    /// admins only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub network: Option<crate::fences::ProjectNetwork>,
}

/// A project's lifecycle.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum ProjectPhase {
    #[default]
    Pending,
    Ready,
    Terminating,
    Failed,
}

/// What the Project controller observed.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ProjectStatus {
    /// `Pending`, `Ready`, `Terminating` or `Failed`.
    #[serde(default)]
    pub phase: ProjectPhase,
    /// The generation of the spec the controller last wrote this status for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    /// When the agent last reported (RFC 3339).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_at: Option<String>,
    /// The namespace's phase as the agent last reported it (`Pending`, `Ready`, `Terminating`,
    /// `Deleted`, `Failed`); the controller derives `phase` from it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cluster_phase: Option<String>,
    /// Why, when the agent said.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub cluster_message: String,
    /// The generation the agent last accepted a `project.ensure` for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ensured_generation: Option<i64>,
    /// The progress deadline's clock of the generation being ensured.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub progress: Option<ProgressClock>,
    /// While the project's cluster is unreachable (`Ready=Unknown`, reason
    /// `ClusterUnreachable`): when the cluster last reported. The rest of the status is as of
    /// then.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_observation: Option<String>,
    /// What the namespace uses of what its quota limits (`requests.cpu` → `1500m`), as the
    /// cluster last reported it.
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub usage: std::collections::BTreeMap<String, String>,
    /// The fences the cluster last put back after someone changed them there.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub healed: Vec<String>,
    /// `Ready`, `Progressing`, `DeletionBlocked` and the rest, one of each type.
    #[serde(default)]
    #[schemars(transform = conditions_by_type)]
    pub conditions: Vec<Condition>,
}
