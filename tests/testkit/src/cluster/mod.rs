//! One Kubernetes cluster made of real upstream processes on loopback.
//!
//! A management cluster is kube-apiserver + kube-controller-manager (namespaces, garbage
//! collection, service accounts). A workload cluster adds kube-scheduler and kwok, which plays
//! the kubelet for fake nodes so Deployments get Ready pods. A real-node cluster has instead one
//! real node ([`crate::node`]): containerd, a kubelet, kube-proxy and CoreDNS, where pods really
//! run; its API server serves on the node's bridge address, which pods reach.

use std::net::{IpAddr, Ipv4Addr};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Mutex;
use std::time::Duration;

use k8s_openapi::api::core::v1::{Namespace, ServiceAccount};
use kube::api::{Api, PostParams};
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::{Client, Config};
use serde_json::json;

pub(crate) mod config;
mod kwok;

use config::{apiserver_command, kubeconfig_yaml, real_node_apiserver_args};

use crate::namespace::TestNamespace;
use crate::node::RealNode;
use crate::pki::{Pki, WebhookClient};
use crate::process::{ManagedProcess, tail};
use crate::{Binaries, Error, wait};

/// How long a component may take to become ready on a busy two-core machine.
const READY_TIMEOUT: Duration = Duration::from_secs(120);

/// The fake nodes of a workload cluster.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodePool {
    pub count: u32,
    /// Allocatable CPU per node, as a Kubernetes quantity (`"4"`, `"500m"`).
    pub cpu: String,
    /// Allocatable memory per node, as a Kubernetes quantity (`"8Gi"`).
    pub memory: String,
    pub max_pods: u32,
}

impl Default for NodePool {
    fn default() -> Self {
        Self {
            count: 2,
            cpu: "4".into(),
            memory: "8Gi".into(),
            max_pods: 110,
        }
    }
}

/// What a cluster is for, which decides the processes it runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ClusterRole {
    /// API server and controller manager: enough for CRDs, RBAC, namespaces and GC.
    Management,
    /// Also a scheduler and kwok with these fake nodes.
    Workload(NodePool),
    /// Also a scheduler and one real node where pods run (root only; one per machine).
    RealNode,
}

impl ClusterRole {
    /// True for the roles that run pods (on fake or real nodes).
    pub fn is_workload(&self) -> bool {
        matches!(self, Self::Workload(_) | Self::RealNode)
    }
}

/// A running cluster.
#[derive(Debug)]
pub struct Cluster {
    name: String,
    role: ClusterRole,
    url: String,
    kubeconfig_path: PathBuf,
    kubeconfig_yaml: String,
    processes: Mutex<Vec<ManagedProcess>>,
    node: Option<RealNode>,
    webhook_client: WebhookClient,
}

impl Cluster {
    /// Starts the cluster's processes against `etcd`, with its files under `dir`, and waits until
    /// it serves (and for a workload cluster, until its nodes are Ready).
    pub async fn start(
        name: &str,
        role: ClusterRole,
        bins: &Binaries,
        etcd: &str,
        dir: &Path,
    ) -> Result<Self, Error> {
        std::fs::create_dir_all(dir).map_err(|e| Error::io("create cluster dir", e))?;
        let node = match role {
            ClusterRole::RealNode => Some(RealNode::prepare(name, bins, dir).await?),
            _ => None,
        };
        let identity = node.as_ref().map(RealNode::identity);
        let pki = Pki::generate_for(&dir.join("pki"), name, identity.as_ref())?;
        let port = wait::free_port()?;
        // A real node's pods reach the API server on the node's address; kwok's pods need none.
        let host = identity.map_or(IpAddr::V4(Ipv4Addr::LOCALHOST), |n| n.ip);
        let url = format!("https://{host}:{port}");
        let kubeconfig_yaml = kubeconfig_yaml(name, &url, &pki);
        let kubeconfig_path = dir.join("kubeconfig");
        std::fs::write(&kubeconfig_path, &kubeconfig_yaml)
            .map_err(|e| Error::io("write kubeconfig", e))?;

        let cluster = Self {
            name: name.to_owned(),
            role,
            url,
            kubeconfig_path,
            kubeconfig_yaml,
            processes: Mutex::new(Vec::new()),
            node,
            webhook_client: pki.webhook_client.clone(),
        };
        match cluster.boot(bins, etcd, dir, &pki, port, host).await {
            Ok(()) => {
                tracing::info!(cluster = name, url = %cluster.url, "cluster ready");
                Ok(cluster)
            }
            Err(source) => Err(Error::ClusterStart {
                name: name.to_owned(),
                source: Box::new(source),
                logs: cluster.log_tails(30),
            }),
        }
    }

    async fn boot(
        &self,
        bins: &Binaries,
        etcd: &str,
        dir: &Path,
        pki: &Pki,
        port: u16,
        host: IpAddr,
    ) -> Result<(), Error> {
        let name = self.name.as_str();
        let mut apiserver = apiserver_command(bins, name, port, etcd, pki, host);
        if self.node.is_some() {
            real_node_apiserver_args(&mut apiserver, pki);
        } else if matches!(self.role, ClusterRole::Workload(_)) {
            // Pod logs come from kwok, which serves them at the fake nodes' InternalIP.
            apiserver.arg("--kubelet-preferred-address-types=InternalIP");
        }
        self.spawn("kube-apiserver", apiserver, dir)?;
        let client = self.client().await?;
        self.wait_until_ready("kube-apiserver /readyz", || {
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
        })
        .await?;

        let mut kcm = Command::new(&bins.kube_controller_manager);
        kcm.arg(format!("--kubeconfig={}", self.kubeconfig_path.display()))
            .arg("--leader-elect=false")
            .arg("--secure-port=0")
            .arg("--use-service-account-credentials=false")
            .arg(format!("--root-ca-file={}", pki.ca_cert.display()))
            .arg(format!(
                "--service-account-private-key-file={}",
                pki.service_account_key.display()
            ))
            .arg("--concurrent-gc-syncs=5")
            // The default 20 requests/s makes hundreds of Deployments a minute's work; a loopback
            // API server takes far more.
            .args(["--kube-api-qps=200", "--kube-api-burst=400"]);
        self.spawn("kube-controller-manager", kcm, dir)?;

        if self.role.is_workload() {
            let mut scheduler = Command::new(&bins.kube_scheduler);
            scheduler
                .arg(format!("--kubeconfig={}", self.kubeconfig_path.display()))
                .arg("--leader-elect=false")
                .arg("--secure-port=0")
                .args(["--kube-api-qps=200", "--kube-api-burst=400"]);
            self.spawn("kube-scheduler", scheduler, dir)?;
        }
        if let Some(node) = &self.node {
            node.join(&client, &self.url, pki, &self.kubeconfig_path)
                .await?;
        }
        if let ClusterRole::Workload(pool) = &self.role {
            self.start_kwok(bins, dir, pki)?;
            self.create_nodes(&client, pool).await?;
        }

        // The default service account appears once the controller manager works; pods need it.
        let accounts: Api<ServiceAccount> = Api::namespaced(client, "default");
        self.wait_until_ready("the default service account", || {
            let accounts = accounts.clone();
            async move {
                accounts
                    .get_opt("default")
                    .await
                    .map(|sa| sa.is_some())
                    .map_err(|e| e.to_string())
            }
        })
        .await
    }

    fn spawn(&self, component: &str, command: Command, dir: &Path) -> Result<(), Error> {
        let name = format!("{}/{component}", self.name);
        let process = ManagedProcess::spawn(&name, command, dir.join(format!("{component}.log")))?;
        self.lock().push(process);
        Ok(())
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<ManagedProcess>> {
        // A poisoned lock only means a panic elsewhere; the process list is still valid.
        self.processes.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// `Err` naming the first of the cluster's processes that has exited.
    pub fn check_running(&self) -> Result<(), Error> {
        self.lock()
            .iter_mut()
            .try_for_each(ManagedProcess::check_running)?;
        self.node.as_ref().map_or(Ok(()), RealNode::check_running)
    }

    async fn wait_until_ready<C, F>(&self, what: &str, check: C) -> Result<(), Error>
    where
        C: FnMut() -> F,
        F: Future<Output = Result<bool, String>>,
    {
        let what = format!("{what} on cluster {}", self.name);
        wait::until(&what, READY_TIMEOUT, || self.check_running(), check).await
    }

    /// The cluster's name (also its kubeconfig context).
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Management or workload, with the node pool.
    pub fn role(&self) -> &ClusterRole {
        &self.role
    }

    /// The API server's URL.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// The host's address as this cluster's pods see it (the real node's bridge gateway), for
    /// servers a test runs on the host (hub, PostgreSQL): they must listen on this address (or
    /// put a [`crate::TcpProxy`] on it), since a pod cannot reach the host's loopback. `None`
    /// for clusters without a real node.
    pub fn pod_reachable_host(&self) -> Option<IpAddr> {
        self.node.as_ref().map(|n| n.identity().ip)
    }

    /// Imports an OCI archive into the real node's containerd (namespace `k8s.io`), so pods
    /// can run its image with `imagePullPolicy: Never` or `IfNotPresent`. Errs on a cluster
    /// without a real node.
    pub async fn import_image(&self, archive: &Path) -> Result<(), Error> {
        match &self.node {
            Some(node) => node.import_image(archive).await,
            None => Err(Error::ImageImport {
                archive: archive.to_owned(),
                reason: format!("cluster {} has no real node", self.name),
            }),
        }
    }

    /// Gives the real node's kubelet registry credentials (a Docker `config.json`) for every
    /// pull, as nodes of a cluster that pulls from a private registry have them. Errs on a
    /// cluster without a real node.
    pub fn pull_credentials(&self, docker_config_json: &str) -> Result<(), Error> {
        match &self.node {
            Some(node) => node.pull_credentials(docker_config_json),
            None => Err(Error::Process(format!(
                "cluster {} has no real node to give credentials to",
                self.name
            ))),
        }
    }

    /// Lets the real node pull from the registry at `address` over HTTPS, trusting CA file `ca`
    /// (credentials come from the pods' image pull Secrets). Errs on a cluster without one.
    pub fn trust_registry(&self, address: &str, ca: &Path) -> Result<(), Error> {
        match &self.node {
            Some(node) => node.trust_registry(address, ca),
            None => Err(Error::Process(format!(
                "cluster {} has no real node to trust a registry on",
                self.name
            ))),
        }
    }

    /// Tags an imported image `source` as `target` on the real node (a new tag of the same
    /// content, for tests that change an App's image). Errs on a cluster without a real node.
    pub async fn tag_image(&self, source: &str, target: &str) -> Result<(), Error> {
        match &self.node {
            Some(node) => node.tag_image(source, target).await,
            None => Err(Error::Process(format!(
                "cluster {} has no real node to tag {source} on",
                self.name
            ))),
        }
    }

    /// The client certificate this cluster's API server presents to admission webhooks, and
    /// the CA a webhook verifies it with.
    pub fn webhook_client(&self) -> &WebhookClient {
        &self.webhook_client
    }

    /// An admin kubeconfig (client certificate in `system:masters`) for kubectl and clients.
    pub fn kubeconfig_path(&self) -> &Path {
        &self.kubeconfig_path
    }

    /// A new client with admin rights. Each test (each tokio runtime) should make its own.
    pub async fn client(&self) -> Result<Client, Error> {
        let kubeconfig = Kubeconfig::from_yaml(&self.kubeconfig_yaml)
            .map_err(|e| Error::Kubeconfig(e.to_string()))?;
        let config = Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default())
            .await
            .map_err(|e| Error::Kubeconfig(e.to_string()))?;
        Ok(Client::try_from(config)?)
    }

    /// Creates a namespace named `{prefix}-{random}` for one test.
    pub async fn test_namespace(&self, prefix: &str) -> Result<TestNamespace<'_>, Error> {
        let client = self.client().await?;
        let suffix = uuid::Uuid::new_v4().simple().to_string();
        let name = format!("{prefix}-{}", &suffix[..8]);
        let namespace: Namespace = serde_json::from_value(json!({
            "metadata": { "name": name, "labels": { "kubenest.io/test": "true" } }
        }))
        .map_err(|e| Error::Process(format!("namespace manifest: {e}")))?;
        Api::<Namespace>::all(client.clone())
            .create(&PostParams::default(), &namespace)
            .await?;
        Ok(TestNamespace::new(name, client, self))
    }

    /// Process ids of every process of this cluster.
    pub fn pids(&self) -> Vec<u32> {
        let mut pids: Vec<u32> = self.lock().iter().map(ManagedProcess::pid).collect();
        if let Some(node) = &self.node {
            pids.extend(node.processes(ManagedProcess::pid));
        }
        pids
    }

    /// Resident memory per process (name, bytes).
    pub fn resident_memory(&self) -> Vec<(String, u64)> {
        let measure = |p: &ManagedProcess| (p.name().to_owned(), p.resident_bytes());
        let mut all: Vec<(String, u64)> = self.lock().iter().map(measure).collect();
        if let Some(node) = &self.node {
            all.extend(node.processes(measure));
        }
        all
    }

    /// The last `lines` lines of every process log of this cluster, for a failure report.
    pub fn log_tails(&self, lines: usize) -> String {
        let show = |p: &ManagedProcess| {
            format!(
                "----- {} ({}) -----\n{}\n",
                p.name(),
                p.log_path().display(),
                tail(p.log_path(), lines)
            )
        };
        let mut text: String = self.lock().iter().map(show).collect();
        if let Some(node) = &self.node {
            text.extend(node.processes(show));
            text.push_str(&format!(
                "----- {}/node-guard -----\n{}\n",
                self.name,
                node.guard_log_tail(lines)
            ));
        }
        text
    }

    /// Asks every process of the cluster to exit, without waiting.
    pub fn terminate(&self) {
        if let Some(node) = &self.node {
            node.terminate();
        }
        self.lock().iter().for_each(ManagedProcess::terminate);
    }

    /// Stops every process of the cluster: all are asked at once, then each is waited for. A
    /// real node goes first (while its API server still answers) and cleans the host.
    pub fn stop(&self) {
        if let Some(node) = &self.node {
            node.stop();
        }
        let mut processes = self.lock();
        processes.iter().for_each(ManagedProcess::terminate);
        while let Some(mut p) = processes.pop() {
            p.stop();
        }
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        self.stop();
    }
}
