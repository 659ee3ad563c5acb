//! Fences: project quotas, defaults and network isolation; organization budgets; usage.

use kubenest_contracts::patterns::{CPU_QUANTITY, MEMORY_QUANTITY};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// An amount of each fenced resource, as people write them.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct AmountsView {
    pub cpu: String,
    pub memory: String,
    pub storage: String,
    pub pods: String,
    pub load_balancers: String,
}

/// What a project uses against its quota.
#[derive(Debug, Serialize, Deserialize, JsonSchema)]
pub struct ProjectUsageResponse {
    pub project: String,
    pub cluster: String,
    /// The project's fences (the defaults as given; containers under a CPU or memory quota
    /// without a default request get 100m / 128Mi).
    pub fences: FencesBody,
    /// What counts against the quota: per resource, the more of `declared` and `reported`.
    pub used: AmountsView,
    /// What its Apps' specs request (image and Git workloads: replicas × requests).
    pub declared: AmountsView,
    /// What the cluster's ResourceQuota counted, as its agent last reported (every pod,
    /// charts and addons included; only what the quota limits).
    pub reported: AmountsView,
}

/// A scope's use against its budget.
#[derive(Debug, Serialize, Deserialize, JsonSchema)]
pub struct ScopeUsage {
    /// `organization`, or the cluster's name.
    pub scope: String,
    pub cluster_id: Option<String>,
    pub budget: Option<BudgetBody>,
    pub used: AmountsView,
}

/// What an organization uses: in all, per cluster and per project.
#[derive(Debug, Serialize, Deserialize, JsonSchema)]
pub struct OrgUsageResponse {
    pub organization: ScopeUsage,
    pub clusters: Vec<ScopeUsage>,
    pub projects: Vec<ProjectUsageRow>,
}

/// One project's line.
#[derive(Debug, Serialize, Deserialize, JsonSchema)]
pub struct ProjectUsageRow {
    pub project: String,
    pub project_id: String,
    pub cluster: String,
    pub quota: Option<QuotaBody>,
    pub used: AmountsView,
}

/// Hard limits on what a project requests in all (Kubernetes quantities).
#[derive(Debug, Clone, Default, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct QuotaBody {
    /// CPU requested by all the project's containers: `2`, `1500m`.
    #[serde(default)]
    #[schemars(regex(pattern = CPU_QUANTITY), length(max = 32))]
    pub cpu: Option<String>,
    /// Memory requested by all its containers: `4Gi`.
    #[serde(default)]
    #[schemars(regex(pattern = MEMORY_QUANTITY), length(max = 32))]
    pub memory: Option<String>,
    /// Storage requested by all its volume claims: `20Gi`.
    #[serde(default)]
    #[schemars(regex(pattern = MEMORY_QUANTITY), length(max = 32))]
    pub storage: Option<String>,
    /// Pods at once.
    #[serde(default)]
    #[schemars(range(max = 100000))]
    pub pods: Option<u32>,
    /// Services of type LoadBalancer.
    #[serde(default)]
    #[schemars(range(max = 10000))]
    pub load_balancers: Option<u32>,
}

/// What a container that sets no requests or limits gets.
#[derive(Debug, Clone, Default, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct DefaultsBody {
    #[serde(default)]
    #[schemars(regex(pattern = CPU_QUANTITY), length(max = 32))]
    pub cpu_request: Option<String>,
    #[serde(default)]
    #[schemars(regex(pattern = CPU_QUANTITY), length(max = 32))]
    pub cpu_limit: Option<String>,
    #[serde(default)]
    #[schemars(regex(pattern = MEMORY_QUANTITY), length(max = 32))]
    pub memory_request: Option<String>,
    #[serde(default)]
    #[schemars(regex(pattern = MEMORY_QUANTITY), length(max = 32))]
    pub memory_limit: Option<String>,
}

/// `isolated` (the default) or `open`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum IsolationBody {
    /// Pods take connections from their own project, `allow_from` and the cluster's trusted
    /// namespaces; they reach their own project, other projects, DNS and `egress`.
    #[default]
    Isolated,
    /// No NetworkPolicy.
    Open,
}

/// Who may connect to a project's pods, and where they may connect.
#[derive(Debug, Clone, Default, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct NetworkBody {
    #[serde(default)]
    pub isolation: IsolationBody,
    /// Projects of the organization (by name) whose pods may connect to this one's.
    #[serde(default)]
    #[schemars(length(max = 64))]
    pub allow_from: Vec<String>,
    /// Destinations outside the cluster's projects.
    #[serde(default)]
    #[schemars(length(max = 64))]
    pub egress: Vec<EgressBody>,
}

/// A CIDR block and TCP ports (none: every port).
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct EgressBody {
    /// `10.0.0.0/8`, `0.0.0.0/0`, `2001:db8::/32`.
    #[schemars(regex(pattern = kubenest_contracts::CIDR), length(max = 64))]
    pub cidr: String,
    #[serde(default)]
    #[schemars(length(max = 32), inner(range(min = 1)))]
    pub ports: Vec<u16>,
}

/// A project's fences. Absent parts: no quota, no defaults, isolated.
#[derive(Debug, Clone, Default, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct FencesBody {
    #[serde(default)]
    pub quota: Option<QuotaBody>,
    #[serde(default)]
    pub defaults: Option<DefaultsBody>,
    #[serde(default)]
    pub network: Option<NetworkBody>,
}

/// CPU and memory requests a scope's projects may hold in all.
#[derive(Debug, Clone, Default, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct BudgetBody {
    #[serde(default)]
    #[schemars(regex(pattern = CPU_QUANTITY), length(max = 32))]
    pub cpu: Option<String>,
    #[serde(default)]
    #[schemars(regex(pattern = MEMORY_QUANTITY), length(max = 32))]
    pub memory: Option<String>,
}
