//! The demo App's ingress on the real node: the project's ingress CA set through the API, the
//! demo's `web` given an ingress host with `tls`, and that host asked over HTTPS through the
//! node's ingress controller by a client that trusts only the project's CA (the certificate is
//! the one the agent issued for the host).

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use kubenest_cli::api;
use kubenest_testkit::node::{GATEWAY, INGRESS_HTTPS_PORT};
use serde_json::{Value, json};

use super::printer::Printer;

/// The demo's host on the real node.
pub const HOST: &str = "demo.edge.kubenest.test";

/// A new CA for the tour's project: (certificate PEM, key PEM).
fn new_ca() -> anyhow::Result<(String, String)> {
    let key = rcgen::KeyPair::generate()?;
    let mut params = rcgen::CertificateParams::new(Vec::<String>::new())?;
    params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    params
        .distinguished_name
        .push(rcgen::DnType::CommonName, "kubenest tour ingress CA");
    Ok((params.self_signed(&key)?.pem(), key.serialize_pem()))
}

/// Sets a new ingress CA on the project through the API; returns its certificate.
pub async fn set_ca(
    client: &mut api::Client,
    project_id: &str,
    out: &mut Printer,
) -> anyhow::Result<String> {
    let (certificate, private_key) = new_ca()?;
    client
        .call(
            reqwest::Method::PUT,
            &format!("/api/v1/projects/{project_id}/ingress-ca"),
            Some(&json!({"certificate": certificate, "private_key": private_key})),
        )
        .await?;
    out.line("   the project's ingress CA set (its key kept only on the cluster)");
    Ok(certificate)
}

/// Gives the demo App's `web` (an [`super::demo::app`] body) an HTTPS ingress for [`HOST`].
pub fn with_ingress(app: &mut Value) {
    if let Some(components) = app["components"].as_array_mut() {
        for component in components.iter_mut().filter(|c| c["name"] == "web") {
            component["workload_spec"]["ingress"] = json!({"host": HOST, "path": "/", "tls": true});
        }
    }
}

/// The demo's JSON answer to `GET https://{HOST}/` through the node's ingress controller,
/// trusting only `ca` (PEM), again until it reports `version` or `within` has passed.
pub async fn ask(ca: &str, version: &str, within: Duration) -> anyhow::Result<Value> {
    let client = reqwest::Client::builder()
        .resolve(HOST, SocketAddr::from((GATEWAY, INGRESS_HTTPS_PORT)))
        .tls_built_in_root_certs(false)
        .add_root_certificate(reqwest::Certificate::from_pem(ca.as_bytes())?)
        .timeout(Duration::from_secs(10))
        .build()?;
    let url = format!("https://{HOST}:{INGRESS_HTTPS_PORT}/");
    let deadline = Instant::now() + within;
    loop {
        let last = match client.get(&url).send().await {
            Ok(response) => match response.json::<Value>().await {
                Ok(answer) if answer["version"] == version => return Ok(answer),
                Ok(answer) => answer.to_string(),
                Err(e) => e.to_string(),
            },
            Err(e) => format!("{e:?}"),
        };
        anyhow::ensure!(
            Instant::now() < deadline,
            "{url} did not answer version {version} through the ingress controller: {last}"
        );
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
}
