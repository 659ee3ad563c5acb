//! The kwok side of a workload cluster: kwok plays the kubelets of fake nodes (their pods run
//! through kwok's stages) and serves their pods' logs from one file tests append to.

use std::path::Path;
use std::process::Command;

use k8s_openapi::api::core::v1::Node;
use kube::Client;
use kube::api::{Api, ListParams, PostParams};
use serde_json::json;

use super::config::node_is_ready;
use super::{Cluster, ClusterRole, NodePool};
use crate::pki::Pki;
use crate::{Binaries, Error, wait};

impl Cluster {
    /// Starts kwok for this cluster's fake nodes.
    pub(super) fn start_kwok(&self, bins: &Binaries, dir: &Path, pki: &Pki) -> Result<(), Error> {
        // kwok plays the kubelet's server too: the API server reaches it for pod logs at
        // the nodes' InternalIP (loopback) and port, over TLS (the cluster's serving pair).
        let kwok_port = wait::free_port()?;
        let logs_config = write_kwok_logs(dir)?;
        let mut kwok = Command::new(&bins.kwok);
        kwok.arg(format!("--kubeconfig={}", self.kubeconfig_path.display()))
            .arg(format!("--config={}", bins.kwok_stages.display()))
            .arg(format!("--config={}", logs_config.display()))
            .arg("--manage-all-nodes=false")
            .arg("--manage-nodes-with-annotation-selector=kwok.x-k8s.io/node=fake")
            .arg("--cidr=10.244.0.0/16")
            .arg("--node-ip=127.0.0.1")
            .arg(format!("--node-port={kwok_port}"))
            .arg("--node-lease-duration-seconds=40")
            .arg(format!("--tls-cert-file={}", pki.serving_cert.display()))
            .arg(format!(
                "--tls-private-key-file={}",
                pki.serving_key.display()
            ))
            .arg(format!("--server-address=127.0.0.1:{kwok_port}"));
        self.spawn("kwok", kwok, dir)?;
        Ok(())
    }

    /// Creates the pool's fake nodes and waits until kwok reports them Ready.
    pub(super) async fn create_nodes(&self, client: &Client, pool: &NodePool) -> Result<(), Error> {
        let nodes: Api<Node> = Api::all(client.clone());
        for i in 0..pool.count {
            let name = format!("{}-node-{i}", self.name);
            let resources = json!({
                "cpu": pool.cpu, "memory": pool.memory, "pods": pool.max_pods.to_string()
            });
            let node: Node = serde_json::from_value(json!({
                "apiVersion": "v1",
                "kind": "Node",
                "metadata": {
                    "name": name,
                    "annotations": {
                        "kwok.x-k8s.io/node": "fake",
                        "node.alpha.kubernetes.io/ttl": "0"
                    },
                    "labels": {
                        "kubernetes.io/hostname": name,
                        "kubernetes.io/os": "linux",
                        "kubernetes.io/arch": "amd64",
                        "type": "kwok"
                    }
                },
                "status": {
                    "allocatable": resources,
                    "capacity": resources,
                    "nodeInfo": {
                        "architecture": "amd64",
                        "operatingSystem": "linux",
                        "kubeletVersion": "kwok",
                        "kubeProxyVersion": "kwok"
                    }
                }
            }))
            .map_err(|e| Error::Process(format!("node manifest: {e}")))?;
            nodes.create(&PostParams::default(), &node).await?;
        }
        let expected = pool.count as usize;
        self.wait_until_ready("kwok nodes to be Ready", || {
            let nodes = nodes.clone();
            async move {
                let list = nodes
                    .list(&ListParams::default())
                    .await
                    .map_err(|e| e.to_string())?;
                let ready = list.items.iter().filter(|n| node_is_ready(n)).count();
                if ready >= expected {
                    Ok(true)
                } else {
                    Err(format!("{ready}/{expected} Ready"))
                }
            }
        })
        .await
    }

    /// A kwok cluster's container log ([`KWOK_LOG_FILE`]): append CRI-format lines
    /// (`<RFC 3339> stdout F <text>`) and every kwok container's log shows them.
    pub fn kwok_log_file(&self) -> Option<std::path::PathBuf> {
        let is_kwok = self.node.is_none() && matches!(self.role, ClusterRole::Workload(_));
        is_kwok.then(|| {
            self.kubeconfig_path
                .parent()
                .unwrap_or(Path::new("."))
                .join(KWOK_LOG_FILE)
        })
    }
}

/// The log every kwok container has (kwok's ClusterLogs, in CRI log format), followed; returns
/// the config file. Tests append lines to [`KWOK_LOG_FILE`] in the cluster's directory.
fn write_kwok_logs(dir: &Path) -> Result<std::path::PathBuf, Error> {
    let log_file = dir.join(KWOK_LOG_FILE);
    if !log_file.exists() {
        std::fs::write(
            &log_file,
            "2026-01-01T00:00:00.000000000Z stdout F kwok: container started\n",
        )
        .map_err(|e| Error::io("write kwok log", e))?;
    }
    let config = dir.join("kwok-logs.yaml");
    let yaml = format!(
        "apiVersion: kwok.x-k8s.io/v1alpha1\nkind: ClusterLogs\nmetadata:\n  name: every-pod\n\
         spec:\n  selector: {{}}\n  logs:\n  - containers: []\n    logsFile: {}\n    follow: true\n",
        log_file.display()
    );
    std::fs::write(&config, yaml).map_err(|e| Error::io("write kwok logs config", e))?;
    Ok(config)
}

/// The file (in a workload cluster's directory) every kwok container's log is read from.
pub const KWOK_LOG_FILE: &str = "kwok-pods.log";
