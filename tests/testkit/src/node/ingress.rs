//! The node's ingress controller: Traefik's Kubernetes Ingress provider as a host process (out
//! of cluster, with the admin kubeconfig, like CoreDNS and the storage provisioner), serving
//! HTTP on [`INGRESS_HTTP_PORT`] and HTTPS on [`INGRESS_HTTPS_PORT`] of the gateway address,
//! which the host and every pod reach. It takes the Ingresses of the default IngressClass
//! [`INGRESS_CLASS`] (and those naming no class), routes to their Services' endpoints (pod IPs
//! on the bridge), serves the certificates of their `tls` Secrets by SNI, and publishes the
//! gateway as each Ingress's address, so an Ingress it serves says so in its status.

use std::path::Path;
use std::process::Command;

use serde_json::json;

use super::config::GATEWAY;
use super::{READY_TIMEOUT, RealNode, apply};
use crate::{Error, wait};

/// The IngressClass the node's controller serves (the cluster's default).
pub const INGRESS_CLASS: &str = "traefik";
/// Where the controller serves plain HTTP, on [`GATEWAY`].
pub const INGRESS_HTTP_PORT: u16 = 80;
/// Where it serves HTTPS, on [`GATEWAY`].
pub const INGRESS_HTTPS_PORT: u16 = 443;

/// The controller name Traefik's provider answers for.
const CONTROLLER: &str = "traefik.io/ingress-controller";

impl RealNode {
    /// Starts the ingress controller and waits until it answers its health check.
    pub(super) async fn start_ingress(
        &self,
        client: &kube::Client,
        admin: &Path,
    ) -> Result<(), Error> {
        apply(
            client,
            json!({"apiVersion": "networking.k8s.io/v1", "kind": "IngressClass",
                   "metadata": {"name": INGRESS_CLASS, "annotations": {
                       "ingressclass.kubernetes.io/is-default-class": "true"}},
                   "spec": {"controller": CONTROLLER}}),
        )
        .await?;
        let ping = self.layout.ingress_ping_port;
        let mut traefik = Command::new(&self.bins.ingress);
        traefik
            .env_clear()
            .env("KUBECONFIG", admin)
            .arg(format!(
                "--entryPoints.web.address={GATEWAY}:{INGRESS_HTTP_PORT}"
            ))
            .arg(format!(
                "--entryPoints.websecure.address={GATEWAY}:{INGRESS_HTTPS_PORT}"
            ))
            .arg("--entryPoints.websecure.http.tls=true")
            .arg(format!("--entryPoints.ping.address=127.0.0.1:{ping}"))
            .arg("--ping=true")
            .arg("--ping.entryPoint=ping")
            .arg("--providers.kubernetesIngress=true")
            .arg(format!(
                "--providers.kubernetesIngress.ingressEndpoint.ip={GATEWAY}"
            ))
            .arg("--global.checkNewVersion=false")
            .arg("--global.sendAnonymousUsage=false")
            .arg("--log.level=INFO");
        self.spawn("traefik", traefik)?;
        let url = format!("http://127.0.0.1:{ping}/ping");
        let http = reqwest::Client::new();
        wait::until(
            "the ingress controller to answer",
            READY_TIMEOUT,
            || self.check_running(),
            || {
                let request = http.get(&url).send();
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
}
