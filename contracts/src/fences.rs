//! A project's fences as the agent keeps them on its cluster: a ResourceQuota, a LimitRange and
//! NetworkPolicies in the project's namespace, all carried by `project.ensure`, and the use the
//! agent reports back in `project.status`.

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::common::Name;
use crate::patterns::{CPU_QUANTITY, MEMORY_QUANTITY};

/// Everything that fences a project namespace. The default fences nothing but the network:
/// a project is isolated unless it says otherwise.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize, JsonSchema)]
pub struct Fences {
    /// The namespace's ResourceQuota; none: no quota.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub quota: Option<Quota>,
    /// The namespace's LimitRange: what a container that sets none requests and is limited to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub defaults: Option<crate::Resources>,
    /// The namespace's NetworkPolicies.
    #[serde(default)]
    pub network: NetworkFence,
}

/// Hard limits on the sum of a namespace's requests and objects (Kubernetes quantities).
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize, JsonSchema)]
pub struct Quota {
    /// `requests.cpu`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(regex(pattern = CPU_QUANTITY), length(max = 32))]
    pub cpu: Option<String>,
    /// `requests.memory`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(regex(pattern = MEMORY_QUANTITY), length(max = 32))]
    pub memory: Option<String>,
    /// `requests.storage` (the sum of the claims' requests).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(regex(pattern = MEMORY_QUANTITY), length(max = 32))]
    pub storage: Option<String>,
    /// `pods`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(max = 100000))]
    pub pods: Option<u32>,
    /// `services.loadbalancers`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(max = 10000))]
    pub load_balancers: Option<u32>,
}

/// Who may open connections to the project's pods, and where they may open them.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct NetworkFence {
    /// Isolated (the default): pods take connections from their own namespace, the projects in
    /// `allow_from` and the cluster's trusted namespaces (the agent's, an ingress controller's),
    /// and open them to their own namespace, other projects (whose own fences decide), DNS and
    /// `egress`. Not isolated: no NetworkPolicy at all.
    pub isolated: bool,
    /// Projects of the same organization whose pods may connect to this one's.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 64))]
    pub allow_from: Vec<Name>,
    /// Further destinations the pods may connect to.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 64))]
    pub egress: Vec<EgressRule>,
}

impl Default for NetworkFence {
    fn default() -> Self {
        Self {
            isolated: true,
            allow_from: vec![],
            egress: vec![],
        }
    }
}

/// A destination outside the cluster's projects: an IPv4 or IPv6 block, and ports (none: all).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct EgressRule {
    /// A CIDR block, e.g. `10.0.0.0/8` or `0.0.0.0/0`.
    #[schemars(regex(pattern = CIDR), length(max = 64))]
    pub cidr: String,
    /// TCP ports; none: every port.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 32))]
    pub ports: Vec<Port>,
}

/// A TCP port.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct Port(#[schemars(range(min = 1, max = 65535))] pub u16);

/// An IPv4 or IPv6 CIDR block.
pub const CIDR: &str = concat!(
    r"^(((25[0-5]|2[0-4][0-9]|1[0-9]{2}|[1-9]?[0-9])\.){3}(25[0-5]|2[0-4][0-9]|1[0-9]{2}|[1-9]?[0-9])",
    r"/(3[0-2]|[12]?[0-9])|[0-9a-fA-F:]{2,39}/(12[0-8]|1[01][0-9]|[1-9]?[0-9]))$"
);

/// What a project's namespace uses, as its ResourceQuota counts it (`requests.cpu` → `1500m`):
/// only the resources its quota limits are counted by Kubernetes.
pub type Usage = BTreeMap<String, String>;
