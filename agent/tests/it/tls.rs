//! The agent dials a TLS hub (`wss://`) trusting the CA it is given, and a hub that cannot admit
//! it yet tells it when to come back.

use crate::common;

use std::sync::Arc;
use std::time::Duration;

use futures::{SinkExt, StreamExt};
use kubenest_contracts::{self as wire, Envelope, Message, Validator};
use tokio_tungstenite::tungstenite::Message as Ws;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_util::sync::CancellationToken;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_agent_connects_over_tls_to_a_hub_signed_by_the_ca_it_trusts() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let env = kubenest_testkit::shared().await.unwrap();
    let east = env.cluster("east").unwrap();
    let dir = tempfile::tempdir().unwrap();
    let tls_key = rcgen::KeyPair::generate().unwrap();
    let cert = rcgen::CertificateParams::new(vec!["127.0.0.1".to_owned()])
        .unwrap()
        .self_signed(&tls_key)
        .unwrap();
    let (cert_path, key_path) = (dir.path().join("tls.crt"), dir.path().join("tls.key"));
    std::fs::write(&cert_path, cert.pem()).unwrap();
    std::fs::write(&key_path, tls_key.serialize_pem()).unwrap();
    let key = common::HubKey::new();
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("wss://{}/v1/connect", listener.local_addr().unwrap());
    let args = <kubenest_hub::Args as clap::Parser>::try_parse_from([
        "kubenest-hub".to_owned(),
        format!("--jwt-public-key={}", key.public.display()),
        "--jwt-issuer=kubenest".to_owned(),
        format!("--tls-cert={}", cert_path.display()),
        format!("--tls-key={}", key_path.display()),
        "--no-leases".to_owned(),
    ])
    .unwrap();
    let admin = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let shutdown = CancellationToken::new();
    let _stop = shutdown.clone().drop_guard();
    tokio::spawn(kubenest_hub::run(args, listener, admin, shutdown.clone()));

    let mut roots = rustls::RootCertStore::empty();
    roots.add(cert.der().clone()).unwrap();
    let tls = Arc::new(
        rustls::ClientConfig::builder()
            .with_root_certificates(roots)
            .with_no_client_auth(),
    );
    // A backend session over TLS: floors for the cluster, then it listens.
    let mut request = url.as_str().into_client_request().unwrap();
    let token = key
        .signer
        .backend_token("tests", Duration::from_secs(600))
        .unwrap();
    let headers = request.headers_mut();
    headers.insert(
        "Sec-WebSocket-Protocol",
        "kubenest.backend.v1".parse().unwrap(),
    );
    headers.insert("Authorization", format!("Bearer {token}").parse().unwrap());
    let connector = tokio_tungstenite::Connector::Rustls(tls.clone());
    let (mut backend, _) =
        tokio_tungstenite::connect_async_tls_with_config(request, None, false, Some(connector))
            .await
            .unwrap();
    let validator = Validator::shared().unwrap();
    let floors = Envelope::new(wire::FloorsSnapshot {
        snapshot_id: uuid::Uuid::new_v4(),
        part: 1,
        parts: 1,
        floors: vec![wire::Floor {
            cluster_id: wire::Id::new("c-tls"),
            org_id: wire::Id::new("acme"),
            min_token_version: 1,
        }],
    });
    backend
        .send(Ws::text(validator.encode(&floors).unwrap()))
        .await
        .unwrap();

    let bare = common::bare_repository();
    let token = key
        .signer
        .cluster_token(&wire::Id::new("c-tls"), &wire::Id::new("acme"), 1)
        .unwrap();
    let mut config = common::agent_config(
        east,
        &url,
        token,
        "c-tls",
        "acme",
        &bare,
        "kubenest-agent-tls",
    )
    .await;
    config.uplink.tls = Some(tls);
    tokio::spawn(kubenest_agent::run(config, shutdown.clone()));

    let hello = tokio::time::timeout(Duration::from_secs(60), async {
        while let Some(Ok(frame)) = backend.next().await {
            let Ws::Text(text) = frame else { continue };
            let envelope = validator.decode(text.as_bytes()).unwrap();
            if let Message::Hello(hello) = envelope.message {
                assert_eq!(envelope.cluster_id.unwrap().as_str(), "c-tls");
                return hello;
            }
        }
        panic!("the backend session closed");
    })
    .await
    .expect("the agent's hello over TLS");
    assert!(hello.agent_version.starts_with("kubenest-agent/"));
    assert!(hello.kubernetes_version.starts_with("v1.35"), "{hello:?}");
}

#[tokio::test]
async fn a_hub_without_floors_asks_the_agent_to_come_back_later() {
    // No backend has pushed floors: the hub cannot tell a valid token from a revoked one yet.
    let key = common::HubKey::new();
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("ws://{}/v1/connect", listener.local_addr().unwrap());
    let args = <kubenest_hub::Args as clap::Parser>::try_parse_from([
        "kubenest-hub".to_owned(),
        format!("--jwt-public-key={}", key.public.display()),
        "--jwt-issuer=kubenest".to_owned(),
        "--insecure-plaintext".to_owned(),
        "--no-leases".to_owned(),
    ])
    .unwrap();
    let admin = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let shutdown = CancellationToken::new();
    let _stop = shutdown.clone().drop_guard();
    tokio::spawn(kubenest_hub::run(args, listener, admin, shutdown.clone()));
    let token = key
        .signer
        .cluster_token(&wire::Id::new("c-late"), &wire::Id::new("acme"), 1)
        .unwrap();
    let config = kubenest_agent::uplink::UplinkConfig {
        url,
        token,
        tls: None,
        heartbeat_every: Duration::from_secs(5),
        backoff_base: Duration::from_millis(200),
        backoff_max: Duration::from_secs(2),
        reconnect_spread: Duration::from_millis(500),
        cluster_id: wire::Id::new("c-late"),
        org_id: wire::Id::new("acme"),
    };
    let mut refusal = None;
    for _ in 0..50 {
        match kubenest_agent::uplink::connect(&config).await {
            Err(kubenest_agent::uplink::ConnectError::Refused {
                status,
                retry_after,
            }) => {
                refusal = Some((status, retry_after));
                break;
            }
            // The hub may not be listening yet.
            _ => tokio::time::sleep(Duration::from_millis(100)).await,
        }
    }
    let (status, retry_after) = refusal.expect("a refusal");
    assert_eq!(status, 503);
    let retry_after = retry_after.expect("a Retry-After");
    assert!(retry_after >= Duration::from_secs(1));
    // The agent waits at least that long, however short its own backoff is.
    let mut backoff =
        kubenest_runtime::backoff::Backoff::new(config.backoff_base, config.backoff_max);
    let delay = kubenest_agent::uplink::next_delay(&mut backoff, Some(retry_after));
    assert!(delay >= retry_after);
}
