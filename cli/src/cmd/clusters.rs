//! `kubenest clusters`.

use clap::Subcommand;
use kubenest_api::clusters::{
    ClusterResponse, NewClusterBody, RegistrationResponse, RotationResponse, ScaleBody,
};
use kubenest_api::fences::BudgetBody;
use kubenest_api::removal::RemovalResponse;

use super::{Global, Table, by_name, cell, is_id, json_of, opt};
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
    let clusters: Vec<ClusterResponse> = client
        .get_as(&format!("/api/v1/orgs/{org}/clusters"))
        .await?;
    let found = by_name(
        &clusters,
        cluster,
        "cluster",
        &format!("organization {org}"),
    )?;
    Ok(found.id.clone())
}

pub async fn run(global: &Global, command: ClustersCommand) -> anyhow::Result<()> {
    let mut client = global.client()?;
    match command {
        ClustersCommand::Register { name, display_name } => {
            let org = global.org(&mut client).await?;
            let body = NewClusterBody { name, display_name };
            let registration: RegistrationResponse = client
                .post_as(&format!("/api/v1/orgs/{org}/clusters"), &body)
                .await?;
            global.print(&registration, |r| {
                registration_table(
                    &r.cluster_id,
                    r.token_version,
                    &r.connection_token,
                    &r.helm_install_command,
                )
            });
        }
        ClustersCommand::List => {
            let org = global.org(&mut client).await?;
            let clusters: Vec<ClusterResponse> = client
                .get_as(&format!("/api/v1/orgs/{org}/clusters"))
                .await?;
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
                            cell(&c.name),
                            cell(&c.id),
                            cell(&c.state),
                            c.node_count.to_string(),
                            cpu(c),
                            memory(c),
                            opt(&c.last_heartbeat),
                        ]
                    },
                )
            });
        }
        ClustersCommand::Get { cluster } => {
            let id = resolve(global, &mut client, &cluster).await?;
            let cluster: ClusterResponse = client.get_as(&format!("/api/v1/clusters/{id}")).await?;
            global.print(&cluster, cluster_table);
        }
        ClustersCommand::RotateToken { cluster } => {
            let id = resolve(global, &mut client, &cluster).await?;
            let rotation: RotationResponse = client
                .post_as(
                    &format!("/api/v1/clusters/{id}/rotate-token"),
                    &serde_json::Map::new(),
                )
                .await?;
            global.print(&rotation, |r| {
                registration_table(
                    &r.cluster_id,
                    r.token_version,
                    &r.connection_token,
                    &r.helm_install_command,
                )
            });
        }
        ClustersCommand::Budget { cluster, budget } => {
            let id = resolve(global, &mut client, &cluster).await?;
            let answer: Option<BudgetBody> = client
                .put_as(&format!("/api/v1/clusters/{id}/budget"), &budget.body())
                .await?;
            global.done(
                &answer,
                &format!("cluster {cluster}'s budget: {}", json_of(&answer)),
            );
        }
        ClustersCommand::Scale { cluster, nodes } => {
            let id = resolve(global, &mut client, &cluster).await?;
            let answer: ClusterResponse = client
                .post_as(
                    &format!("/api/v1/clusters/{id}/scale"),
                    &ScaleBody {
                        desired_node_count: nodes,
                    },
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
            let answer: RemovalResponse = client.delete_as(&path).await?;
            global.done(&answer, &super::removal_message(&answer, &head));
        }
    }
    Ok(())
}

fn cpu(cluster: &ClusterResponse) -> String {
    format!("{:.1}/{:.1}", cluster.cpu_used, cluster.cpu_total)
}

fn memory(cluster: &ClusterResponse) -> String {
    let gib = |bytes: u64| bytes as f64 / (1u64 << 30) as f64;
    format!(
        "{:.1}/{:.1}Gi",
        gib(cluster.mem_used),
        gib(cluster.mem_total)
    )
}

/// A registration's or a rotation's token and install command.
fn registration_table(
    cluster_id: &str,
    token_version: u64,
    connection_token: &str,
    helm_install_command: &str,
) -> Table {
    Table::fields(&[
        ("Cluster id", cell(cluster_id)),
        ("Token version", token_version.to_string()),
        ("Connection token", cell(connection_token)),
        ("Install the agent", cell(helm_install_command)),
    ])
}

fn cluster_table(cluster: &ClusterResponse) -> Table {
    let mut table = Table::fields(&[
        ("Name", cell(&cluster.name)),
        ("Id", cell(&cluster.id)),
        ("Organization", cell(&cluster.org)),
        ("State", cell(&cluster.state)),
        ("Provider", cell(&cluster.provider)),
        ("Nodes", cluster.node_count.to_string()),
        ("CPU (used/total cores)", cpu(cluster)),
        ("Memory (used/total)", memory(cluster)),
        ("Kubernetes", opt(&cluster.kubernetes_version)),
        ("Agent", opt(&cluster.agent_version)),
        ("Token version", cluster.token_version.to_string()),
        ("Last heartbeat", opt(&cluster.last_heartbeat)),
    ]);
    for check in &cluster.health {
        table.push(vec![
            format!("Health {}:", cell(&check.name)),
            format!("{} {}", cell(&check.status), cell(&check.message)),
        ]);
    }
    table
}
