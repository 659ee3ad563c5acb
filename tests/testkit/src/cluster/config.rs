//! How a cluster's API server is started and reached: its command line, the kubeconfigs for it,
//! and when a node counts as ready. A leaf, so the real node ([`crate::node`]) can use it
//! without depending on the cluster that holds the node.

use std::net::IpAddr;
use std::process::Command;

use base64::Engine;
use base64::engine::general_purpose::STANDARD as BASE64;
use k8s_openapi::api::core::v1::Node;

use crate::Binaries;
use crate::pki::Pki;

pub(crate) fn node_is_ready(node: &Node) -> bool {
    node.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|cs| cs.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
}

pub(crate) fn apiserver_command(
    bins: &Binaries,
    name: &str,
    port: u16,
    etcd: &str,
    pki: &Pki,
    host: IpAddr,
) -> Command {
    let mut cmd = Command::new(&bins.kube_apiserver);
    cmd.arg(format!("--etcd-servers={etcd}"))
        .arg(format!("--etcd-prefix=/clusters/{name}"))
        .arg(format!("--bind-address={host}"))
        .arg(format!("--secure-port={port}"))
        .arg(format!("--tls-cert-file={}", pki.serving_cert.display()))
        .arg(format!(
            "--tls-private-key-file={}",
            pki.serving_key.display()
        ))
        .arg(format!("--client-ca-file={}", pki.ca_cert.display()))
        .arg(format!(
            "--service-account-key-file={}",
            pki.service_account_pub.display()
        ))
        .arg(format!(
            "--service-account-signing-key-file={}",
            pki.service_account_key.display()
        ))
        .arg("--service-account-issuer=https://kubernetes.default.svc.cluster.local")
        // Room for thousands of Services (benchmarks run hundreds of Apps).
        .arg("--service-cluster-ip-range=10.96.0.0/16")
        .arg("--allow-privileged=true")
        // Fairness queues cost CPU and only matter under contention we never create.
        .arg("--enable-priority-and-fairness=false")
        .arg("--profiling=false")
        // Webhooks are called with a client certificate, so they can refuse anyone else.
        .arg(format!(
            "--admission-control-config-file={}",
            pki.webhook_client.admission_config.display()
        ));
    if host.is_loopback() {
        cmd.arg("--authorization-mode=RBAC")
            // The `kubernetes` Service cannot point at a loopback address; nothing needs it.
            .arg("--endpoint-reconciler-type=none");
    } else {
        cmd.arg(format!("--advertise-address={host}"));
    }
    cmd
}

/// A real node's API server: it advertises its (pod-reachable) bind address, so the
/// `kubernetes` Service's endpoints are reconciled to it and in-cluster clients work; the
/// kubelet is authorized as a node (Node authorizer, NodeRestriction), and the API server
/// dials the kubelet (logs, exec) with the admin certificate.
pub(crate) fn real_node_apiserver_args(cmd: &mut Command, pki: &Pki) {
    cmd.arg("--authorization-mode=Node,RBAC")
        .arg("--enable-admission-plugins=NodeRestriction")
        .arg(format!(
            "--kubelet-client-certificate={}",
            pki.admin_cert.display()
        ))
        .arg(format!("--kubelet-client-key={}", pki.admin_key.display()))
        .arg(format!(
            "--kubelet-certificate-authority={}",
            pki.ca_cert.display()
        ))
        .arg("--kubelet-preferred-address-types=InternalIP");
}

pub(crate) fn kubeconfig_yaml(name: &str, url: &str, pki: &Pki) -> String {
    kubeconfig_yaml_with(
        name,
        url,
        &pki.ca_pem,
        &pki.admin_cert_pem,
        &pki.admin_key_pem,
    )
}

/// A kubeconfig for `url` with this client certificate (PEM).
pub(crate) fn kubeconfig_yaml_with(
    name: &str,
    url: &str,
    ca_pem: &str,
    cert_pem: &str,
    key_pem: &str,
) -> String {
    let ca = BASE64.encode(ca_pem);
    let cert = BASE64.encode(cert_pem);
    let key = BASE64.encode(key_pem);
    format!(
        "apiVersion: v1
kind: Config
clusters:
- name: {name}
  cluster:
    server: {url}
    certificate-authority-data: {ca}
users:
- name: {name}-admin
  user:
    client-certificate-data: {cert}
    client-key-data: {key}
contexts:
- name: {name}
  context:
    cluster: {name}
    user: {name}-admin
current-context: {name}
"
    )
}
