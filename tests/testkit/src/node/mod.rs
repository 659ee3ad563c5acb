//! A real node for a workload cluster: containerd + runc with CNI bridge networking, a kubelet
//! joined to the cluster's API server, kube-proxy (nftables), NetworkPolicy enforcement
//! (kube-network-policies, [`netpol`]), CoreDNS, storage and ingress, all as host processes.
//!
//! Pods really run here: their images come from OCI archives imported into containerd
//! ([`crate::Cluster::import_image`]; no registry is reachable), their sandbox image is the
//! kit's own (tools/build-pause.sh).
//!
//! The network: a bridge [`config::BRIDGE`] on [`config::SUBNET`], created before anything
//! starts; its gateway [`config::GATEWAY`] is the host as pods see it. The API server, the
//! kubelet and CoreDNS serve on that address; a test's own servers (hub, PostgreSQL) must too
//! (or a [`crate::TcpProxy`] bound to it), since loopback is not reachable from a pod.
//!
//! One real node per machine: the bridge and its subnet are the host's. A guard process holds
//! the lock file [`host::LOCK_FILE`] for the node's life (a second start fails naming the
//! holder) and, when the node ends however it ends (stop, drop, the test binary killed), kills
//! the pods' containers, unmounts their mounts, removes the nftables tables of kube-proxy and
//! kube-network-policies, the CNI plugins' iptables rules of its network (told by their
//! comment), conntrack entries, the bridge and the node's runtime files under
//! [`host::STATE_DIR`] — only what the node made, so another cluster on the same machine (a
//! laptop's k3s or kind) keeps its rules.

pub(crate) mod config;
pub(crate) mod host;
mod ingress;
mod netpol;

use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Mutex;
use std::time::Duration;

use k8s_openapi::api::core::v1::Node;
use kube::Api;

pub use config::{BRIDGE, GATEWAY, SUBNET};
pub use host::{LOCK_FILE, NodeBinaries, STATE_DIR};
pub use ingress::{INGRESS_CLASS, INGRESS_HTTP_PORT, INGRESS_HTTPS_PORT};
pub use netpol::NFT_TABLE as NETWORK_POLICY_TABLE;

use crate::pki::{NodeIdentity, Pki};
use crate::process::{ManagedProcess, tail};
use crate::{Binaries, Error, wait};
use config::Layout;
use host::{Guard, run, unavailable};

/// How long the node may take to register and become Ready on a busy machine.
const READY_TIMEOUT: Duration = Duration::from_secs(180);

/// The node side of a real-node cluster.
#[derive(Debug)]
pub struct RealNode {
    cluster: String,
    bins: NodeBinaries,
    layout: Layout,
    logs: PathBuf,
    state: Mutex<State>,
    /// This process's turn on the machine's one real node, released after the node stops
    /// (fields drop after [`Drop::drop`]).
    _turn: tokio::sync::OwnedMutexGuard<()>,
}

/// Takes the machine-wide lock. A node that is stopping (its process just exited, its guard still
/// cleaning up) holds it for up to the guard's cleanup time, so a busy lock is tried again for
/// that long before the start fails naming the holder.
async fn acquire(config_dir: PathBuf, log: PathBuf) -> Result<Guard, Error> {
    let deadline = std::time::Instant::now() + host::CLEANUP_TIMEOUT;
    loop {
        let (dir, log_file) = (config_dir.clone(), log.clone());
        let acquired = tokio::task::spawn_blocking(move || Guard::acquire(&dir, &log_file))
            .await
            .map_err(|e| Error::Process(format!("the guard's task: {e}")))?;
        match acquired {
            Err(Error::RealNodeBusy { .. }) if std::time::Instant::now() < deadline => {
                tokio::time::sleep(Duration::from_millis(500)).await;
            }
            other => return other,
        }
    }
}

/// How long a start waits for another real node of the same process to stop.
const TURN_TIMEOUT: Duration = Duration::from_secs(30 * 60);

/// Takes this process's turn on the real node. The machine-wide lock refuses a second node at
/// once, which is right between processes; within one test binary a second start waits for the
/// first node to stop instead (each crate's integration tests are one binary), saying so when it
/// has waited too long.
async fn turn() -> Result<tokio::sync::OwnedMutexGuard<()>, Error> {
    static TURN: std::sync::LazyLock<std::sync::Arc<tokio::sync::Mutex<()>>> =
        std::sync::LazyLock::new(Default::default);
    let turn = TURN.clone();
    if let Ok(guard) = turn.clone().try_lock_owned() {
        return Ok(guard);
    }
    tracing::info!("waiting for this process's other real node to stop");
    tokio::time::timeout(TURN_TIMEOUT, turn.lock_owned())
        .await
        .map_err(|_| {
            unavailable(format!(
                "another real node of this process ran for more than {} min; a test holds it \
                 for the process's life while another wants its own",
                TURN_TIMEOUT.as_secs() / 60
            ))
        })
}

#[derive(Debug)]
struct State {
    // Stopped in reverse order of start: the kubelet before containerd.
    processes: Vec<ManagedProcess>,
    guard: Guard,
}

impl RealNode {
    /// Takes the machine's real-node lock, creates the bridge and starts containerd with the
    /// pod sandbox image. Configuration and logs go under `dir`.
    pub async fn prepare(cluster: &str, bins: &Binaries, dir: &Path) -> Result<Self, Error> {
        let node_bins = NodeBinaries::locate(bins)?;
        let config_dir = dir.join("node");
        std::fs::create_dir_all(&config_dir).map_err(|e| Error::io("create node dir", e))?;
        let layout = Layout {
            node_name: format!("{cluster}-node"),
            state: STATE_DIR.into(),
            config: config_dir.clone(),
            kubelet_port: wait::free_port()?,
            kubelet_healthz_port: wait::free_port()?,
            proxy_healthz_port: wait::free_port()?,
            proxy_metrics_port: wait::free_port()?,
            dns_ready_port: wait::free_port()?,
            ingress_ping_port: wait::free_port()?,
            netpol_metrics_port: wait::free_port()?,
        };
        let turn = turn().await?;
        let guard_log = dir.join("node-guard.log");
        let guard = acquire(config_dir, guard_log).await?;
        let node = Self {
            cluster: cluster.to_owned(),
            bins: node_bins,
            layout,
            logs: dir.to_owned(),
            state: Mutex::new(State {
                processes: Vec::new(),
                guard,
            }),
            _turn: turn,
        };
        host::bridge_up()?;
        node.start_containerd().await?;
        Ok(node)
    }

    /// The node's name and IP, for its certificates.
    pub fn identity(&self) -> NodeIdentity {
        NodeIdentity {
            name: self.layout.node_name.clone(),
            ip: IpAddr::V4(GATEWAY),
        }
    }

    fn write(&self, name: &str, text: &str) -> Result<PathBuf, Error> {
        let path = self.layout.file(name);
        std::fs::write(&path, text).map_err(|e| Error::io(format!("write {name}"), e))?;
        Ok(path)
    }

    fn spawn(&self, component: &str, command: Command) -> Result<(), Error> {
        let name = format!("{}/{component}", self.cluster);
        let log = self.logs.join(format!("{component}.log"));
        let process = ManagedProcess::spawn(&name, command, log)?;
        let mut state = self.lock();
        state.guard.register(process.pid())?;
        state.processes.push(process);
        Ok(())
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        // A poisoned lock only means a panic elsewhere; the state is still valid.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    async fn start_containerd(&self) -> Result<(), Error> {
        std::fs::create_dir_all(self.layout.cni_conf_dir())
            .map_err(|e| Error::io("create cni conf dir", e))?;
        self.write(
            "cni/10-kubenest.conflist",
            &config::cni_conflist(&self.layout),
        )?;
        let conf = self.write(
            "containerd.toml",
            &config::containerd(&self.layout, &self.bins.pause_image),
        )?;
        let mut containerd = Command::new(&self.bins.containerd);
        containerd.arg("--config").arg(conf);
        self.spawn("containerd", containerd)?;
        let socket = self.layout.containerd_socket();
        wait::until(
            "containerd's socket",
            READY_TIMEOUT,
            || self.check_running(),
            || {
                let ready = socket.exists();
                async move { Ok(ready) }
            },
        )
        .await?;
        self.import_image(&self.bins.pause_archive).await
    }

    /// Imports an OCI archive (e.g. `buildah push IMAGE oci-archive:FILE:IMAGE`) into
    /// containerd's `k8s.io` namespace, unpacked for its snapshotter; pods then run the image
    /// with `imagePullPolicy: Never` or `IfNotPresent`.
    pub async fn import_image(&self, archive: &Path) -> Result<(), Error> {
        let path = archive.display().to_string();
        self.ctr_images(&["import", "--snapshotter", "native", &path])
            .await
            .map_err(|reason| Error::ImageImport {
                archive: archive.to_owned(),
                reason,
            })
    }

    /// Lets the node pull from the registry at `address` (`host:port`) over HTTPS, trusting the
    /// CA certificate in file `ca`; containerd reads it at the next pull, no restart needed.
    pub fn trust_registry(&self, address: &str, ca: &Path) -> Result<(), Error> {
        let dir = self.layout.registry_hosts_dir().join(address);
        std::fs::create_dir_all(&dir).map_err(|e| Error::io("registry hosts dir", e))?;
        // containerd reads a relative `ca` from the hosts folder, not from where we are.
        let ca = std::path::absolute(ca).map_err(|e| Error::io("the CA's path", e))?;
        std::fs::write(dir.join("hosts.toml"), config::registry_hosts(address, &ca))
            .map_err(|e| Error::io("write hosts.toml", e))
    }

    /// Gives the node's kubelet the registry credentials of `docker_config_json` (a Docker
    /// `config.json`): it reads `config.json` in its root folder for every pull, the node-wide
    /// credentials of Kubernetes' "configure nodes to authenticate to a private registry".
    pub fn pull_credentials(&self, docker_config_json: &str) -> Result<(), Error> {
        let path = self.layout.kubelet_root().join("config.json");
        std::fs::write(&path, docker_config_json)
            .map_err(|e| Error::io("write the kubelet's config.json", e))
    }

    /// Tags image `source` (already imported) as `target` too, as a registry would serve a new
    /// tag of the same content.
    pub async fn tag_image(&self, source: &str, target: &str) -> Result<(), Error> {
        self.ctr_images(&["tag", "--force", source, target])
            .await
            .map_err(|reason| Error::Process(format!("ctr images tag {source} {target}: {reason}")))
    }

    /// `ctr images ARGS` against the node's containerd (namespace `k8s.io`), off the runtime's
    /// threads; the error as text.
    async fn ctr_images(&self, args: &[&str]) -> Result<(), String> {
        let ctr = self.bins.ctr.clone();
        let socket = self.layout.containerd_socket().display().to_string();
        let mut all: Vec<String> = ["--address", &socket, "--namespace", "k8s.io", "images"]
            .iter()
            .map(|a| (*a).to_owned())
            .collect();
        all.extend(args.iter().map(|a| (*a).to_owned()));
        tokio::task::spawn_blocking(move || {
            let all: Vec<&str> = all.iter().map(String::as_str).collect();
            run(&ctr, &all)
        })
        .await
        .map_err(|e| format!("the ctr task: {e}"))?
        .map(|_| ())
        .map_err(|e| e.to_string())
    }

    /// Joins the node to the cluster: the kubelet (node identity from `pki`), kube-proxy,
    /// kube-network-policies and CoreDNS against `url`; waits until the node is Ready, policies
    /// are enforced and DNS answers.
    pub async fn join(
        &self,
        client: &kube::Client,
        url: &str,
        pki: &Pki,
        admin_kubeconfig: &Path,
    ) -> Result<(), Error> {
        let certs = pki
            .node
            .as_ref()
            .ok_or_else(|| Error::Pki("no node certificates for a real node".into()))?;
        let kubelet_kubeconfig = self.write(
            "kubelet.kubeconfig",
            &crate::cluster::config::kubeconfig_yaml_with(
                &self.cluster,
                url,
                &pki.ca_pem,
                &certs.client_cert_pem,
                &certs.client_key_pem,
            ),
        )?;
        let kubelet_conf = self.write(
            "kubelet.json",
            &config::kubelet(
                &self.layout,
                &pki.ca_cert,
                &certs.serving_cert,
                &certs.serving_key,
            ),
        )?;
        let mut kubelet = Command::new(&self.bins.kubelet);
        kubelet
            .arg(format!("--config={}", kubelet_conf.display()))
            .arg(format!("--kubeconfig={}", kubelet_kubeconfig.display()))
            .arg(format!(
                "--root-dir={}",
                self.layout.kubelet_root().display()
            ))
            .arg(format!("--hostname-override={}", self.layout.node_name))
            .arg(format!("--node-ip={GATEWAY}"))
            .arg("--v=1");
        self.spawn("kubelet", kubelet)?;

        let proxy_conf = self.write(
            "kube-proxy.json",
            &config::kube_proxy(&self.layout, admin_kubeconfig),
        )?;
        let mut proxy = Command::new(&self.bins.kube_proxy);
        proxy.arg(format!("--config={}", proxy_conf.display()));
        self.spawn("kube-proxy", proxy)?;
        self.start_network_policies(client, url, &pki.ca_pem)
            .await?;

        let corefile = self.write(
            "Corefile",
            &config::corefile(&self.layout, admin_kubeconfig, &self.cluster),
        )?;
        let mut dns = Command::new(&self.bins.coredns);
        dns.arg("-conf").arg(corefile);
        self.spawn("coredns", dns)?;

        self.wait_ready(client).await?;
        self.start_storage(client, admin_kubeconfig).await?;
        self.start_ingress(client, admin_kubeconfig).await
    }

    /// PersistentVolumeClaims on this node: Rancher's local-path provisioner as a host process
    /// (out of cluster, with the admin kubeconfig) behind the default StorageClass
    /// [`config::STORAGE_CLASS`]. Each volume is a folder under the node's state; its helper
    /// pods (busybox, as root in `kube-system`) make the folder writable by any user, since a
    /// host folder takes no `fsGroup` and the addons run as users of their own.
    async fn start_storage(&self, client: &kube::Client, admin: &Path) -> Result<(), Error> {
        self.import_image(&self.bins.helper_archive).await?;
        let volumes = self.layout.state.join("volumes");
        std::fs::create_dir_all(&volumes).map_err(|e| Error::io("the volumes folder", e))?;
        for object in config::storage_objects() {
            apply(client, object).await?;
        }
        let settings = self.write("local-path.json", &config::local_path(&volumes))?;
        let helper = self.write(
            "local-path-helper.yaml",
            &config::local_path_helper(&self.bins.helper_image),
        )?;
        let mut provisioner = Command::new(&self.bins.local_path);
        provisioner
            .arg("start")
            .arg(format!("--kubeconfig={}", admin.display()))
            .arg(format!("--config={}", settings.display()))
            .arg(format!("--helper-pod-file={}", helper.display()))
            .args([
                "--namespace=kube-system",
                "--service-account-name=default",
                &format!("--provisioner-name={}", config::PROVISIONER),
                &format!("--configmap-name={}", config::LOCAL_PATH_CONFIG),
            ]);
        self.spawn("local-path-provisioner", provisioner)
    }

    async fn wait_ready(&self, client: &kube::Client) -> Result<(), Error> {
        let nodes: Api<Node> = Api::all(client.clone());
        let name = self.layout.node_name.clone();
        wait::until(
            &format!("node {name} to be Ready"),
            READY_TIMEOUT,
            || self.check_running(),
            || {
                let (nodes, name) = (nodes.clone(), name.clone());
                async move {
                    match nodes.get_opt(&name).await {
                        Ok(Some(node)) if crate::cluster::config::node_is_ready(&node) => Ok(true),
                        Ok(Some(_)) => Err("registered, not Ready".into()),
                        Ok(None) => Err("not registered".into()),
                        Err(e) => Err(e.to_string()),
                    }
                }
            },
        )
        .await?;
        let ready_url = format!("http://127.0.0.1:{}/ready", self.layout.dns_ready_port);
        let http = reqwest::Client::new();
        wait::until(
            "CoreDNS to be ready",
            READY_TIMEOUT,
            || self.check_running(),
            || {
                let request = http.get(&ready_url).send();
                async move {
                    match request.await {
                        Ok(r) => Ok(r.status().is_success()),
                        Err(e) => Err(e.to_string()),
                    }
                }
            },
        )
        .await
    }

    /// `Err` naming the first of the node's processes that has exited.
    pub fn check_running(&self) -> Result<(), Error> {
        self.lock()
            .processes
            .iter_mut()
            .try_for_each(ManagedProcess::check_running)
    }

    /// Process ids, resident memory and log tails, as [`crate::Cluster`] reports its own.
    pub fn processes<T>(&self, f: impl Fn(&ManagedProcess) -> T) -> Vec<T> {
        self.lock().processes.iter().map(f).collect()
    }

    /// The last lines of the guard's log (its cleanup output).
    pub fn guard_log_tail(&self, lines: usize) -> String {
        tail(&self.logs.join("node-guard.log"), lines)
    }

    /// Asks every node process to exit, without waiting.
    pub fn terminate(&self) {
        self.lock()
            .processes
            .iter()
            .for_each(ManagedProcess::terminate);
    }

    /// Stops the node: the kubelet, kube-proxy, CoreDNS and containerd, then the guard cleans
    /// the host (containers, mounts, iptables, bridge, files) and releases the lock. Idempotent.
    pub fn stop(&self) {
        let mut state = self.lock();
        while let Some(mut p) = state.processes.pop() {
            p.stop();
        }
        state.guard.release();
    }
}

impl Drop for RealNode {
    fn drop(&mut self) {
        self.stop();
    }
}

/// Applies `object` (server-side, forced, as the kit) through `client`.
async fn apply(client: &kube::Client, object: serde_json::Value) -> Result<(), Error> {
    let object: kube::api::DynamicObject = serde_json::from_value(object)
        .map_err(|e| Error::Process(format!("a node object: {e}")))?;
    let types = object.types.clone().unwrap_or_default();
    let (group, version) = types
        .api_version
        .split_once('/')
        .unwrap_or(("", types.api_version.as_str()));
    let gvk = kube::api::GroupVersionKind::gvk(group, version, &types.kind);
    let (resource, caps) = kube::discovery::pinned_kind(client, &gvk)
        .await
        .map_err(|e| Error::Process(format!("discover {}: {e}", types.kind)))?;
    let name = object.metadata.name.clone().unwrap_or_default();
    let api: Api<kube::api::DynamicObject> =
        match (caps.scope, object.metadata.namespace.as_deref()) {
            (kube::discovery::Scope::Namespaced, Some(ns)) => {
                Api::namespaced_with(client.clone(), ns, &resource)
            }
            _ => Api::all_with(client.clone(), &resource),
        };
    api.patch(
        &name,
        &kube::api::PatchParams::apply("kubenest-testkit").force(),
        &kube::api::Patch::Apply(&object),
    )
    .await
    .map(|_| ())
    .map_err(|e| Error::Process(format!("apply {} {name}: {e}", types.kind)))
}
