//! The node's NetworkPolicy enforcement: kube-network-policies (sigs.k8s.io, pinned in
//! tools/versions.env) as a host process. It keeps one nftables table, [`NFT_TABLE`] in the
//! `inet` family, whose `postrouting` chain (before kube-proxy's masquerade) and, for DNS over
//! UDP, `prerouting` chain send the first packet of each connection from or to a pod that a
//! policy selects to NFQUEUE; the process decides it against the policies and drops what they
//! do not allow. Bridged pod-to-pod packets reach those hooks because the host has
//! `net.bridge.bridge-nf-call-iptables = 1` (checked by [`super::NodeBinaries::locate`]).
//!
//! What it does not police, by upstream's design: packets of sockets owned by root on the host
//! (`meta skuid 0 accept`: the kubelet's probes, Traefik, CoreDNS's answers and every other host
//! process of the kit), and anything a pod sends to the host itself other than DNS over UDP
//! (such packets never reach `postrouting`).
//!
//! Upstream's binary only reads in-cluster credentials, at fixed paths under
//! `/var/run/secrets/kubernetes.io/serviceaccount`. So it runs as a pod would: as its own
//! ServiceAccount with upstream's ClusterRole (install.yaml), whose token and the cluster's CA
//! are bind-mounted over `/run` in a mount namespace of its own; the host's `/run` is untouched.

use std::path::Path;
use std::process::Command;

use k8s_openapi::api::authentication::v1::TokenRequest;
use k8s_openapi::api::core::v1::ServiceAccount;
use kube::Api;
use serde_json::json;

use super::{READY_TIMEOUT, RealNode, apply, run};
use crate::{Error, wait};

/// The nftables table (family `inet`) kube-network-policies keeps; removed by cleanup.sh.
pub const NFT_TABLE: &str = "kube-network-policies";

/// Its ServiceAccount and ClusterRole(Binding), named as upstream's install.yaml names them.
const NAME: &str = "kube-network-policies";
const NAMESPACE: &str = "kube-system";
/// The token's life: longer than any test binary runs.
const TOKEN_SECONDS: i64 = 24 * 3600;

/// Upstream's RBAC objects (install.yaml): list and watch pods, namespaces and NetworkPolicies.
fn rbac_objects() -> Vec<serde_json::Value> {
    vec![
        json!({"apiVersion": "v1", "kind": "ServiceAccount",
               "metadata": {"name": NAME, "namespace": NAMESPACE}}),
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
               "metadata": {"name": NAME},
               "rules": [
                   {"apiGroups": [""], "resources": ["pods", "namespaces"],
                    "verbs": ["list", "watch"]},
                   {"apiGroups": ["networking.k8s.io"], "resources": ["networkpolicies"],
                    "verbs": ["list", "watch"]}]}),
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
               "metadata": {"name": NAME},
               "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                           "name": NAME},
               "subjects": [{"kind": "ServiceAccount", "name": NAME, "namespace": NAMESPACE}]}),
    ]
}

impl RealNode {
    /// Starts kube-network-policies against the API server at `url` (whose CA is `ca_pem`) and
    /// waits until it has written its nftables table, i.e. synced the policies once.
    pub(super) async fn start_network_policies(
        &self,
        client: &kube::Client,
        url: &str,
        ca_pem: &str,
    ) -> Result<(), Error> {
        for object in rbac_objects() {
            apply(client, object).await?;
        }
        let request: TokenRequest = serde_json::from_value(json!({
            "spec": {"audiences": [], "expirationSeconds": TOKEN_SECONDS}
        }))
        .map_err(|e| Error::Process(format!("a token request: {e}")))?;
        let token = Api::<ServiceAccount>::namespaced(client.clone(), NAMESPACE)
            .create_token_request(NAME, &Default::default(), &request)
            .await
            .map_err(|e| Error::Process(format!("a token for {NAME}: {e}")))?
            .status
            .map(|s| s.token)
            .ok_or_else(|| Error::Process(format!("no token for {NAME}")))?;
        // What a pod of the ServiceAccount would find under /var/run (= /run) and in its env.
        let run_dir = self.layout.file("netpol-run");
        let account = run_dir.join("secrets/kubernetes.io/serviceaccount");
        std::fs::create_dir_all(&account).map_err(|e| Error::io("the netpol run dir", e))?;
        for (name, text) in [("token", token.as_str()), ("ca.crt", ca_pem)] {
            std::fs::write(account.join(name), text)
                .map_err(|e| Error::io(format!("write the netpol {name}"), e))?;
        }
        let uri: http::Uri = url
            .parse()
            .map_err(|e| Error::Process(format!("the API server's URL {url}: {e}")))?;
        let (host, port) = (
            uri.host().unwrap_or_default().to_owned(),
            uri.port_u16().unwrap_or(443),
        );

        let mut command = Command::new("unshare");
        command
            .args(["--mount", "--propagation", "private", "--", "sh", "-c"])
            .arg(r#"mount --bind "$1" /run && shift && exec "$@""#)
            .arg("kube-network-policies")
            .arg(&run_dir)
            .arg(&self.bins.network_policies)
            .arg(format!("--hostname-override={}", self.layout.node_name))
            .arg(format!(
                "--metrics-bind-address=127.0.0.1:{}",
                self.layout.netpol_metrics_port
            ))
            .arg("--v=2")
            .env("KUBERNETES_SERVICE_HOST", host)
            .env("KUBERNETES_SERVICE_PORT", port.to_string());
        self.spawn("kube-network-policies", command)?;
        wait::until(
            "kube-network-policies' nftables table",
            READY_TIMEOUT,
            || self.check_running(),
            || async {
                tokio::task::spawn_blocking(|| {
                    run(Path::new("nft"), &["list", "table", "inet", NFT_TABLE]).is_ok()
                })
                .await
                .map_err(|e| e.to_string())
            },
        )
        .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_service_account_may_only_read_what_policies_need() {
        let objects = rbac_objects();
        let role = &objects[1];
        assert_eq!(role["kind"], "ClusterRole");
        for rule in role["rules"].as_array().unwrap() {
            assert_eq!(rule["verbs"], json!(["list", "watch"]));
        }
        assert_eq!(objects[2]["subjects"][0]["name"], NAME);
    }
}
