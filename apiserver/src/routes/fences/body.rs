//! The REST shapes of fences and budgets, and their checks at the door (each refusal names its
//! field: `quota.cpu`, `network.egress[1].cidr`).

pub use kubenest_api::fences::{
    BudgetBody, DefaultsBody, EgressBody, FencesBody, IsolationBody, NetworkBody, QuotaBody,
};

use kubenest_crds::app::Resources;
use kubenest_crds::fences::{
    Budget, EgressRule, Isolation, ProjectName, ProjectNetwork, ProjectQuota,
};
use kubenest_domain::fences::{Resource, quantity_refusal};

use crate::error::{ApiError, ApiResult};

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
