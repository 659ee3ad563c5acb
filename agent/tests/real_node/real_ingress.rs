//! Ingress end to end on the real node (the fixture of `real_node.rs`): a real ingress
//! controller (Traefik, run by the test kit beside the node) serves an App's ingress host.
//!
//! - With `tls` and no `tls_secret`, the agent issues a certificate for the host from the
//!   project's ingress CA (set with `secret.set`, as the API server does), and the host answers
//!   HTTPS with a chain a client trusting only that CA accepts; plain HTTP answers too.
//! - The App is Running only once the controller has published the Ingress's address, and its
//!   status carries that address.
//! - With `tls_secret`, the user's own certificate is served instead, and kubenest makes none.
//! - A new CA is followed: the certificate is issued again from it.

use std::net::SocketAddr;
use std::time::Duration;

use crate::common::{app_ref, project, secret_set};
use crate::real_node::fixture;
use k8s_openapi::api::core::v1::Secret;
use kube::api::{Api, PostParams};
use kubenest_contracts::{self as wire, AppPhase};
use kubenest_testkit::node::{GATEWAY, INGRESS_HTTP_PORT, INGRESS_HTTPS_PORT};
use serde_json::json;

const REAL: Duration = Duration::from_secs(180);

/// A CA: (certificate PEM, key PEM).
fn ca(name: &str) -> (String, String) {
    let key = rcgen::KeyPair::generate().unwrap();
    let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
    params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    params
        .distinguished_name
        .push(rcgen::DnType::CommonName, name);
    (params.self_signed(&key).unwrap().pem(), key.serialize_pem())
}

/// The demo app with an ingress for `host`.
fn site(
    app: wire::AppRef,
    revision: &str,
    image: &str,
    host: &str,
    tls_secret: Option<&str>,
) -> wire::AppDeploy {
    serde_json::from_value(json!({
        "app": app,
        "revision": revision,
        "progress_deadline_seconds": 180,
        "components": [
            {"kind": "workload", "name": "web", "source": {"type": "image", "image": image},
             "replicas": 1, "port": 8080,
             "health_check": {"path": "/healthz", "initial_delay_seconds": 0, "period_seconds": 2},
             "ingress": {"host": host, "path": "/", "tls": true, "tls_secret": tls_secret}}
        ]
    }))
    .unwrap()
}

/// GET `path` of `host` through the node's ingress controller, over HTTPS trusting only
/// `trusted` (a PEM certificate) or over plain HTTP.
async fn ask(host: &str, path: &str, trusted: Option<&str>) -> Result<reqwest::Response, String> {
    let (scheme, port) = match trusted {
        Some(_) => ("https", INGRESS_HTTPS_PORT),
        None => ("http", INGRESS_HTTP_PORT),
    };
    let mut client = reqwest::Client::builder()
        .resolve(host, SocketAddr::from((GATEWAY, port)))
        .timeout(Duration::from_secs(5));
    if let Some(pem) = trusted {
        let root = reqwest::Certificate::from_pem(pem.as_bytes()).unwrap();
        client = client
            .tls_built_in_root_certs(false)
            .add_root_certificate(root);
    }
    let client = client.build().unwrap();
    client
        .get(format!("{scheme}://{host}:{port}{path}"))
        .send()
        .await
        .map_err(|e| format!("{e:?}"))
}

/// Waits until `host` answers `path` with 200 (HTTPS trusting `trusted`, or HTTP).
async fn answers(host: &str, path: &str, trusted: Option<&str>) {
    let deadline = std::time::Instant::now() + REAL;
    loop {
        let last = match ask(host, path, trusted).await {
            Ok(r) if r.status().is_success() => return,
            Ok(r) => r.status().to_string(),
            Err(e) => e,
        };
        assert!(
            std::time::Instant::now() < deadline,
            "{host}{path} did not answer within {REAL:?}: {last}"
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

#[tokio::test]
async fn an_apps_ingress_answers_through_a_real_controller_with_a_certificate_from_the_projects_ca()
{
    let f = fixture();
    let (project_id, namespace) = project(&f.backend, "ingress").await;
    let (ca_pem, ca_key) = ca("ingress test CA");
    let ca_secret = |cert: &str, key: &str| {
        secret_set(
            &namespace,
            wire::INGRESS_CA_SECRET,
            None,
            wire::SecretKind::Tls,
            &[("tls.crt", cert), ("tls.key", key)],
        )
    };
    f.backend.accept(ca_secret(&ca_pem, &ca_key)).await;

    let id = format!("site-{}", &uuid::Uuid::new_v4().simple().to_string()[..8]);
    let app = app_ref(&id, "site", &project_id, &namespace);
    let host = "site.ingress.kubenest.test";
    f.backend
        .accept(site(app.clone(), "r1", &f.demo, host, None))
        .await;
    let running = f
        .backend
        .app_status("the site Running", REAL, &id, |s| {
            s.phase == AppPhase::Running
        })
        .await;
    assert_eq!(
        running.ingress_address.as_deref(),
        Some(GATEWAY.to_string().as_str()),
        "the controller's address: {running:?}"
    );
    answers(host, "/healthz", Some(&ca_pem)).await;
    answers(host, "/", None).await;
    let body: serde_json::Value = ask(host, "/", Some(&ca_pem))
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert!(body.get("version").is_some(), "the demo answered: {body}");
    // Nothing else is trusted: a client trusting another CA refuses the certificate.
    let (other, _) = ca("another CA");
    assert!(ask(host, "/healthz", Some(&other)).await.is_err());

    // A new CA: the certificate is issued again from it.
    let (new_pem, new_key) = ca("ingress test CA, renewed");
    f.backend.accept(ca_secret(&new_pem, &new_key)).await;
    f.backend.accept(site(app, "r2", &f.demo, host, None)).await;
    answers(host, "/healthz", Some(&new_pem)).await;

    // The user's own certificate, named in tls_secret: served as it is, none made for it.
    let own_host = "own.ingress.kubenest.test";
    let (own_ca, own_ca_key) = ca("the user's own CA");
    let issuer =
        rcgen::Issuer::from_ca_cert_pem(&own_ca, rcgen::KeyPair::from_pem(&own_ca_key).unwrap())
            .unwrap();
    let leaf_key = rcgen::KeyPair::generate().unwrap();
    let leaf = rcgen::CertificateParams::new(vec![own_host.to_owned()])
        .unwrap()
        .signed_by(&leaf_key, &issuer)
        .unwrap();
    let client = f.edge.client().await.unwrap();
    let secrets: Api<Secret> = Api::namespaced(client, &namespace);
    let own: Secret = serde_json::from_value(json!({
        "metadata": {"name": "own-cert"}, "type": "kubernetes.io/tls",
        "stringData": {"tls.crt": leaf.pem(), "tls.key": leaf_key.serialize_pem()}
    }))
    .unwrap();
    secrets.create(&PostParams::default(), &own).await.unwrap();
    let own_id = format!("own-{}", &uuid::Uuid::new_v4().simple().to_string()[..8]);
    let own_app = app_ref(&own_id, "own", &project_id, &namespace);
    f.backend
        .accept(site(own_app, "r1", &f.demo, own_host, Some("own-cert")))
        .await;
    f.backend
        .app_status("the own site Running", REAL, &own_id, |s| {
            s.phase == AppPhase::Running
        })
        .await;
    answers(own_host, "/healthz", Some(&own_ca)).await;
    assert!(
        secrets.get_opt("own-web-tls").await.unwrap().is_none(),
        "no certificate of kubenest's beside the user's"
    );
    let issued = secrets.get("site-web-tls").await.unwrap();
    assert_eq!(
        issued.metadata.annotations.unwrap()["kubenest.io/tls-host"],
        host
    );
}
