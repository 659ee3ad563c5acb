//! The hub client against a real hub replica (with its session Leases on a real
//! management kube-apiserver) and a scripted agent on a real socket.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // a test fails by panicking

use std::sync::Arc;
use std::time::Duration;

use clap::Parser;
use futures::{SinkExt, StreamExt};
use k8s_openapi::api::coordination::v1::Lease;
use kube::Api;
use kubenest_contracts::{
    Envelope, Floor, Heartbeat, Id, Message, ResyncRequest, TokenSigner, Validator,
};
use kubenest_hub_client::{DispatchError, HubClient, HubClientConfig};
use tokio_tungstenite::tungstenite::Message as Ws;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_util::sync::CancellationToken;

async fn agent(url: &str, token: &str) -> Result<common_ws::Socket, u16> {
    let mut request = url.into_client_request().unwrap();
    request.headers_mut().insert(
        "Sec-WebSocket-Protocol",
        "kubenest.agent.v1".parse().unwrap(),
    );
    request
        .headers_mut()
        .insert("Authorization", format!("Bearer {token}").parse().unwrap());
    match tokio_tungstenite::connect_async(request).await {
        Ok((socket, _)) => Ok(socket),
        Err(tokio_tungstenite::tungstenite::Error::Http(response)) => {
            Err(response.status().as_u16())
        }
        Err(other) => panic!("{other}"),
    }
}

/// Polls `check` every 100 ms until it holds, for at most 15 s.
async fn eventually<F: AsyncFnMut() -> bool>(what: &str, mut check: F) {
    for _ in 0..150 {
        if check().await {
            return;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("timed out after 15s: {what}");
}

mod common_ws {
    pub type Socket = tokio_tungstenite::WebSocketStream<
        tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>,
    >;
}

#[tokio::test]
async fn floors_reach_the_hub_commands_reach_the_agent_and_status_comes_back() {
    let mgmt = kubenest_testkit::shared_management().await.unwrap();
    let ns = mgmt.test_namespace("hub-client").await.unwrap();
    let key = rcgen::KeyPair::generate_for(&rcgen::PKCS_ED25519).unwrap();
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("hub.pub"), key.public_key_pem()).unwrap();
    let signer =
        Arc::new(TokenSigner::from_pem(key.serialize_pem().as_bytes(), "kubenest").unwrap());

    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("ws://{}/v1/connect", listener.local_addr().unwrap());
    let args = kubenest_hub::Args::try_parse_from([
        "kubenest-hub".to_owned(),
        format!("--jwt-public-key={}", dir.path().join("hub.pub").display()),
        "--jwt-issuer=kubenest".to_owned(),
        "--insecure-plaintext".to_owned(),
        format!("--kubeconfig={}", mgmt.kubeconfig_path().display()),
        format!("--lease-namespace={}", ns.name()),
    ])
    .unwrap();
    let shutdown = CancellationToken::new();
    let admin = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    tokio::spawn(kubenest_hub::run(
        args,
        listener,
        admin,
        shutdown.child_token(),
    ));

    let leases: Api<Lease> = Api::namespaced(ns.client(), ns.name());
    let config = HubClientConfig {
        urls: vec![url.clone()],
        signer: signer.clone(),
        leases,
    };
    let (client, mut statuses) = HubClient::start(config, shutdown.child_token()).unwrap();
    eventually("the client to connect", async || client.connected() == 1).await;

    // Without floors the hub turns agents away; once the client pushes them, they get in.
    let token = signer
        .cluster_token(&Id::from("c1"), &Id::from("acme"), 1)
        .unwrap();
    assert_eq!(agent(&url, &token).await.err(), Some(503));
    let floor = |c: &str| Floor {
        cluster_id: Id::from(c),
        org_id: Id::from("acme"),
        min_token_version: 1,
    };
    client.push_floors(vec![floor("c1"), floor("c2")]);
    let mut socket = None;
    eventually("the agent to be admitted", async || {
        socket = agent(&url, &token).await.ok();
        socket.is_some()
    })
    .await;
    let mut socket = socket.unwrap();
    eventually("the session lease", async || {
        let leases: Api<Lease> = Api::namespaced(ns.client(), ns.name());
        leases.get_opt("hub-session-c1").await.unwrap().is_some()
    })
    .await;

    // A command goes to the replica holding the cluster's lease and is acknowledged.
    let command = Envelope::new(ResyncRequest {
        reason: "test".into(),
    })
    .for_cluster("c1".into(), "acme".into());
    client.dispatch(command.clone()).await.unwrap();
    let Some(Ok(Ws::Text(text))) = socket.next().await else {
        panic!("no command")
    };
    assert_eq!(
        Validator::shared()
            .unwrap()
            .decode(text.as_bytes())
            .unwrap(),
        command
    );

    // A cluster without a session is reported as such, not silently dropped.
    let absent = Envelope::new(ResyncRequest {
        reason: "test".into(),
    })
    .for_cluster("c2".into(), "acme".into());
    assert_eq!(client.dispatch(absent).await, Err(DispatchError::NoSession));

    // The agent's status comes back through the client.
    let heartbeat = Envelope::new(Heartbeat {
        node_count: 3,
        cpu_allocatable_millis: 4000,
        cpu_requested_millis: 100,
        memory_allocatable_bytes: 1 << 33,
        memory_requested_bytes: 1 << 28,
        observed_at: chrono::Utc::now(),
    })
    .for_cluster("c1".into(), "acme".into());
    socket
        .send(Ws::text(
            Validator::shared().unwrap().encode(&heartbeat).unwrap(),
        ))
        .await
        .unwrap();
    let received = tokio::time::timeout(Duration::from_secs(5), statuses.recv())
        .await
        .unwrap()
        .unwrap();
    assert!(matches!(received.message, Message::Heartbeat(_)));
    assert_eq!(received.id, heartbeat.id);

    // Rotation: a raised floor pushed by the client cuts the agent's session.
    client.push_floors(vec![
        Floor {
            min_token_version: 2,
            ..floor("c1")
        },
        floor("c2"),
    ]);
    let closed = tokio::time::timeout(Duration::from_secs(2), async {
        loop {
            match socket.next().await {
                Some(Ok(Ws::Close(frame))) => return frame.map(|f| u16::from(f.code)),
                Some(Ok(_)) => continue,
                _ => return None,
            }
        }
    })
    .await
    .unwrap();
    assert_eq!(closed, Some(4003));
    shutdown.cancel();
}
