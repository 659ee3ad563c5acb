//! The real node's configuration files, rendered from its [`Layout`]: containerd's, the CNI
//! network's, the kubelet's, kube-proxy's and CoreDNS's. Pure text, no IO.

use std::net::Ipv4Addr;
use std::path::{Path, PathBuf};

use serde_json::json;

/// The node's network: the CNI bridge, created before anything starts so that its gateway IP is
/// the address every host-side server binds (API server, kubelet, DNS) and pods reach.
pub const BRIDGE: &str = "kubenest0";
/// The pods' subnet on the bridge.
pub const SUBNET: &str = "10.89.0.0/24";
/// The bridge's own address: the host as pods see it.
pub const GATEWAY: Ipv4Addr = Ipv4Addr::new(10, 89, 0, 1);
pub const SUBNET_PREFIX: u8 = 24;
/// The CNI network's name (also the prefix of its cached results under /var/lib/cni).
pub const CNI_NETWORK: &str = "kubenest";
/// Where Debian's containernetworking-plugins are.
pub const CNI_BIN_DIR: &str = "/usr/lib/cni";
pub const CLUSTER_DOMAIN: &str = "cluster.local";

/// Where each part of the node keeps its files, and the ports it serves on.
#[derive(Debug, Clone)]
pub struct Layout {
    pub node_name: String,
    /// Runtime state (containerd root and state, kubelet root, pod logs, CNI IPAM): a fixed host
    /// folder, since there is one real node per machine and the guard removes it at the end.
    pub state: PathBuf,
    /// Configuration files, beside the cluster's logs.
    pub config: PathBuf,
    pub kubelet_port: u16,
    pub kubelet_healthz_port: u16,
    pub proxy_healthz_port: u16,
    pub proxy_metrics_port: u16,
    pub dns_ready_port: u16,
    /// The ingress controller's health endpoint (on loopback).
    pub ingress_ping_port: u16,
    /// kube-network-policies' metrics (on loopback).
    pub netpol_metrics_port: u16,
}

impl Layout {
    pub fn containerd_dir(&self) -> PathBuf {
        self.state.join("containerd")
    }

    pub fn containerd_socket(&self) -> PathBuf {
        self.containerd_dir().join("containerd.sock")
    }

    pub fn kubelet_root(&self) -> PathBuf {
        self.state.join("kubelet")
    }

    pub fn pod_logs(&self) -> PathBuf {
        self.state.join("pods")
    }

    pub fn cni_conf_dir(&self) -> PathBuf {
        self.config.join("cni")
    }

    /// containerd's registry configuration: one `{host:port}/hosts.toml` per registry.
    pub fn registry_hosts_dir(&self) -> PathBuf {
        self.containerd_dir().join("certs.d")
    }

    pub fn file(&self, name: &str) -> PathBuf {
        self.config.join(name)
    }
}

fn show(path: &Path) -> String {
    path.display().to_string()
}

/// containerd as an ordinary process: its own root, state and socket; the CRI plugin with the
/// settings this machine needs (`restrict_oom_score_adj`: no CAP_SYS_RESOURCE; the native
/// snapshotter), our sandbox image, and network namespaces and runc state under its state dir
/// so that nothing lands in the host's shared folders.
pub fn containerd(layout: &Layout, sandbox_image: &str) -> String {
    let dir = layout.containerd_dir();
    let d = show(&dir);
    format!(
        r#"version = 2
root = "{d}/root"
state = "{d}/state"

[grpc]
  address = "{socket}"

[ttrpc]
  address = "{d}/containerd.ttrpc.sock"

[debug]
  address = ""

[metrics]
  address = ""

[plugins."io.containerd.internal.v1.opt"]
  path = "{d}/opt"

[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "{sandbox_image}"
  restrict_oom_score_adj = true
  netns_mounts_under_state_dir = true
  stream_server_address = "127.0.0.1"
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "native"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        Root = "{d}/runc"
        SystemdCgroup = false
  [plugins."io.containerd.grpc.v1.cri".registry]
    config_path = "{hosts}"
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "{CNI_BIN_DIR}"
    conf_dir = "{conf}"
    max_conf_num = 1
"#,
        socket = show(&layout.containerd_socket()),
        conf = show(&layout.cni_conf_dir()),
        hosts = show(&layout.registry_hosts_dir()),
    )
}

/// The real node's default StorageClass: volumes in host folders (Rancher's local-path).
pub const STORAGE_CLASS: &str = "local-path";
/// The provisioner behind it.
pub const PROVISIONER: &str = "rancher.io/local-path";
/// The ConfigMap of its helper pods' scripts.
pub const LOCAL_PATH_CONFIG: &str = "local-path-config";

/// The provisioner's settings: every volume a folder under `volumes` on this (only) node.
pub fn local_path(volumes: &Path) -> String {
    json!({"nodePathMap": [{"node": "DEFAULT_PATH_FOR_NON_LISTED_NODES",
                            "paths": [show(volumes)]}]})
    .to_string()
}

/// The template of the provisioner's helper pods (it adds the volume and the scripts): busybox
/// as root, which the folder's `mkdir` and `rm` need.
pub fn local_path_helper(image: &str) -> String {
    json!({"apiVersion": "v1", "kind": "Pod",
           "metadata": {"name": "helper-pod"},
           "spec": {"priorityClassName": "system-node-critical",
                    "securityContext": {"runAsUser": 0, "runAsGroup": 0},
                    "containers": [{"name": "helper-pod", "image": image,
                                    "imagePullPolicy": "Never"}]}})
    .to_string()
}

/// The StorageClass (the default one; bound once a pod is scheduled) and the helper scripts:
/// a volume is a folder anyone may write (host folders take no `fsGroup`), removed with its PV.
pub fn storage_objects() -> Vec<serde_json::Value> {
    vec![
        json!({"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass",
               "metadata": {"name": STORAGE_CLASS, "annotations": {
                   "storageclass.kubernetes.io/is-default-class": "true"}},
               "provisioner": PROVISIONER,
               "volumeBindingMode": "WaitForFirstConsumer",
               "reclaimPolicy": "Delete"}),
        json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": LOCAL_PATH_CONFIG, "namespace": "kube-system"},
        "data": {
            "setup": "#!/bin/sh\nset -eu\nmkdir -m 0777 -p \"$VOL_DIR\"\n",
            "teardown": "#!/bin/sh\nset -eu\nrm -rf \"$VOL_DIR\"\n",
        }}),
    ]
}

/// containerd's `hosts.toml` for registry `address` (`host:port`): pulls over HTTPS, trusting
/// the CA in file `ca` (the node's answer to "which registries, and whose certificates").
pub fn registry_hosts(address: &str, ca: &Path) -> String {
    format!(
        "server = \"https://{address}\"\n\n[host.\"https://{address}\"]\n  \
         capabilities = [\"pull\", \"resolve\"]\n  ca = \"{}\"\n",
        show(ca)
    )
}

/// A bridge + host-local + portmap network on [`BRIDGE`]. `ipMasq` lets pods reach beyond the
/// host; `hairpinMode` lets a pod reach itself through its own Service.
pub fn cni_conflist(layout: &Layout) -> String {
    let conf = json!({
        "cniVersion": "1.0.0",
        "name": CNI_NETWORK,
        "plugins": [
            {
                "type": "bridge",
                "bridge": BRIDGE,
                "isGateway": true,
                "ipMasq": true,
                "hairpinMode": true,
                "ipam": {
                    "type": "host-local",
                    "ranges": [[{ "subnet": SUBNET, "gateway": GATEWAY.to_string() }]],
                    "routes": [{ "dst": "0.0.0.0/0" }],
                    "dataDir": show(&layout.state.join("cni-ipam")),
                }
            },
            { "type": "portmap", "capabilities": { "portMappings": true } }
        ]
    });
    format!("{conf:#}\n")
}

/// The kubelet: serving on the gateway IP (the API server dials it for logs and exec) with a
/// certificate of our CA; clients authenticate with certificates of that CA and are authorized
/// by the API server (webhook). The cgroup, swap, eviction and storage settings are those this
/// machine needs (real-node.md); image garbage collection is off because tests import images
/// that no registry could give back.
pub fn kubelet(layout: &Layout, ca: &Path, serving_cert: &Path, serving_key: &Path) -> String {
    let conf = json!({
        "apiVersion": "kubelet.config.k8s.io/v1beta1",
        "kind": "KubeletConfiguration",
        "failCgroupV1": false,
        "cgroupDriver": "cgroupfs",
        "cgroupsPerQOS": false,
        "enforceNodeAllocatable": [],
        "localStorageCapacityIsolation": false,
        "failSwapOn": false,
        "containerRuntimeEndpoint": format!("unix://{}", show(&layout.containerd_socket())),
        "podLogsDir": show(&layout.pod_logs()),
        "address": GATEWAY.to_string(),
        "port": layout.kubelet_port,
        "readOnlyPort": 0,
        "healthzBindAddress": "127.0.0.1",
        "healthzPort": layout.kubelet_healthz_port,
        "tlsCertFile": show(serving_cert),
        "tlsPrivateKeyFile": show(serving_key),
        "rotateCertificates": false,
        "serverTLSBootstrap": false,
        "authentication": {
            "anonymous": { "enabled": false },
            "webhook": { "enabled": true },
            "x509": { "clientCAFile": show(ca) }
        },
        "authorization": { "mode": "Webhook" },
        "clusterDomain": CLUSTER_DOMAIN,
        "clusterDNS": [GATEWAY.to_string()],
        "resolvConf": "/etc/resolv.conf",
        "imageGCHighThresholdPercent": 100,
        "imageGCLowThresholdPercent": 99,
        "evictionHard": {
            "memory.available": "1Mi",
            "nodefs.available": "1%",
            "nodefs.inodesFree": "1%",
            "imagefs.available": "1%"
        },
        "syncFrequency": "10s",
        "nodeStatusReportFrequency": "1m",
        "maxPods": 110,
        "serializeImagePulls": false,
        // Its iptables chains (KUBE-FIREWALL, canaries) have names every kubelet on a host
        // shares, so the cleanup could not tell them from a laptop's own cluster's; kube-proxy
        // here is nftables and needs none of them.
        "makeIPTablesUtilChains": false
    });
    format!("{conf:#}\n")
}

/// kube-proxy in nftables mode: its rules are one nftables table of its own (`kube-proxy`), which
/// the cleanup removes whole, where iptables mode would share `KUBE-*` chains with any other
/// cluster on the host. `masqueradeAll` rewrites the source of Service traffic, so a pod
/// reaching another pod on the same bridge through a ClusterIP gets its replies back through the
/// host's NAT. Conntrack sysctls are left alone (they would change host settings); NodePorts open
/// on the bridge's address only.
pub fn kube_proxy(layout: &Layout, kubeconfig: &Path) -> String {
    let conf = json!({
        "apiVersion": "kubeproxy.config.k8s.io/v1alpha1",
        "kind": "KubeProxyConfiguration",
        "clientConnection": { "kubeconfig": show(kubeconfig) },
        "hostnameOverride": layout.node_name,
        "mode": "nftables",
        "clusterCIDR": SUBNET,
        "nodePortAddresses": [format!("{GATEWAY}/32")],
        "healthzBindAddress": format!("127.0.0.1:{}", layout.proxy_healthz_port),
        "metricsBindAddress": format!("127.0.0.1:{}", layout.proxy_metrics_port),
        "conntrack": {
            "maxPerCore": 0,
            "min": 0,
            "tcpEstablishedTimeout": "0s",
            "tcpCloseWaitTimeout": "0s"
        },
        "nftables": {
            "masqueradeAll": true,
            "syncPeriod": "30s",
            "minSyncPeriod": "0s"
        }
    });
    format!("{conf:#}\n")
}

/// CoreDNS on the gateway IP (the kubelet's `clusterDNS`): the cluster's names from its API
/// server, the rest forwarded to the host's resolvers; `ready` answers on loopback once the
/// kubernetes plugin has synced.
pub fn corefile(layout: &Layout, kubeconfig: &Path, context: &str) -> String {
    format!(
        ".:53 {{
    bind {GATEWAY}
    errors
    ready 127.0.0.1:{ready}
    kubernetes {CLUSTER_DOMAIN} in-addr.arpa ip6.arpa {{
        kubeconfig {kubeconfig} {context}
        pods insecure
        fallthrough in-addr.arpa ip6.arpa
        ttl 5
    }}
    forward . /etc/resolv.conf
    cache 5
}}
",
        ready = layout.dns_ready_port,
        kubeconfig = show(kubeconfig),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn layout() -> Layout {
        Layout {
            node_name: "edge-node".into(),
            state: "/var/lib/kubenest-node".into(),
            config: "/tmp/env/edge/node".into(),
            kubelet_port: 10250,
            kubelet_healthz_port: 10248,
            proxy_healthz_port: 10256,
            proxy_metrics_port: 10249,
            dns_ready_port: 8181,
            ingress_ping_port: 8182,
            netpol_metrics_port: 9080,
        }
    }

    #[test]
    fn containerd_keeps_everything_under_its_state_dir() {
        let text = containerd(&layout(), "localhost/kubenest/pause:1.0");
        assert!(text.starts_with("version = 2\n"));
        assert!(text.contains(r#"address = "/var/lib/kubenest-node/containerd/containerd.sock""#));
        assert!(text.contains(r#"sandbox_image = "localhost/kubenest/pause:1.0""#));
        assert!(text.contains("restrict_oom_score_adj = true"));
        assert!(text.contains(r#"snapshotter = "native""#));
        assert!(text.contains(r#"Root = "/var/lib/kubenest-node/containerd/runc""#));
        assert!(text.contains(r#"conf_dir = "/tmp/env/edge/node/cni""#));
    }

    #[test]
    fn the_cni_network_uses_the_prepared_bridge() {
        let conf: serde_json::Value = serde_json::from_str(&cni_conflist(&layout())).unwrap();
        let bridge = &conf["plugins"][0];
        assert_eq!(bridge["bridge"], BRIDGE);
        assert_eq!(bridge["ipam"]["ranges"][0][0]["gateway"], "10.89.0.1");
        assert_eq!(conf["plugins"][1]["type"], "portmap");
    }

    #[test]
    fn the_kubelet_has_the_settings_this_machine_needs() {
        let text = kubelet(
            &layout(),
            Path::new("/p/ca.crt"),
            Path::new("/p/k.crt"),
            Path::new("/p/k.key"),
        );
        let conf: serde_json::Value = serde_json::from_str(&text).unwrap();
        assert_eq!(conf["failCgroupV1"], false);
        assert_eq!(conf["cgroupsPerQOS"], false);
        assert_eq!(conf["enforceNodeAllocatable"], json!([]));
        assert_eq!(conf["clusterDNS"], json!(["10.89.0.1"]));
        assert_eq!(
            conf["containerRuntimeEndpoint"],
            "unix:///var/lib/kubenest-node/containerd/containerd.sock"
        );
        assert_eq!(conf["authentication"]["anonymous"]["enabled"], false);
        assert_eq!(conf["makeIPTablesUtilChains"], false);
    }

    #[test]
    fn kube_proxy_masquerades_and_leaves_host_settings_alone() {
        let conf: serde_json::Value =
            serde_json::from_str(&kube_proxy(&layout(), Path::new("/k"))).unwrap();
        assert_eq!(conf["mode"], "nftables");
        assert_eq!(conf["nftables"]["masqueradeAll"], true);
        assert_eq!(conf["conntrack"]["maxPerCore"], 0);
        assert_eq!(conf["hostnameOverride"], "edge-node");
    }

    #[test]
    fn coredns_serves_the_cluster_domain_on_the_gateway() {
        let text = corefile(&layout(), Path::new("/env/edge/kubeconfig"), "edge");
        assert!(text.contains("bind 10.89.0.1"));
        assert!(text.contains("kubernetes cluster.local in-addr.arpa ip6.arpa {"));
        assert!(text.contains("kubeconfig /env/edge/kubeconfig edge"));
        assert!(text.contains("ready 127.0.0.1:8181"));
    }
}
