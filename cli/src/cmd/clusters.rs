//! `kubenest clusters`.

use clap::Subcommand;
use serde_json::{Value, json};

use super::{Global, Table, by_name, is_id, text};
use crate::api;

#[derive(Debug, Subcommand)]
pub enum ClustersCommand {
    /// Register a cluster; prints its id, the connection token and the agent's install command.
    Register {
        name: String,
        #[arg(long)]
        display_name: Option<String>,
    },
    /// The organization's clusters.
    List,
    /// One cluster: state, capacity, health.
    Get { cluster: String },
    /// Mint a new connection token; the agent's current session is cut.
    RotateToken { cluster: String },
    /// Set the CPU and memory requests the cluster's projects may hold in all (organization
    /// admins); neither amount: no budget.
    Budget {
        cluster: String,
        #[command(flatten)]
        budget: super::fences::BudgetArgs,
    },
    /// Change the node count of a cluster kubenest installed (organization admins); a
    /// registered cluster's nodes are its owner's to change, and the API says so.
    Scale {
        cluster: String,
        /// The node count to reach.
        #[arg(long)]
        nodes: u32,
    },
    /// Delete a cluster (refused while projects use it).
    Delete {
        cluster: String,
        /// Admins: remove the cluster and every project, App and addon on it from kubenest
        /// now, without its agent (for a cluster that will not come back); prints what may be
        /// left on it.
        #[arg(long)]
        force: bool,
    },
}

/// The id of `cluster` (an id, or a name in the organization).
pub async fn resolve(
    global: &Global,
    client: &mut api::Client,
    cluster: &str,
) -> anyhow::Result<String> {
    if is_id(cluster) {
        return Ok(cluster.to_owned());
    }
    let org = global.org(client).await?;
    let clusters = client.get(&format!("/api/v1/orgs/{org}/clusters")).await?;
    let found = by_name(
        &clusters,
        cluster,
        "cluster",
        &format!("organization {org}"),
    )?;
    Ok(text(&found["id"]))
}

pub async fn run(global: &Global, command: ClustersCommand) -> anyhow::Result<()> {
    let mut client = global.client()?;
    match command {
        ClustersCommand::Register { name, display_name } => {
            let org = global.org(&mut client).await?;
            let mut body = json!({"name": name});
            if let Some(display) = display_name {
                body["display_name"] = json!(display);
            }
            let registration = client
                .post(&format!("/api/v1/orgs/{org}/clusters"), &body)
                .await?;
            global.print(&registration, registration_table);
        }
        ClustersCommand::List => {
            let org = global.org(&mut client).await?;
            let clusters = client.get(&format!("/api/v1/orgs/{org}/clusters")).await?;
            global.print(&clusters, |clusters| {
                Table::rows(
                    [
                        "NAME",
                        "ID",
                        "STATE",
                        "NODES",
                        "CPU",
                        "MEMORY",
                        "LAST HEARTBEAT",
                    ],
                    clusters,
                    |c| {
                        vec![
                            text(&c["name"]),
                            text(&c["id"]),
                            text(&c["state"]),
                            text(&c["node_count"]),
                            cpu(c),
                            memory(c),
                            text(&c["last_heartbeat"]),
                        ]
                    },
                )
            });
        }
        ClustersCommand::Get { cluster } => {
            let id = resolve(global, &mut client, &cluster).await?;
            let cluster = client.get(&format!("/api/v1/clusters/{id}")).await?;
            global.print(&cluster, cluster_table);
        }
        ClustersCommand::RotateToken { cluster } => {
            let id = resolve(global, &mut client, &cluster).await?;
            let rotation = client
                .post(&format!("/api/v1/clusters/{id}/rotate-token"), &json!({}))
                .await?;
            global.print(&rotation, registration_table);
        }
        ClustersCommand::Budget { cluster, budget } => {
            let id = resolve(global, &mut client, &cluster).await?;
            let answer = client
                .call(
                    reqwest::Method::PUT,
                    &format!("/api/v1/clusters/{id}/budget"),
                    Some(&budget.body()),
                )
                .await?;
            global.done(&answer, &format!("cluster {cluster}'s budget: {answer}"));
        }
        ClustersCommand::Scale { cluster, nodes } => {
            let id = resolve(global, &mut client, &cluster).await?;
            let answer = client
                .post(
                    &format!("/api/v1/clusters/{id}/scale"),
                    &json!({"desired_node_count": nodes}),
                )
                .await?;
            global.done(
                &answer,
                &format!("cluster {cluster} scaling to {nodes} nodes"),
            );
        }
        ClustersCommand::Delete { cluster, force } => {
            let id = resolve(global, &mut client, &cluster).await?;
            let (path, head) = if force {
                (
                    format!("/api/v1/clusters/{id}?force=true"),
                    format!("cluster {cluster} removed from kubenest"),
                )
            } else {
                (
                    format!("/api/v1/clusters/{id}"),
                    format!("cluster {cluster} deleted"),
                )
            };
            let answer = client.delete(&path).await?;
            global.done(&answer, &super::removal_message(&answer, &head));
        }
    }
    Ok(())
}

fn cpu(cluster: &Value) -> String {
    format!(
        "{:.1}/{:.1}",
        cluster["cpu_used"].as_f64().unwrap_or(0.0),
        cluster["cpu_total"].as_f64().unwrap_or(0.0)
    )
}

fn memory(cluster: &Value) -> String {
    let gib = |v: &Value| v.as_f64().unwrap_or(0.0) / (1u64 << 30) as f64;
    format!(
        "{:.1}/{:.1}Gi",
        gib(&cluster["mem_used"]),
        gib(&cluster["mem_total"])
    )
}

fn registration_table(registration: &Value) -> Table {
    Table::fields(&[
        ("Cluster id", text(&registration["cluster_id"])),
        ("Token version", text(&registration["token_version"])),
        ("Connection token", text(&registration["connection_token"])),
        (
            "Install the agent",
            text(&registration["helm_install_command"]),
        ),
    ])
}

fn cluster_table(cluster: &Value) -> Table {
    let mut table = Table::fields(&[
        ("Name", text(&cluster["name"])),
        ("Id", text(&cluster["id"])),
        ("Organization", text(&cluster["org"])),
        ("State", text(&cluster["state"])),
        ("Provider", text(&cluster["provider"])),
        ("Nodes", text(&cluster["node_count"])),
        ("CPU (used/total cores)", cpu(cluster)),
        ("Memory (used/total)", memory(cluster)),
        ("Kubernetes", text(&cluster["kubernetes_version"])),
        ("Agent", text(&cluster["agent_version"])),
        ("Token version", text(&cluster["token_version"])),
        ("Last heartbeat", text(&cluster["last_heartbeat"])),
    ]);
    for check in cluster["health"].as_array().into_iter().flatten() {
        table.push(vec![
            format!("Health {}:", text(&check["name"])),
            format!("{} {}", text(&check["status"]), text(&check["message"])),
        ]);
    }
    table
}
