//! A node's programs inside a local machine: containerd (the real node's configuration, with
//! its folders in the machine's own `/var` and `/etc`), a kubelet whose pods live under the
//! machine's cgroup on a CNI bridge of its own, and sshd on the machine's address.

use std::net::Ipv4Addr;
use std::path::Path;
use std::time::Duration;

use serde_json::json;

use super::Machine;
use super::control_plane::ControlPlane;
use crate::node::NodeBinaries;
use crate::node::config::{self, Layout};
use crate::{Error, wait};

/// Where the node's programs keep their state and configuration, inside the machine. Distinct
/// from the real node's host folder (its cleanup finds its containerd by that path).
const STATE: &str = "/var/lib/kubenest";
const CONFIG: &str = "/etc/kubenest";
/// The CNI network inside each machine, on its own bridge `cni0`.
const CNI_NETWORK: &str = "kn-machine";
const READY_TIMEOUT: Duration = Duration::from_secs(120);

/// The real node's layout, inside a machine (ports are the defaults: the machine has its own
/// network namespace).
fn layout(machine: &Machine) -> Layout {
    layout_named(machine.name())
}

fn layout_named(name: &str) -> Layout {
    Layout {
        node_name: name.to_owned(),
        state: STATE.into(),
        config: CONFIG.into(),
        kubelet_port: 10250,
        kubelet_healthz_port: 10248,
        proxy_healthz_port: 10256,
        proxy_metrics_port: 10249,
        dns_ready_port: 8181,
        ingress_ping_port: 8182,
        netpol_metrics_port: 9080,
    }
}

fn show(path: &Path) -> String {
    path.display().to_string()
}

/// The machine's pod network: bridge `cni0` with the machine's pod CIDR, no masquerade (other
/// machines see the pods' own addresses and route back to them over the host bridge).
fn cni_conflist(pod_cidr: &str, gateway: Ipv4Addr) -> String {
    let conf = json!({
        "cniVersion": "1.0.0",
        "name": CNI_NETWORK,
        "plugins": [
            {
                "type": "bridge",
                "bridge": "cni0",
                "isGateway": true,
                "ipMasq": false,
                "hairpinMode": true,
                "ipam": {
                    "type": "host-local",
                    "ranges": [[{ "subnet": pod_cidr, "gateway": gateway.to_string() }]],
                    "routes": [{ "dst": "0.0.0.0/0" }],
                    "dataDir": format!("{STATE}/cni-ipam"),
                }
            },
            { "type": "portmap", "capabilities": { "portMappings": true } }
        ]
    });
    format!("{conf:#}\n")
}

/// The real node's kubelet settings, changed for a machine: it serves on the machine's address,
/// its pods' cgroups are per QoS class under the machine's cgroup (`cgroupRoot`), and it has no
/// cluster DNS (the probe runs none).
fn kubelet_config(
    layout: &Layout,
    address: Ipv4Addr,
    cgroup: &str,
    [ca, cert, key]: [&str; 3],
) -> Result<String, Error> {
    let text = config::kubelet(layout, Path::new(ca), Path::new(cert), Path::new(key));
    let mut conf: serde_json::Value =
        serde_json::from_str(&text).map_err(|e| Error::Process(format!("kubelet config: {e}")))?;
    conf["address"] = json!(address.to_string());
    conf["cgroupsPerQOS"] = json!(true);
    conf["cgroupRoot"] = json!(cgroup);
    if let Some(map) = conf.as_object_mut() {
        map.remove("clusterDNS");
    }
    Ok(format!("{conf:#}\n"))
}

impl Machine {
    /// Starts containerd in the machine and imports the pod sandbox image.
    pub async fn start_containerd(&self, bins: &NodeBinaries) -> Result<(), Error> {
        let layout = layout(self);
        self.write(
            &show(&layout.file("cni/10-machine.conflist")),
            &cni_conflist(&self.pod_cidr(), self.pod_gateway()),
        )?;
        let conf = layout.file("containerd.toml");
        self.write(
            &show(&conf),
            &config::containerd(&layout, &bins.pause_image),
        )?;
        let containerd = show(&bins.containerd);
        self.spawn("containerd", &containerd, &["--config".into(), show(&conf)])?;
        let socket = self.path(&show(&layout.containerd_socket()));
        wait::until(
            &format!("{}: containerd's socket", self.name()),
            READY_TIMEOUT,
            || self.check_running(),
            || {
                let ready = socket.exists();
                async move { Ok(ready) }
            },
        )
        .await?;
        self.import_image(bins, &bins.pause_archive).await
    }

    /// Imports an OCI archive (a host path) into the machine's containerd.
    pub async fn import_image(&self, bins: &NodeBinaries, archive: &Path) -> Result<(), Error> {
        let socket = show(&layout(self).containerd_socket());
        let archive = show(archive);
        self.run(
            &show(&bins.ctr),
            &[
                "--address",
                &socket,
                "--namespace",
                "k8s.io",
                "images",
                "import",
                "--snapshotter",
                "native",
                &archive,
            ],
        )
        .await
        .map(|_| ())
    }

    /// Starts the machine's kubelet, joined to `plane` with the node certificates made for it.
    pub fn start_kubelet(&self, plane: &ControlPlane, bins: &NodeBinaries) -> Result<(), Error> {
        let certs = plane
            .node_certs(self.name())
            .ok_or_else(|| Error::Pki(format!("no kubelet certificates for {}", self.name())))?;
        let pki = format!("{CONFIG}/pki");
        let read = |path: &Path| {
            std::fs::read_to_string(path)
                .map_err(|e| Error::io(format!("read {}", path.display()), e))
        };
        let (ca, cert, key) = (
            format!("{pki}/ca.crt"),
            format!("{pki}/kubelet.crt"),
            format!("{pki}/kubelet.key"),
        );
        self.write(&ca, &plane.pki().ca_pem)?;
        self.write(&cert, &read(&certs.serving_cert)?)?;
        self.write(&key, &read(&certs.serving_key)?)?;
        let kubeconfig = format!("{CONFIG}/kubelet.kubeconfig");
        self.write(
            &kubeconfig,
            &crate::cluster::config::kubeconfig_yaml_with(
                plane.name(),
                plane.url(),
                &plane.pki().ca_pem,
                &certs.client_cert_pem,
                &certs.client_key_pem,
            ),
        )?;
        let conf = format!("{CONFIG}/kubelet.json");
        let text = kubelet_config(&layout(self), self.ip(), &self.cgroup(), [&ca, &cert, &key])?;
        self.write(&conf, &text)?;
        let args = vec![
            format!("--config={conf}"),
            format!("--kubeconfig={kubeconfig}"),
            "--root-dir=/var/lib/kubelet".to_owned(),
            format!("--hostname-override={}", self.name()),
            format!("--node-ip={}", self.ip()),
            "--v=1".to_owned(),
        ];
        self.spawn("kubelet", &show(&bins.kubelet), &args)
    }

    /// Starts kube-proxy in the machine (the real node's nftables mode): Services work from the
    /// machine's pods, its rules in the machine's own network namespace. It reads the API with
    /// the admin kubeconfig (a probe's shortcut; an install gives it an identity of its own).
    pub fn start_kube_proxy(&self, plane: &ControlPlane, bins: &NodeBinaries) -> Result<(), Error> {
        let kubeconfig = format!("{CONFIG}/admin.kubeconfig");
        let admin = std::fs::read_to_string(plane.kubeconfig_path())
            .map_err(|e| Error::io("read the admin kubeconfig", e))?;
        self.write(&kubeconfig, &admin)?;
        let text = config::kube_proxy(&layout(self), Path::new(&kubeconfig));
        let mut conf: serde_json::Value = serde_json::from_str(&text)
            .map_err(|e| Error::Process(format!("kube-proxy config: {e}")))?;
        conf["clusterCIDR"] = json!(super::POD_NETWORK);
        conf["nodePortAddresses"] = json!([format!("{}/32", self.ip())]);
        let path = format!("{CONFIG}/kube-proxy.json");
        self.write(&path, &format!("{conf:#}\n"))?;
        self.spawn(
            "kube-proxy",
            &show(&bins.kube_proxy),
            &[format!("--config={path}")],
        )
    }

    /// Starts sshd on the machine's address with host keys of its own, letting in root with
    /// `authorized_key` (an OpenSSH public key line), from a file in the machine's own `/etc`;
    /// in the foreground, stopped with the machine.
    pub async fn start_sshd(&self, authorized_key: &str) -> Result<(), Error> {
        let mut args = self.machine().prepare_sshd(authorized_key).await?;
        args.extend(["-D".to_owned(), "-e".to_owned()]);
        self.spawn("sshd", "/usr/sbin/sshd", &args)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_pod_network_is_the_machines_own_without_nat() {
        let text = cni_conflist("10.251.2.0/24", Ipv4Addr::new(10, 251, 2, 1));
        let conf: serde_json::Value = serde_json::from_str(&text).unwrap();
        let bridge = &conf["plugins"][0];
        assert_eq!(bridge["bridge"], "cni0");
        assert_eq!(bridge["ipMasq"], false);
        assert_eq!(bridge["ipam"]["ranges"][0][0]["subnet"], "10.251.2.0/24");
        assert_eq!(bridge["ipam"]["ranges"][0][0]["gateway"], "10.251.2.1");
        assert_eq!(bridge["ipam"]["dataDir"], "/var/lib/kubenest/cni-ipam");
    }

    #[test]
    fn the_kubelet_serves_on_the_machine_and_keeps_its_pods_under_the_machines_cgroup() {
        let layout = layout_named("kn-machine-2");
        let files = ["/etc/kubenest/pki/ca.crt", "/k.crt", "/k.key"];
        let text = kubelet_config(
            &layout,
            Ipv4Addr::new(10, 250, 0, 12),
            "/kubenest-machine-2",
            files,
        )
        .unwrap();
        let conf: serde_json::Value = serde_json::from_str(&text).unwrap();
        assert_eq!(conf["address"], "10.250.0.12");
        assert_eq!(conf["cgroupsPerQOS"], true);
        assert_eq!(conf["cgroupRoot"], "/kubenest-machine-2");
        assert!(conf.get("clusterDNS").is_none());
        assert_eq!(
            conf["containerRuntimeEndpoint"],
            "unix:///var/lib/kubenest/containerd/containerd.sock"
        );
        assert_eq!(conf["failCgroupV1"], false);
    }
}
