//! The hub serves TLS with rustls, and plaintext only when explicitly asked to.

use std::sync::Arc;

use crate::common::*;
use clap::Parser;
use futures::{SinkExt, StreamExt};
use kubenest_contracts::Validator;
use tokio_tungstenite::tungstenite::Message as Ws;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;

#[tokio::test]
async fn without_tls_files_the_hub_refuses_to_start_unless_plaintext_is_explicit() {
    let keys = keys();
    let args = kubenest_hub::Args::try_parse_from([
        "kubenest-hub".to_owned(),
        format!("--jwt-public-key={}", keys.public_key.display()),
        "--no-leases".to_owned(),
    ])
    .unwrap();
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let admin = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let error = kubenest_hub::run(args, listener, admin, Default::default())
        .await
        .unwrap_err();
    assert!(
        matches!(error, kubenest_hub::HubError::Config(_)),
        "{error}"
    );
}

#[tokio::test]
async fn agents_and_backends_connect_over_tls() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let dir = tempfile::tempdir().unwrap();
    let key = rcgen::KeyPair::generate().unwrap();
    let cert = rcgen::CertificateParams::new(vec!["127.0.0.1".to_owned()])
        .unwrap()
        .self_signed(&key)
        .unwrap();
    let (cert_path, key_path) = (dir.path().join("tls.crt"), dir.path().join("tls.key"));
    std::fs::write(&cert_path, cert.pem()).unwrap();
    std::fs::write(&key_path, key.serialize_pem()).unwrap();

    let keys = keys();
    let tls_cert = format!("--tls-cert={}", cert_path.display());
    let tls_key = format!("--tls-key={}", key_path.display());
    let hub = start_hub(&keys, &[&tls_cert, &tls_key]).await;
    assert!(hub.url.starts_with("wss://"));

    let mut roots = rustls::RootCertStore::empty();
    roots.add(cert.der().clone()).unwrap();
    let config = Arc::new(
        rustls::ClientConfig::builder()
            .with_root_certificates(roots)
            .with_no_client_auth(),
    );
    let connect = |protocol: &'static str, token: String| {
        let (url, config) = (hub.url.clone(), config.clone());
        async move {
            let mut request = url.into_client_request().unwrap();
            request
                .headers_mut()
                .insert("Sec-WebSocket-Protocol", protocol.parse().unwrap());
            request
                .headers_mut()
                .insert("Authorization", format!("Bearer {token}").parse().unwrap());
            let connector = tokio_tungstenite::Connector::Rustls(config);
            tokio_tungstenite::connect_async_tls_with_config(request, None, false, Some(connector))
                .await
                .unwrap()
                .0
        }
    };
    let validator = Validator::shared().unwrap();
    let mut backend = connect(BACKEND, keys.backend()).await;
    let floors = validator
        .encode(&floors_snapshot(vec![floor("c1", "acme", 1)]))
        .unwrap();
    backend.send(Ws::text(floors)).await.unwrap();
    tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    let mut agent = connect(AGENT, keys.cluster("c1", "acme", 1)).await;

    let command = command("c1", "acme");
    backend
        .send(Ws::text(validator.encode(&command).unwrap()))
        .await
        .unwrap();
    let Some(Ok(Ws::Text(text))) = agent.next().await else {
        panic!("no command over TLS")
    };
    assert_eq!(validator.decode(text.as_bytes()).unwrap(), command);
}
