//! A real hub on a loopback port, and WebSocket clients that speak to it as agents and backends.

#![allow(dead_code)] // each test binary uses part of this kit

use std::path::PathBuf;
use std::time::Duration;

use clap::Parser;
use futures::{SinkExt, StreamExt};
use kubenest_contracts::{
    Envelope, Floor, FloorsSnapshot, FloorsUpdate, Id, Message, TokenSigner, Validator,
};
use tokio::net::TcpStream;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::tungstenite::protocol::CloseFrame;
use tokio_tungstenite::tungstenite::{self, Message as Ws};
use tokio_tungstenite::{MaybeTlsStream, WebSocketStream};
use tokio_util::sync::CancellationToken;

pub const ISSUER: &str = "kubenest-test";
pub const AGENT: &str = kubenest_contracts::names::AGENT_SUBPROTOCOL;
pub const BACKEND: &str = kubenest_contracts::names::BACKEND_SUBPROTOCOL;

/// The control plane's signing key, with its public half on disk for the hub.
pub struct Keys {
    pub signer: TokenSigner,
    pub public_key: PathBuf,
    _dir: tempfile::TempDir,
}

pub fn keys() -> Keys {
    let key = rcgen::KeyPair::generate_for(&rcgen::PKCS_ED25519).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let public_key = dir.path().join("hub.pub");
    std::fs::write(&public_key, key.public_key_pem()).unwrap();
    Keys {
        signer: TokenSigner::from_pem(key.serialize_pem().as_bytes(), ISSUER).unwrap(),
        public_key,
        _dir: dir,
    }
}

impl Keys {
    pub fn cluster(&self, cluster: &str, org: &str, version: u64) -> String {
        self.signer
            .cluster_token(&Id::from(cluster), &Id::from(org), version)
            .unwrap()
    }

    pub fn backend(&self) -> String {
        self.signer
            .backend_token("controllers", Duration::from_secs(600))
            .unwrap()
    }
}

/// A running hub replica.
pub struct TestHub {
    pub url: String,
    pub admin: String,
    pub shutdown: CancellationToken,
    pub task: tokio::task::JoinHandle<Result<(), kubenest_hub::HubError>>,
}

/// Starts a hub with `extra` command-line arguments (plaintext, no leases unless overridden).
pub async fn start_hub(keys: &Keys, extra: &[&str]) -> TestHub {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let admin = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let tls = extra.iter().any(|a| a.starts_with("--tls-cert"));
    let scheme = if tls { "wss" } else { "ws" };
    let url = format!("{scheme}://{}/v1/connect", listener.local_addr().unwrap());
    let admin_url = format!("http://{}", admin.local_addr().unwrap());
    let mut argv = vec![
        "kubenest-hub".to_owned(),
        format!("--jwt-public-key={}", keys.public_key.display()),
        format!("--jwt-issuer={ISSUER}"),
    ];
    if !tls {
        argv.push("--insecure-plaintext".to_owned());
    }
    if !extra.iter().any(|a| a.starts_with("--kubeconfig")) {
        argv.push("--no-leases".to_owned());
    }
    argv.extend(extra.iter().map(|s| (*s).to_owned()));
    let args = kubenest_hub::Args::try_parse_from(argv).unwrap();
    let shutdown = CancellationToken::new();
    let task = tokio::spawn(kubenest_hub::run(args, listener, admin, shutdown.clone()));
    TestHub {
        url,
        admin: admin_url,
        shutdown,
        task,
    }
}

pub type Socket = WebSocketStream<MaybeTlsStream<TcpStream>>;

/// A refused upgrade: the HTTP status and the Retry-After header.
#[derive(Debug)]
pub struct Refused {
    pub status: u16,
    pub retry_after: Option<String>,
    pub body: String,
}

pub async fn try_connect(
    url: &str,
    protocol: Option<&str>,
    token: Option<&str>,
) -> Result<Client, Refused> {
    let mut request = url.into_client_request().unwrap();
    if let Some(protocol) = protocol {
        request
            .headers_mut()
            .insert("Sec-WebSocket-Protocol", protocol.parse().unwrap());
    }
    if let Some(token) = token {
        request
            .headers_mut()
            .insert("Authorization", format!("Bearer {token}").parse().unwrap());
    }
    match tokio_tungstenite::connect_async(request).await {
        Ok((ws, _)) => Ok(Client { ws }),
        Err(tungstenite::Error::Http(response)) => Err(Refused {
            status: response.status().as_u16(),
            retry_after: response
                .headers()
                .get("retry-after")
                .map(|v| v.to_str().unwrap().to_owned()),
            body: String::from_utf8_lossy(response.body().as_deref().unwrap_or_default())
                .into_owned(),
        }),
        Err(other) => panic!("connect failed: {other}"),
    }
}

pub async fn connect(url: &str, protocol: &str, token: &str) -> Client {
    try_connect(url, Some(protocol), Some(token)).await.unwrap()
}

/// A WebSocket client of the hub.
pub struct Client {
    pub ws: Socket,
}

/// What the client read next.
#[allow(clippy::large_enum_variant)] // short-lived, in tests
#[derive(Debug)]
pub enum Next {
    Frame(Envelope),
    Closed(Option<u16>),
    Nothing,
}

impl Client {
    pub async fn send(&mut self, envelope: &Envelope) {
        let text = Validator::shared().unwrap().encode(envelope).unwrap();
        self.ws.send(Ws::text(text)).await.unwrap();
    }

    pub async fn send_raw(&mut self, text: &str) {
        self.ws.send(Ws::text(text.to_owned())).await.unwrap();
    }

    /// The next frame or close within `wait`, skipping the hub's `floors.applied`
    /// acknowledgements (see [`Client::applied`]).
    pub async fn next(&mut self, wait: Duration) -> Next {
        loop {
            match self.next_any(wait).await {
                Next::Frame(envelope) if matches!(envelope.message, Message::FloorsApplied(_)) => {}
                other => return other,
            }
        }
    }

    /// The hub's acknowledgement of the floors frame `frame`.
    pub async fn applied(&mut self, frame: &Envelope) -> kubenest_contracts::FloorsApplied {
        loop {
            match self.next_any(Duration::from_secs(5)).await {
                Next::Frame(Envelope {
                    message: Message::FloorsApplied(applied),
                    correlation_id,
                    ..
                }) if applied.frame_id == frame.id => {
                    assert_eq!(correlation_id, Some(frame.id));
                    return applied;
                }
                Next::Frame(_) => {}
                other => panic!("expected floors.applied for {}, got {other:?}", frame.id),
            }
        }
    }

    /// The next frame or close within `wait`, whatever it is.
    pub async fn next_any(&mut self, wait: Duration) -> Next {
        let deadline = tokio::time::Instant::now() + wait;
        loop {
            let Ok(next) = tokio::time::timeout_at(deadline, self.ws.next()).await else {
                return Next::Nothing;
            };
            match next {
                Some(Ok(Ws::Text(text))) => {
                    let envelope = Validator::shared()
                        .unwrap()
                        .decode(text.as_bytes())
                        .unwrap();
                    return Next::Frame(envelope);
                }
                Some(Ok(Ws::Close(frame))) => {
                    return Next::Closed(frame.map(|f: CloseFrame| u16::from(f.code)));
                }
                Some(Ok(_)) => continue,
                Some(Err(_)) | None => return Next::Closed(None),
            }
        }
    }

    /// The next frame, failing the test on anything else.
    pub async fn frame(&mut self) -> Envelope {
        match self.next(Duration::from_secs(5)).await {
            Next::Frame(envelope) => envelope,
            other => panic!("expected a frame, got {other:?}"),
        }
    }

    /// Asserts nothing arrives for a short while.
    pub async fn expect_silence(&mut self) {
        match self.next(Duration::from_millis(300)).await {
            Next::Nothing => {}
            other => panic!("expected silence, got {other:?}"),
        }
    }

    /// Waits for the close frame and returns its code.
    pub async fn closed(&mut self, wait: Duration) -> Option<u16> {
        loop {
            match self.next(wait).await {
                Next::Closed(code) => return code,
                Next::Frame(_) => continue,
                Next::Nothing => panic!("not closed within {wait:?}"),
            }
        }
    }
}

pub fn floor(cluster: &str, org: &str, min: u64) -> Floor {
    Floor {
        cluster_id: Id::from(cluster),
        org_id: Id::from(org),
        min_token_version: min,
    }
}

pub fn floors_snapshot(floors: Vec<Floor>) -> Envelope {
    Envelope::new(FloorsSnapshot {
        snapshot_id: uuid::Uuid::new_v4(),
        part: 1,
        parts: 1,
        floors,
    })
}

pub fn floors_update(floors: Vec<Floor>) -> Envelope {
    Envelope::new(FloorsUpdate { floors })
}

/// A valid command from the fixtures, addressed to `cluster` of `org`.
pub fn command(cluster: &str, org: &str) -> Envelope {
    // At run time: cargo reuses built tests across clone locations, so a compile-time path can
    // point at a clone that is gone.
    let path = std::env::var_os("CARGO_MANIFEST_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")))
        .join("../contracts/fixtures/app.deploy/pass/typical.json");
    let envelope = Validator::shared()
        .unwrap()
        .decode(&std::fs::read(path).unwrap())
        .unwrap();
    let mut fresh = Envelope::new(envelope.message);
    fresh.cluster_id = Some(Id::from(cluster));
    fresh.org_id = Some(Id::from(org));
    fresh
}

/// A heartbeat from `cluster` of `org`.
pub fn heartbeat(cluster: &str, org: &str) -> Envelope {
    Envelope::new(kubenest_contracts::Heartbeat {
        node_count: 3,
        cpu_allocatable_millis: 12000,
        cpu_requested_millis: 100,
        memory_allocatable_bytes: 1 << 34,
        memory_requested_bytes: 1 << 28,
        observed_at: chrono::Utc::now(),
    })
    .for_cluster(Id::from(cluster), Id::from(org))
}

/// The backend's next frame must be a route.ack/route.nack for `command`.
pub async fn route_reply(backend: &mut Client, command: &Envelope) -> Message {
    let reply = backend.frame().await;
    assert_eq!(reply.correlation_id, Some(command.id));
    reply.message
}
