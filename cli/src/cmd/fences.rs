//! `kubenest projects fences|usage`, `kubenest orgs budget|usage`, `kubenest clusters budget`:
//! a project's quota, default limits and network isolation, the budgets across projects, and
//! what each uses.

use clap::Args;
use serde_json::{Value, json};

use super::{Global, Table, text};
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
    pub fn body(&self) -> anyhow::Result<Value> {
        let some = |pairs: Vec<(&str, Value)>| {
            let map: serde_json::Map<String, Value> = pairs
                .into_iter()
                .filter(|(_, v)| !v.is_null())
                .map(|(k, v)| (k.to_owned(), v))
                .collect();
            (!map.is_empty()).then_some(Value::Object(map))
        };
        let quota = some(vec![
            ("cpu", json!(self.cpu)),
            ("memory", json!(self.memory)),
            ("storage", json!(self.storage)),
            ("pods", json!(self.pods)),
            ("load_balancers", json!(self.load_balancers)),
        ]);
        let defaults = some(vec![
            ("cpu_request", json!(self.default_cpu_request)),
            ("cpu_limit", json!(self.default_cpu_limit)),
            ("memory_request", json!(self.default_memory_request)),
            ("memory_limit", json!(self.default_memory_limit)),
        ]);
        let egress = self
            .egress
            .iter()
            .map(|rule| egress(rule))
            .collect::<anyhow::Result<Vec<_>>>()?;
        Ok(json!({
            "quota": quota,
            "defaults": defaults,
            "network": {
                "isolation": if self.open { "open" } else { "isolated" },
                "allow_from": self.allow_from,
                "egress": egress,
            },
        }))
    }
}

/// `10.0.0.0/8` or `10.0.0.0/8:443,5432` (an IPv6 block's own colons come before the `/`).
fn egress(rule: &str) -> anyhow::Result<Value> {
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
    Ok(json!({"cidr": cidr, "ports": ports}))
}

/// Sets a project's fences; prints what it uses against them.
pub async fn set(
    global: &Global,
    client: &mut api::Client,
    id: &str,
    args: &FencesArgs,
) -> anyhow::Result<()> {
    let body = args.body()?;
    let usage = client
        .call(
            reqwest::Method::PUT,
            &format!("/api/v1/projects/{id}/fences"),
            Some(&body),
        )
        .await?;
    global.print(&usage, usage_table);
    Ok(())
}

/// What a project uses against its quota, one row per resource.
pub fn usage_table(usage: &Value) -> Table {
    let quota = &usage["fences"]["quota"];
    let rows: Vec<Value> = ["cpu", "memory", "storage", "pods", "load_balancers"]
        .iter()
        .map(|r| {
            json!({
                "resource": r, "quota": quota[r], "used": usage["used"][r],
                "declared": usage["declared"][r], "reported": usage["reported"][r],
            })
        })
        .collect();
    Table::rows(
        ["RESOURCE", "QUOTA", "USED", "DECLARED", "REPORTED"],
        &Value::Array(rows),
        |row| {
            ["resource", "quota", "used", "declared", "reported"]
                .iter()
                .map(|k| match &row[*k] {
                    Value::Null => "-".to_owned(),
                    v => text(v),
                })
                .collect()
        },
    )
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
    pub fn body(&self) -> Value {
        json!({"cpu": self.cpu, "memory": self.memory})
    }
}

/// What an organization uses: in all, per cluster, per project.
pub fn org_usage_table(usage: &Value) -> Table {
    let mut rows = vec![scope_row("organization", &usage["organization"])];
    for cluster in usage["clusters"].as_array().into_iter().flatten() {
        rows.push(scope_row(
            &format!("cluster {}", text(&cluster["scope"])),
            cluster,
        ));
    }
    for project in usage["projects"].as_array().into_iter().flatten() {
        rows.push(json!({
            "scope": format!("project {}", text(&project["project"])),
            "cpu_limit": project["quota"]["cpu"], "cpu": project["used"]["cpu"],
            "memory_limit": project["quota"]["memory"], "memory": project["used"]["memory"],
        }));
    }
    Table::rows(
        ["SCOPE", "CPU", "CPU LIMIT", "MEMORY", "MEMORY LIMIT"],
        &Value::Array(rows),
        |row| {
            ["scope", "cpu", "cpu_limit", "memory", "memory_limit"]
                .iter()
                .map(|k| match &row[*k] {
                    Value::Null => "-".to_owned(),
                    v => text(v),
                })
                .collect()
        },
    )
}

fn scope_row(scope: &str, usage: &Value) -> Value {
    json!({
        "scope": scope,
        "cpu_limit": usage["budget"]["cpu"], "cpu": usage["used"]["cpu"],
        "memory_limit": usage["budget"]["memory"], "memory": usage["used"]["memory"],
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn egress_rules_read_with_and_without_ports_for_both_families() {
        assert_eq!(
            egress("10.0.0.0/8:443,5432").unwrap(),
            json!({"cidr": "10.0.0.0/8", "ports": [443, 5432]})
        );
        assert_eq!(
            egress("2001:db8::/32").unwrap(),
            json!({"cidr": "2001:db8::/32", "ports": []})
        );
        assert_eq!(
            egress("2001:db8::/32:443").unwrap(),
            json!({"cidr": "2001:db8::/32", "ports": [443]})
        );
        assert!(egress("10.0.0.0").is_err());
        assert!(egress("10.0.0.0/8:https").is_err());
    }
}
