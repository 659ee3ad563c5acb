//! The REST shapes of fences and budgets, and their checks at the door (each refusal names its
//! field: `quota.cpu`, `network.egress[1].cidr`).

use kubenest_contracts::patterns::{CPU_QUANTITY, MEMORY_QUANTITY};
use kubenest_crds::app::Resources;
use kubenest_crds::fences::{
    Budget, EgressRule, Isolation, ProjectName, ProjectNetwork, ProjectQuota,
};
use kubenest_domain::fences::{Resource, quantity_refusal};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::error::{ApiError, ApiResult};

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

fn quantity(field: &str, resource: Resource, value: &Option<String>) -> ApiResult<()> {
    match value.as_deref().and_then(|v| quantity_refusal(resource, v)) {
        Some(rule) => Err(ApiError::invalid(field, format!("{field}: must be {rule}"))),
        None => Ok(()),
    }
}

/// The checked fences as the Project's spec holds them. `projects`: the names of the
/// organization's projects, which `allow_from` may name (never `own`).
pub fn check_fences(
    body: &FencesBody,
    own: &str,
    projects: &[String],
) -> ApiResult<(
    Option<ProjectQuota>,
    Option<Resources>,
    Option<ProjectNetwork>,
)> {
    let quota = body.quota.as_ref().map(check_quota).transpose()?;
    let defaults = body.defaults.as_ref().map(check_defaults).transpose()?;
    let network = body
        .network
        .as_ref()
        .map(|n| check_network(n, own, projects))
        .transpose()?;
    Ok((quota, defaults, network))
}

fn check_quota(body: &QuotaBody) -> ApiResult<ProjectQuota> {
    quantity("quota.cpu", Resource::Cpu, &body.cpu)?;
    quantity("quota.memory", Resource::Memory, &body.memory)?;
    quantity("quota.storage", Resource::Storage, &body.storage)?;
    if body.pods.is_some_and(|n| n > 100_000) {
        return Err(ApiError::invalid(
            "quota.pods",
            "quota.pods: at most 100000",
        ));
    }
    if body.load_balancers.is_some_and(|n| n > 10_000) {
        return Err(ApiError::invalid(
            "quota.load_balancers",
            "quota.load_balancers: at most 10000",
        ));
    }
    Ok(ProjectQuota {
        cpu: body.cpu.clone(),
        memory: body.memory.clone(),
        storage: body.storage.clone(),
        pods: body.pods,
        load_balancers: body.load_balancers,
    })
}

fn check_defaults(body: &DefaultsBody) -> ApiResult<Resources> {
    quantity("defaults.cpu_request", Resource::Cpu, &body.cpu_request)?;
    quantity("defaults.cpu_limit", Resource::Cpu, &body.cpu_limit)?;
    quantity(
        "defaults.memory_request",
        Resource::Memory,
        &body.memory_request,
    )?;
    quantity(
        "defaults.memory_limit",
        Resource::Memory,
        &body.memory_limit,
    )?;
    let amount = |v: &Option<String>| v.as_deref().and_then(kubenest_domain::app::quantity);
    for (what, request, limit) in [
        ("cpu", &body.cpu_request, &body.cpu_limit),
        ("memory", &body.memory_request, &body.memory_limit),
    ] {
        if let (Some(r), Some(l)) = (amount(request), amount(limit))
            && r > l
        {
            let field = format!("defaults.{what}_request");
            return Err(ApiError::invalid(
                &field,
                format!("{field}: more than its limit defaults.{what}_limit"),
            ));
        }
    }
    Ok(Resources {
        cpu_request: body.cpu_request.clone(),
        cpu_limit: body.cpu_limit.clone(),
        memory_request: body.memory_request.clone(),
        memory_limit: body.memory_limit.clone(),
    })
}

fn check_network(body: &NetworkBody, own: &str, projects: &[String]) -> ApiResult<ProjectNetwork> {
    if body.allow_from.len() > 64 || body.egress.len() > 64 {
        return Err(ApiError::invalid(
            "network",
            "network: at most 64 allow_from and 64 egress entries",
        ));
    }
    for (i, name) in body.allow_from.iter().enumerate() {
        let field = format!("network.allow_from[{i}]");
        if name == own {
            return Err(ApiError::invalid(
                &field,
                format!("{field}: a project's own pods always reach each other"),
            ));
        }
        if !projects.iter().any(|p| p == name) {
            return Err(ApiError::invalid(
                &field,
                format!("{field}: no project {name:?} in this organization"),
            ));
        }
    }
    for (i, rule) in body.egress.iter().enumerate() {
        let field = format!("network.egress[{i}].cidr");
        let parsed: Option<ipnet::IpNet> = rule.cidr.parse().ok();
        // The hub's and the CRD's pattern: no IPv4-in-IPv6 forms.
        let regex_shaped =
            rule.cidr.len() <= 64 && !(rule.cidr.contains(':') && rule.cidr.contains('.'));
        if parsed.is_none() || !regex_shaped {
            return Err(ApiError::invalid(
                &field,
                format!("{field}: must be a CIDR block such as 10.0.0.0/8 or 2001:db8::/32"),
            ));
        }
        if rule.ports.len() > 32 {
            return Err(ApiError::invalid(
                format!("network.egress[{i}].ports"),
                "at most 32 ports",
            ));
        }
        if let Some(j) = rule.ports.iter().position(|p| *p == 0) {
            let field = format!("network.egress[{i}].ports[{j}]");
            return Err(ApiError::invalid(
                &field,
                format!("{field}: a port is 1 to 65535"),
            ));
        }
    }
    Ok(ProjectNetwork {
        isolation: match body.isolation {
            IsolationBody::Isolated => Isolation::Isolated,
            IsolationBody::Open => Isolation::Open,
        },
        allow_from: body.allow_from.iter().cloned().map(ProjectName).collect(),
        egress: body
            .egress
            .iter()
            .map(|r| EgressRule {
                cidr: r.cidr.clone(),
                ports: r.ports.clone(),
            })
            .collect(),
    })
}

/// The checked budget as a Cluster's or an Organization's spec holds it; `None` when it sets
/// neither amount.
pub fn check_budget(body: &BudgetBody) -> ApiResult<Option<Budget>> {
    quantity("budget.cpu", Resource::Cpu, &body.cpu)?;
    quantity("budget.memory", Resource::Memory, &body.memory)?;
    Ok(
        (body.cpu.is_some() || body.memory.is_some()).then(|| Budget {
            cpu: body.cpu.clone(),
            memory: body.memory.clone(),
        }),
    )
}

/// The REST view of a project's fences.
pub fn view(
    quota: Option<&ProjectQuota>,
    defaults: Option<&Resources>,
    network: Option<&ProjectNetwork>,
) -> FencesBody {
    let network = network.cloned().unwrap_or_default();
    FencesBody {
        quota: quota.map(|q| QuotaBody {
            cpu: q.cpu.clone(),
            memory: q.memory.clone(),
            storage: q.storage.clone(),
            pods: q.pods,
            load_balancers: q.load_balancers,
        }),
        defaults: defaults.map(|d| DefaultsBody {
            cpu_request: d.cpu_request.clone(),
            cpu_limit: d.cpu_limit.clone(),
            memory_request: d.memory_request.clone(),
            memory_limit: d.memory_limit.clone(),
        }),
        network: Some(NetworkBody {
            isolation: match network.isolation {
                Isolation::Isolated => IsolationBody::Isolated,
                Isolation::Open => IsolationBody::Open,
            },
            allow_from: network.allow_from.into_iter().map(|p| p.0).collect(),
            egress: network
                .egress
                .into_iter()
                .map(|r| EgressBody {
                    cidr: r.cidr,
                    ports: r.ports,
                })
                .collect(),
        }),
    }
}

/// The REST view of a budget.
pub fn budget_view(budget: Option<&Budget>) -> Option<BudgetBody> {
    budget.map(|b| BudgetBody {
        cpu: b.cpu.clone(),
        memory: b.memory.clone(),
    })
}
