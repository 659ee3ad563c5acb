//! `kubenest projects fences|usage`, `kubenest orgs budget|usage`, `kubenest clusters budget`:
//! a project's quota, default limits and network isolation, the budgets across projects, and
//! what each uses.

use clap::Args;
use kubenest_api::fences::{
    AmountsView, BudgetBody, DefaultsBody, EgressBody, FencesBody, IsolationBody, NetworkBody,
    OrgUsageResponse, ProjectUsageResponse, QuotaBody, ScopeUsage,
};

use super::{Global, Table, opt};
use crate::api;

/// A project's fences, all three replaced at once (organization admins).
#[derive(Debug, Args)]
pub struct FencesArgs {
    pub project: String,
    /// The quota: CPU requested by all its containers (`2`, `1500m`).
    #[arg(long)]
    cpu: Option<String>,
    /// The quota: memory requested by all its containers (`4Gi`).
    #[arg(long)]
    memory: Option<String>,
    /// The quota: storage requested by all its claims (`20Gi`).
    #[arg(long)]
    storage: Option<String>,
    /// The quota: pods at once.
    #[arg(long)]
    pods: Option<u32>,
    /// The quota: Services of type LoadBalancer.
    #[arg(long)]
    load_balancers: Option<u32>,
    /// The CPU a container that names none requests (`100m`).
    #[arg(long)]
    default_cpu_request: Option<String>,
    /// The CPU limit of a container that names none.
    #[arg(long)]
    default_cpu_limit: Option<String>,
    /// The memory a container that names none requests (`128Mi`).
    #[arg(long)]
    default_memory_request: Option<String>,
    /// The memory limit of a container that names none.
    #[arg(long)]
    default_memory_limit: Option<String>,
    /// No network isolation (every pod of the cluster may connect to the project's).
    #[arg(long)]
    open: bool,
    /// A project of the organization whose pods may connect to this one's (repeatable).
    #[arg(long = "allow-from", value_name = "PROJECT")]
    allow_from: Vec<String>,
    /// A destination the pods may connect to: `CIDR` or `CIDR:PORT[,PORT...]` (repeatable).
    #[arg(long = "egress", value_name = "CIDR[:PORTS]")]
    egress: Vec<String>,
}

impl FencesArgs {
    /// The REST body (pure); a malformed `--egress` is refused here, naming it.
    pub fn body(&self) -> anyhow::Result<FencesBody> {
        let quota = QuotaBody {
            cpu: self.cpu.clone(),
            memory: self.memory.clone(),
            storage: self.storage.clone(),
            pods: self.pods,
            load_balancers: self.load_balancers,
        };
        let defaults = DefaultsBody {
            cpu_request: self.default_cpu_request.clone(),
            cpu_limit: self.default_cpu_limit.clone(),
            memory_request: self.default_memory_request.clone(),
            memory_limit: self.default_memory_limit.clone(),
        };
        let egress = self
            .egress
            .iter()
            .map(|rule| egress(rule))
            .collect::<anyhow::Result<Vec<_>>>()?;
        let quota_given = [&quota.cpu, &quota.memory, &quota.storage]
            .iter()
            .any(|v| v.is_some())
            || quota.pods.is_some()
            || quota.load_balancers.is_some();
        let defaults_given = [
            &defaults.cpu_request,
            &defaults.cpu_limit,
            &defaults.memory_request,
            &defaults.memory_limit,
        ]
        .iter()
        .any(|v| v.is_some());
        Ok(FencesBody {
            quota: quota_given.then_some(quota),
            defaults: defaults_given.then_some(defaults),
            network: Some(NetworkBody {
                isolation: if self.open {
                    IsolationBody::Open
                } else {
                    IsolationBody::Isolated
                },
                allow_from: self.allow_from.clone(),
                egress,
            }),
        })
    }
}

/// `10.0.0.0/8` or `10.0.0.0/8:443,5432` (an IPv6 block's own colons come before the `/`).
fn egress(rule: &str) -> anyhow::Result<EgressBody> {
    let (cidr, ports) = match rule.split_once('/') {
        Some((_, rest)) => match rest.split_once(':') {
            Some((_, ports)) => (&rule[..rule.len() - ports.len() - 1], Some(ports)),
            None => (rule, None),
        },
        None => anyhow::bail!("--egress {rule:?}: a CIDR block such as 10.0.0.0/8[:443,5432]"),
    };
    let ports = ports
        .map(|p| {
            p.split(',')
                .map(|port| {
                    port.parse::<u16>()
                        .map_err(|_| anyhow::anyhow!("--egress {rule:?}: {port:?} is not a port"))
                })
                .collect::<anyhow::Result<Vec<_>>>()
        })
        .transpose()?
        .unwrap_or_default();
    Ok(EgressBody {
        cidr: cidr.to_owned(),
        ports,
    })
}

/// Sets a project's fences; prints what it uses against them.
pub async fn set(
    global: &Global,
    client: &mut api::Client,
    id: &str,
    args: &FencesArgs,
) -> anyhow::Result<()> {
    let body = args.body()?;
    let usage: ProjectUsageResponse = client
        .put_as(&format!("/api/v1/projects/{id}/fences"), &body)
        .await?;
    global.print(&usage, usage_table);
    Ok(())
}

/// What a project uses against its quota, one row per resource.
pub fn usage_table(usage: &ProjectUsageResponse) -> Table {
    let quota = usage.fences.quota.as_ref();
    let limits: [Option<String>; 5] = [
        quota.and_then(|q| q.cpu.clone()),
        quota.and_then(|q| q.memory.clone()),
        quota.and_then(|q| q.storage.clone()),
        quota.and_then(|q| q.pods).map(|n| n.to_string()),
        quota.and_then(|q| q.load_balancers).map(|n| n.to_string()),
    ];
    let amounts = |a: &AmountsView| {
        [
            a.cpu.clone(),
            a.memory.clone(),
            a.storage.clone(),
            a.pods.clone(),
            a.load_balancers.clone(),
        ]
    };
    let (used, declared, reported) = (
        amounts(&usage.used),
        amounts(&usage.declared),
        amounts(&usage.reported),
    );
    let mut table = Table::new(["RESOURCE", "QUOTA", "USED", "DECLARED", "REPORTED"]);
    for (i, resource) in ["cpu", "memory", "storage", "pods", "load_balancers"]
        .iter()
        .enumerate()
    {
        table.push(vec![
            (*resource).to_owned(),
            opt(&limits[i]),
            opt(&Some(&used[i])),
            opt(&Some(&declared[i])),
            opt(&Some(&reported[i])),
        ]);
    }
    table
}

/// A budget's two amounts.
#[derive(Debug, Args)]
pub struct BudgetArgs {
    /// CPU requests in all (`4`); absent with `--memory` absent too: no budget.
    #[arg(long)]
    cpu: Option<String>,
    /// Memory requests in all (`16Gi`).
    #[arg(long)]
    memory: Option<String>,
}

impl BudgetArgs {
    pub fn body(&self) -> BudgetBody {
        BudgetBody {
            cpu: self.cpu.clone(),
            memory: self.memory.clone(),
        }
    }
}

/// What an organization uses: in all, per cluster, per project.
pub fn org_usage_table(usage: &OrgUsageResponse) -> Table {
    let mut table = Table::new(["SCOPE", "CPU", "CPU LIMIT", "MEMORY", "MEMORY LIMIT"]);
    table.push(scope_row("organization".into(), &usage.organization));
    for cluster in &usage.clusters {
        table.push(scope_row(format!("cluster {}", cluster.scope), cluster));
    }
    for project in &usage.projects {
        let quota = project.quota.as_ref();
        table.push(vec![
            format!("project {}", project.project),
            opt(&Some(&project.used.cpu)),
            opt(&quota.and_then(|q| q.cpu.clone())),
            opt(&Some(&project.used.memory)),
            opt(&quota.and_then(|q| q.memory.clone())),
        ]);
    }
    table
}

fn scope_row(scope: String, usage: &ScopeUsage) -> Vec<String> {
    let budget = usage.budget.as_ref();
    vec![
        scope,
        opt(&Some(&usage.used.cpu)),
        opt(&budget.and_then(|b| b.cpu.clone())),
        opt(&Some(&usage.used.memory)),
        opt(&budget.and_then(|b| b.memory.clone())),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rule(cidr: &str, ports: &[u16]) -> (String, Vec<u16>) {
        (cidr.to_owned(), ports.to_vec())
    }

    #[test]
    fn egress_rules_read_with_and_without_ports_for_both_families() {
        let read = |given: &str| egress(given).map(|e| (e.cidr, e.ports)).unwrap();
        assert_eq!(
            read("10.0.0.0/8:443,5432"),
            rule("10.0.0.0/8", &[443, 5432])
        );
        assert_eq!(read("2001:db8::/32"), rule("2001:db8::/32", &[]));
        assert_eq!(read("2001:db8::/32:443"), rule("2001:db8::/32", &[443]));
        assert!(egress("10.0.0.0").is_err());
        assert!(egress("10.0.0.0/8:https").is_err());
    }
}
