//! One etcd shared by every cluster of an environment; each API server keeps its objects under
//! its own `--etcd-prefix`, so the clusters are independent.

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use crate::process::ManagedProcess;
use crate::{Binaries, Error, wait};

/// A running etcd.
#[derive(Debug)]
pub struct Etcd {
    process: ManagedProcess,
    endpoint: String,
}

impl Etcd {
    /// Starts etcd with its data under `dir` and waits until it is healthy.
    pub async fn start(bins: &Binaries, dir: &Path) -> Result<Self, Error> {
        let client = wait::free_port()?;
        let peer = wait::free_port()?;
        let endpoint = format!("http://127.0.0.1:{client}");
        let peer_url = format!("http://127.0.0.1:{peer}");
        let data = dir.join("etcd-data");
        let mut cmd = Command::new(&bins.etcd);
        cmd.arg("--name=kubenest")
            .arg(format!("--data-dir={}", data.display()))
            .arg(format!("--listen-client-urls={endpoint}"))
            .arg(format!("--advertise-client-urls={endpoint}"))
            .arg(format!("--listen-peer-urls={peer_url}"))
            .arg(format!("--initial-advertise-peer-urls={peer_url}"))
            .arg(format!("--initial-cluster=kubenest={peer_url}"))
            // Throwaway data: durability buys nothing and fsync costs seconds on a busy disk.
            .arg("--unsafe-no-fsync")
            .arg("--auto-compaction-retention=1")
            .arg("--quota-backend-bytes=4294967296")
            .arg("--log-level=warn");
        let mut process = ManagedProcess::spawn("etcd", cmd, dir.join("etcd.log"))?;
        let http = reqwest::Client::new();
        let health = format!("{endpoint}/health");
        wait::until(
            "etcd to be healthy",
            Duration::from_secs(30),
            || process.check_running(),
            || {
                let request = http.get(&health).send();
                async move {
                    let response = request.await.map_err(|e| e.to_string())?;
                    Ok(response.status().is_success())
                }
            },
        )
        .await?;
        Ok(Self { process, endpoint })
    }

    /// `http://127.0.0.1:PORT`.
    pub fn endpoint(&self) -> &str {
        &self.endpoint
    }

    /// The etcd process.
    pub fn process(&self) -> &ManagedProcess {
        &self.process
    }
}
