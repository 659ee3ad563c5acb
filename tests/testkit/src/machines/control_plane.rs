//! The control plane the local machines' kubelets join: etcd, kube-apiserver and
//! kube-controller-manager as host processes, the API server on the bridge's address
//! ([`super::GATEWAY`]), which every machine reaches. No scheduler: a probe places its pods
//! with `nodeName`.

use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Mutex;
use std::time::Duration;

use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::{Client, Config};

use super::GATEWAY;
use crate::cluster::config::{apiserver_command, kubeconfig_yaml, real_node_apiserver_args};
use crate::pki::{NodeCerts, NodeIdentity, Pki};
use crate::process::ManagedProcess;
use crate::{Binaries, Error, Etcd, wait};

const READY_TIMEOUT: Duration = Duration::from_secs(120);

/// A running control plane for the machines.
#[derive(Debug)]
pub struct ControlPlane {
    name: String,
    url: String,
    kubeconfig_yaml: String,
    kubeconfig_path: PathBuf,
    pki: Pki,
    node_certs: Vec<(NodeIdentity, NodeCerts)>,
    processes: Mutex<Vec<ManagedProcess>>,
    _etcd: Etcd,
}

impl ControlPlane {
    /// Starts the control plane of cluster `name` with its files under `dir`, with certificates
    /// for `nodes`, and waits until the API server is ready.
    pub async fn start(
        name: &str,
        bins: &Binaries,
        dir: &Path,
        nodes: &[NodeIdentity],
    ) -> Result<Self, Error> {
        std::fs::create_dir_all(dir).map_err(|e| Error::io("create control-plane dir", e))?;
        let host = IpAddr::V4(GATEWAY);
        let (pki, certs) = Pki::generate_for_nodes(&dir.join("pki"), name, host, nodes)?;
        let etcd = Etcd::start(bins, dir).await?;
        let port = wait::free_port()?;
        let url = format!("https://{host}:{port}");
        let kubeconfig_yaml = kubeconfig_yaml(name, &url, &pki);
        let kubeconfig_path = dir.join("kubeconfig");
        std::fs::write(&kubeconfig_path, &kubeconfig_yaml)
            .map_err(|e| Error::io("write kubeconfig", e))?;
        let plane = Self {
            name: name.to_owned(),
            url,
            kubeconfig_yaml,
            kubeconfig_path,
            node_certs: nodes.iter().cloned().zip(certs).collect(),
            processes: Mutex::new(Vec::new()),
            _etcd: etcd,
            pki,
        };
        let mut apiserver =
            apiserver_command(bins, name, port, plane._etcd.endpoint(), &plane.pki, host);
        real_node_apiserver_args(&mut apiserver, &plane.pki);
        plane.spawn("kube-apiserver", apiserver, dir)?;
        let client = plane.client().await?;
        wait::until(
            "kube-apiserver /readyz",
            READY_TIMEOUT,
            || plane.check_running(),
            || {
                let client = client.clone();
                async move {
                    let request = http::Request::get("/readyz")
                        .body(Vec::new())
                        .map_err(|e| e.to_string())?;
                    client
                        .request_text(request)
                        .await
                        .map(|body| body == "ok")
                        .map_err(|e| e.to_string())
                }
            },
        )
        .await?;
        // Service accounts and their tokens, which every pod needs.
        let mut kcm = Command::new(&bins.kube_controller_manager);
        kcm.arg(format!("--kubeconfig={}", plane.kubeconfig_path.display()))
            .arg("--leader-elect=false")
            .arg("--secure-port=0")
            .arg("--use-service-account-credentials=false")
            .arg(format!("--root-ca-file={}", plane.pki.ca_cert.display()))
            .arg(format!(
                "--service-account-private-key-file={}",
                plane.pki.service_account_key.display()
            ));
        plane.spawn("kube-controller-manager", kcm, dir)?;
        Ok(plane)
    }

    fn spawn(&self, component: &str, command: Command, dir: &Path) -> Result<(), Error> {
        let name = format!("{}/{component}", self.name);
        let process = ManagedProcess::spawn(&name, command, dir.join(format!("{component}.log")))?;
        self.processes
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(process);
        Ok(())
    }

    /// `Err` naming the first of its processes that has exited.
    pub fn check_running(&self) -> Result<(), Error> {
        self.processes
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .iter_mut()
            .try_for_each(ManagedProcess::check_running)
    }

    /// The cluster's name (its kubeconfig's context).
    pub fn name(&self) -> &str {
        &self.name
    }

    /// `https://10.250.0.1:PORT`.
    pub fn url(&self) -> &str {
        &self.url
    }

    pub fn pki(&self) -> &Pki {
        &self.pki
    }

    /// The kubelet certificates of node `name`.
    pub fn node_certs(&self, name: &str) -> Option<&NodeCerts> {
        self.node_certs
            .iter()
            .find(|(identity, _)| identity.name == name)
            .map(|(_, certs)| certs)
    }

    /// An admin kubeconfig.
    pub fn kubeconfig_path(&self) -> &Path {
        &self.kubeconfig_path
    }

    /// A new client with admin rights.
    pub async fn client(&self) -> Result<Client, Error> {
        let kubeconfig = Kubeconfig::from_yaml(&self.kubeconfig_yaml)
            .map_err(|e| Error::Kubeconfig(e.to_string()))?;
        let config = Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default())
            .await
            .map_err(|e| Error::Kubeconfig(e.to_string()))?;
        Ok(Client::try_from(config)?)
    }
}
