//! Fences: what a project may use and reach (its quota, its containers' defaults, its network)
//! and the budgets an organization or a cluster scope sets across projects. Set by the admins
//! of the organization (the `kubenest-members` admission policy), never by a project's members.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use kubenest_contracts::patterns::{CPU_QUANTITY, MEMORY_QUANTITY};

/// Hard limits on the sum of the project's requests and objects, in Kubernetes quantities.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ProjectQuota {
    /// CPU requested by all the project's containers, e.g. `2` or `1500m`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(regex(pattern = CPU_QUANTITY), length(max = 32))]
    pub cpu: Option<String>,
    /// Memory requested by all the project's containers, e.g. `4Gi`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(regex(pattern = MEMORY_QUANTITY), length(max = 32))]
    pub memory: Option<String>,
    /// Storage requested by all the project's volume claims, e.g. `20Gi`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(regex(pattern = MEMORY_QUANTITY), length(max = 32))]
    pub storage: Option<String>,
    /// Pods at once.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(max = 100000))]
    pub pods: Option<u32>,
    /// Services of type LoadBalancer.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(max = 10000))]
    pub load_balancers: Option<u32>,
}

/// Who may connect to the project's pods and where they may connect.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ProjectNetwork {
    /// `Isolated` (the default) or `Open`.
    #[serde(default)]
    pub isolation: Isolation,
    /// Projects of the organization (by name) whose pods may connect to this project's.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 64))]
    pub allow_from: Vec<ProjectName>,
    /// Destinations outside the cluster's projects the pods may connect to.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 64))]
    pub egress: Vec<EgressRule>,
}

/// A project's name.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct ProjectName(
    #[schemars(
        length(min = 1, max = 63),
        regex(pattern = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
    )]
    pub String,
);

/// Whether a project's network is fenced.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum Isolation {
    /// Pods take connections from their own project, the projects in `allowFrom` and the
    /// cluster's trusted namespaces; they connect to their own project, other projects (whose
    /// fences decide), DNS and `egress`.
    #[default]
    Isolated,
    /// No NetworkPolicy: every pod of the cluster may connect to the project's pods.
    Open,
}

/// A destination: an IPv4 or IPv6 block and TCP ports (none: every port).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct EgressRule {
    /// A CIDR block, e.g. `10.0.0.0/8` or `0.0.0.0/0`.
    #[schemars(regex(pattern = kubenest_contracts::CIDR), length(max = 64))]
    pub cidr: String,
    /// TCP ports; none: every port.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 32))]
    pub ports: Vec<u16>,
}

/// CPU and memory requests the projects of a scope may hold in all, across all its clusters.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Budget {
    /// CPU requests in all, e.g. `4`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(regex(pattern = CPU_QUANTITY), length(max = 32))]
    pub cpu: Option<String>,
    /// Memory requests in all, e.g. `16Gi`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(regex(pattern = MEMORY_QUANTITY), length(max = 32))]
    pub memory: Option<String>,
}
