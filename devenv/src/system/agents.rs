//! The workload clusters of a system: each registered through the API as a user would, its
//! agent started with the token from the registration response and linked to the hub replicas
//! through a [`TcpProxy`] of its own, so a test can cut or stall that one link.

use std::process::Command;
use std::time::{Duration, Instant};

use anyhow::Context as _;
use kubenest_testkit::{Binaries, Cluster, LinkMode, TcpProxy};
use serde_json::{Value, json};

use super::credentials::write_private;
use super::{SYSTEM_NAMESPACE, Service, System, loopback, repository_root};

/// A registered workload cluster and its agent.
#[derive(Debug)]
pub struct AgentHandle {
    pub cluster: String,
    pub cluster_id: String,
    pub service: Service,
    /// The agent's own link to the hub replicas.
    pub link: TcpProxy,
    /// Its GitOps remote: a bare repository on this machine.
    pub gitops: std::path::PathBuf,
}

impl System {
    /// Extra arguments for the agent of cluster `name`, from its next start (e.g. where its
    /// builds push).
    pub fn set_agent_args(&mut self, name: &str, args: Vec<String>) {
        self.agent_args.insert(name.to_owned(), args);
    }

    /// Registers `cluster` through the API (as a user would), starts its agent with the token
    /// from the registration response, and returns the cluster id. Does not wait for it to
    /// connect ([`wait_connected`](Self::wait_connected)).
    pub async fn register(&mut self, cluster: &Cluster, bins: &Binaries) -> anyhow::Result<String> {
        let mut admin = self.admin().await?;
        let registration = admin
            .post(
                &format!("/api/v1/orgs/{}/clusters", self.options.org),
                &json!({"name": cluster.name()}),
            )
            .await?;
        let cluster_id = registration["cluster_id"]
            .as_str()
            .context("registration without cluster_id")?
            .to_owned();
        let token = registration["connection_token"]
            .as_str()
            .context("registration without connection_token")?;
        self.start_agent(cluster, bins, &cluster_id, token).await?;
        Ok(cluster_id)
    }

    async fn start_agent(
        &mut self,
        cluster: &Cluster,
        bins: &Binaries,
        cluster_id: &str,
        token: &str,
    ) -> anyhow::Result<()> {
        let name = cluster.name().to_owned();
        let home = self.dir.join("agents").join(&name);
        std::fs::create_dir_all(&home)?;
        let token_file = home.join("token");
        write_private(&token_file, token)?;
        let gitops = home.join("gitops.git");
        if !gitops.exists() {
            let status = Command::new("git")
                .args(["init", "--quiet", "--bare", "--initial-branch=main"])
                .arg(&gitops)
                .status()
                .context("git init (the agent's GitOps repository)")?;
            anyhow::ensure!(status.success(), "git init {} failed", gitops.display());
        }
        let link =
            TcpProxy::start("127.0.0.1:0", self.hubs.iter().map(|h| h.address).collect()).await?;
        let mut service = Service::new(&format!("agent-{name}"), &self.programs.agent, &self.dir)
            .traced(self.options.traces_endpoint.as_deref())
            .admin(loopback(kubenest_testkit::free_port()?))
            .arg(format!(
                "--kubeconfig={}",
                std::path::absolute(cluster.kubeconfig_path())?.display()
            ))
            .arg(format!("--hub-url=ws://{}/v1/connect", link.address()))
            .arg(format!("--token-file={}", token_file.display()))
            .arg(format!("--namespace={SYSTEM_NAMESPACE}"))
            .arg(format!(
                "--catalog={}",
                repository_root().join("charts/addons").display()
            ))
            .arg(format!("--helm={}", bins.helm.display()))
            .arg(format!("--gitops-repo={}", gitops.display()))
            .arg(format!("--gitops-workdir={}", home.join("work").display()))
            .arg(format!(
                "--heartbeat-seconds={}",
                self.options.heartbeat_seconds
            ))
            .arg(format!(
                "--backoff-max-seconds={}",
                self.options.backoff_max_seconds
            ))
            .arg(format!(
                "--reconnect-spread-seconds={}",
                self.options.reconnect_spread_seconds
            ))
            .arg("--install-crds");
        for arg in self.agent_args.get(&name).into_iter().flatten() {
            service = service.arg(arg);
        }
        service.start()?;
        self.agents.insert(
            name.clone(),
            AgentHandle {
                cluster: name,
                cluster_id: cluster_id.to_owned(),
                service,
                link,
                gitops,
            },
        );
        Ok(())
    }

    /// Waits until every registered cluster is `connected` and has reported its nodes.
    pub async fn wait_connected(&mut self, timeout: Duration) -> anyhow::Result<()> {
        let deadline = Instant::now() + timeout;
        let mut admin = self.admin().await?;
        let ids: Vec<(String, String)> = self
            .agents
            .values()
            .map(|a| (a.cluster.clone(), a.cluster_id.clone()))
            .collect();
        for (name, id) in ids {
            let mut last = Value::Null;
            loop {
                self.check_running()?;
                if let Ok(cluster) = admin.get(&format!("/api/v1/clusters/{id}")).await {
                    if cluster["state"] == "connected" && cluster["node_count"].as_u64() > Some(0) {
                        break;
                    }
                    last = cluster;
                }
                anyhow::ensure!(
                    Instant::now() < deadline,
                    "cluster {name} did not connect within {timeout:?}; last seen: {last}"
                );
                tokio::time::sleep(Duration::from_millis(250)).await;
            }
        }
        Ok(())
    }

    /// The agent of workload cluster `name`.
    pub fn agent(&mut self, name: &str) -> anyhow::Result<&mut AgentHandle> {
        self.agents
            .get_mut(name)
            .with_context(|| format!("no agent for cluster {name}"))
    }

    /// Cuts (`Drop`), stalls or restores the link between cluster `name`'s agent and the hub.
    pub fn set_link(&mut self, name: &str, mode: LinkMode) -> anyhow::Result<()> {
        self.agent(name)?.link.set_mode(mode);
        Ok(())
    }
}
