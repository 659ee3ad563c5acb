//! The hub against nats-server on loopback, side by side in one run: one backend client and 100
//! agents; the backend sends commands with a 256-byte payload round-robin to the agents, each
//! agent answers with a status frame, and the backend matches answers to commands.
//!
//! - throughput: closed loop with a window of in-flight commands, round trips per second, the
//!   median of three rounds that alternate between the systems;
//! - latency: open loop at a fixed rate (20k/s, or half the slower system's throughput if that
//!   is lower), round-trip p50/p99;
//! - memory: the hub's resident memory per idle agent with 5,000 agents connected.
//!
//! Both systems carry the same bytes and the clients do the same work (parse each frame, build
//! each answer). The hub additionally authenticates every session and validates every frame
//! against its schema; NATS relays opaque bytes. `make bench BENCH=hub`; the last line is JSON.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // a benchmark aborts on error

use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, LazyLock};
use std::time::{Duration, Instant};

use futures::{SinkExt, StreamExt};
use kubenest_contracts::{Envelope, FloorsSnapshot, Id, ResyncRequest, TokenSigner, Validator};
use kubenest_testkit::bench::size;
use serde_json::{Value, json};
use tokio::sync::{Semaphore, mpsc};
use tokio_tungstenite::tungstenite::Message as Ws;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;

// Full size under `make bench`; tiny under `make test`, which only checks that the benchmark
// still runs (kubenest_testkit::bench).
static AGENTS: LazyLock<usize> = LazyLock::new(|| size(100, 10));
static IDLE_AGENTS: LazyLock<usize> = LazyLock::new(|| size(5000, 50));
const WINDOW: usize = 256;
static ROUNDS: LazyLock<usize> = LazyLock::new(|| size(3, 1));
static PHASE: LazyLock<Duration> =
    LazyLock::new(|| size(Duration::from_secs(3), Duration::from_millis(200)));
const TARGET_RATE: f64 = 20_000.0;
const MAX_MESSAGES: usize = 1 << 21;
const ORG: &str = "bench";
const SENT_AT: &str = "2026-11-29T12:00:00Z";

fn cluster(i: usize) -> String {
    format!("c{i}")
}

/// A command frame whose payload is exactly 256 bytes, for sequence number `seq`.
fn command_frame(template: &str, agent: usize, seq: u64) -> String {
    template
        .replacen(
            "{ID}",
            &uuid::Uuid::from_u128(u128::from(seq)).to_string(),
            1,
        )
        .replacen("{CLUSTER}", &cluster(agent), 1)
}

fn command_template() -> String {
    let mut reason = String::new();
    loop {
        let payload = serde_json::to_string(&ResyncRequest {
            reason: reason.clone(),
        })
        .unwrap();
        if payload.len() >= 256 {
            break;
        }
        reason.push('x');
    }
    let frame = json!({
        "id": "{ID}", "type": "resync.request", "direction": "command", "cluster_id": "{CLUSTER}",
        "org_id": ORG, "sent_at": SENT_AT, "schema_version": 1, "payload": { "reason": reason }
    });
    frame.to_string()
}

/// The agent's answer to a command frame (a valid `command.accepted` for its own cluster).
fn answer(agent: usize, command: &[u8]) -> Option<String> {
    let command: Value = serde_json::from_slice(command).ok()?;
    let id = command.get("id")?.as_str()?;
    Some(format!(
        r#"{{"id":"{}","type":"command.accepted","direction":"status","cluster_id":"{}","org_id":"{ORG}","sent_at":"{SENT_AT}","schema_version":1,"payload":{{"command_id":"{id}"}}}}"#,
        uuid::Uuid::new_v4(),
        cluster(agent)
    ))
}

/// The sequence number an answer is for (`None` for anything else, e.g. route.ack).
fn answered_seq(frame: &[u8]) -> Option<u64> {
    let frame: Value = serde_json::from_slice(frame).ok()?;
    if frame.get("type")?.as_str()? != "command.accepted" {
        return None;
    }
    let id = uuid::Uuid::parse_str(frame.get("payload")?.get("command_id")?.as_str()?).ok()?;
    u64::try_from(id.as_u128()).ok()
}

/// Send timestamps and round-trip results shared by the sender and the receiver.
struct Tracker {
    start: Instant,
    sent: Vec<AtomicU64>,
    window: Semaphore,
    done: AtomicU64,
}

impl Tracker {
    fn new() -> Arc<Self> {
        Arc::new(Self {
            start: Instant::now(),
            sent: (0..MAX_MESSAGES).map(|_| AtomicU64::new(0)).collect(),
            window: Semaphore::new(WINDOW),
            done: AtomicU64::new(0),
        })
    }

    fn now(&self) -> u64 {
        u64::try_from(self.start.elapsed().as_nanos()).unwrap_or(u64::MAX)
    }

    fn mark_sent(&self, seq: u64) {
        self.sent[seq as usize % MAX_MESSAGES].store(self.now(), Ordering::Relaxed);
    }

    /// Records an answer; returns the round trip in microseconds.
    fn answered(&self, seq: u64) -> u64 {
        self.window.add_permits(1);
        self.done.fetch_add(1, Ordering::Relaxed);
        let sent = self.sent[seq as usize % MAX_MESSAGES].load(Ordering::Relaxed);
        self.now().saturating_sub(sent) / 1000
    }
}

/// How the backend of one system sends a frame to an agent.
trait Send2 {
    async fn send(&mut self, agent: usize, frame: String);
}

struct Phases {
    max_per_s: f64,
    latencies_us: Vec<u64>,
}

/// Runs the closed-loop phase, then the open-loop phase at `rate` (computed from the first
/// phase by `pick_rate`), returning throughput and latencies.
async fn measure<S: Send2>(
    sender: &mut S,
    tracker: &Arc<Tracker>,
    latencies: &mut mpsc::UnboundedReceiver<u64>,
    rate: Option<f64>,
) -> Phases {
    let template = command_template();
    let mut seq = 0u64;
    // Closed loop.
    let before = tracker.done.load(Ordering::Relaxed);
    let started = Instant::now();
    while started.elapsed() < *PHASE {
        tracker.window.acquire().await.unwrap().forget();
        tracker.mark_sent(seq);
        sender
            .send(
                seq as usize % *AGENTS,
                command_frame(&template, seq as usize % *AGENTS, seq),
            )
            .await;
        seq += 1;
    }
    let max_per_s =
        (tracker.done.load(Ordering::Relaxed) - before) as f64 / started.elapsed().as_secs_f64();
    tokio::time::sleep(Duration::from_millis(500)).await;
    while latencies.try_recv().is_ok() {}
    let Some(rate) = rate else {
        return Phases {
            max_per_s,
            latencies_us: Vec::new(),
        };
    };
    // Open loop at a fixed rate, in 1 ms ticks; the window only guards against collapse.
    let per_tick = (rate / 1000.0).max(1.0);
    let mut due = 0.0;
    let mut tick = tokio::time::interval(Duration::from_millis(1));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Burst);
    let started = Instant::now();
    let mut sent = 0u64;
    while started.elapsed() < *PHASE {
        tick.tick().await;
        due += per_tick;
        while due >= 1.0 {
            due -= 1.0;
            if let Ok(permit) = tracker.window.try_acquire() {
                permit.forget();
                tracker.mark_sent(seq);
                sender
                    .send(
                        seq as usize % *AGENTS,
                        command_frame(&template, seq as usize % *AGENTS, seq),
                    )
                    .await;
                seq += 1;
                sent += 1;
            }
        }
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    let mut latencies_us = Vec::with_capacity(sent as usize);
    while let Ok(l) = latencies.try_recv() {
        latencies_us.push(l);
    }
    latencies_us.sort_unstable();
    Phases {
        max_per_s,
        latencies_us,
    }
}

fn median(values: &mut [f64]) -> f64 {
    values.sort_by(f64::total_cmp);
    values[values.len() / 2]
}

fn percentile(sorted: &[u64], p: f64) -> u64 {
    if sorted.is_empty() {
        return 0;
    }
    sorted[((sorted.len() as f64 - 1.0) * p).round() as usize]
}

// ---------------------------------------------------------------- hub

struct HubProcess {
    child: Child,
    url: String,
    _dir: tempfile::TempDir,
    signer: TokenSigner,
}

impl Drop for HubProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn start_hub() -> HubProcess {
    let dir = tempfile::tempdir().unwrap();
    let key = rcgen::KeyPair::generate_for(&rcgen::PKCS_ED25519).unwrap();
    std::fs::write(dir.path().join("hub.pub"), key.public_key_pem()).unwrap();
    let signer = TokenSigner::from_pem(key.serialize_pem().as_bytes(), "bench").unwrap();
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let admin = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let child = Command::new(env!("CARGO_BIN_EXE_kubenest-hub"))
        .args([
            &format!("--listen=127.0.0.1:{port}"),
            &format!("--admin-listen=127.0.0.1:{admin}"),
            &format!("--jwt-public-key={}", dir.path().join("hub.pub").display()),
            "--jwt-issuer=bench",
            "--insecure-plaintext",
            "--no-leases",
        ])
        .env("RUST_LOG", "warn")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    HubProcess {
        child,
        url: format!("ws://127.0.0.1:{port}/v1/connect"),
        _dir: dir,
        signer,
    }
}

type Socket =
    tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>;

async fn ws_connect(url: &str, protocol: &str, token: &str) -> Socket {
    for _ in 0..200 {
        let mut request = url.into_client_request().unwrap();
        request
            .headers_mut()
            .insert("Sec-WebSocket-Protocol", protocol.parse().unwrap());
        request
            .headers_mut()
            .insert("Authorization", format!("Bearer {token}").parse().unwrap());
        match tokio_tungstenite::connect_async(request).await {
            Ok((ws, _)) => return ws,
            Err(_) => tokio::time::sleep(Duration::from_millis(50)).await,
        }
    }
    panic!("cannot connect to the hub");
}

fn rss_bytes(pid: u32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap()
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next()?.parse::<u64>().ok())
        .unwrap()
        * 1024
}

struct HubSender(futures::stream::SplitSink<Socket, Ws>);

impl Send2 for HubSender {
    async fn send(&mut self, _agent: usize, frame: String) {
        self.0.send(Ws::text(frame)).await.unwrap();
    }
}

async fn push_floors(backend: &mut futures::stream::SplitSink<Socket, Ws>, clusters: usize) {
    let snapshot_id = uuid::Uuid::new_v4();
    let parts = clusters.div_ceil(5000);
    for part in 0..parts {
        let floors = (part * 5000..((part + 1) * 5000).min(clusters))
            .map(|i| kubenest_contracts::Floor {
                cluster_id: Id::new(cluster(i)),
                org_id: Id::from(ORG),
                min_token_version: 1,
            })
            .collect();
        let frame = Envelope::new(FloorsSnapshot {
            snapshot_id,
            part: part as u32 + 1,
            parts: parts as u32,
            floors,
        });
        backend
            .send(Ws::text(
                Validator::shared().unwrap().encode(&frame).unwrap(),
            ))
            .await
            .unwrap();
    }
}

async fn hub_agent(url: String, token: String, agent: usize) -> tokio::task::JoinHandle<()> {
    let ws = ws_connect(&url, kubenest_contracts::names::AGENT_SUBPROTOCOL, &token).await;
    tokio::spawn(async move {
        let (mut tx, mut rx) = ws.split();
        while let Some(Ok(message)) = rx.next().await {
            if let Ws::Text(text) = message
                && let Some(reply) = answer(agent, text.as_bytes())
                && tx.send(Ws::text(reply)).await.is_err()
            {
                return;
            }
        }
    })
}

async fn bench_hub(rate: Option<f64>, hub: &HubProcess) -> Phases {
    let backend = ws_connect(
        &hub.url,
        kubenest_contracts::names::BACKEND_SUBPROTOCOL,
        &hub.signer
            .backend_token("bench", Duration::from_secs(3600))
            .unwrap(),
    )
    .await;
    let (mut tx, mut rx) = backend.split();
    push_floors(&mut tx, *IDLE_AGENTS).await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    let mut agents = Vec::new();
    for i in 0..*AGENTS {
        let token = hub
            .signer
            .cluster_token(&Id::new(cluster(i)), &Id::from(ORG), 1)
            .unwrap();
        agents.push(hub_agent(hub.url.clone(), token, i).await);
    }
    let tracker = Tracker::new();
    let (latency_tx, mut latency_rx) = mpsc::unbounded_channel();
    let receiver = tokio::spawn({
        let tracker = tracker.clone();
        async move {
            while let Some(Ok(Ws::Text(text))) = rx.next().await {
                if let Some(seq) = answered_seq(text.as_bytes()) {
                    let _ = latency_tx.send(tracker.answered(seq));
                }
            }
        }
    });
    let phases = measure(&mut HubSender(tx), &tracker, &mut latency_rx, rate).await;
    receiver.abort();
    agents.iter().for_each(tokio::task::JoinHandle::abort);
    phases
}

async fn idle_bytes_per_agent(hub: &HubProcess) -> f64 {
    let backend = ws_connect(
        &hub.url,
        kubenest_contracts::names::BACKEND_SUBPROTOCOL,
        &hub.signer
            .backend_token("bench", Duration::from_secs(3600))
            .unwrap(),
    )
    .await;
    let (mut tx, _rx) = backend.split();
    push_floors(&mut tx, *IDLE_AGENTS).await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    let before = rss_bytes(hub.child.id());
    let mut sockets = Vec::with_capacity(*IDLE_AGENTS);
    for i in 0..*IDLE_AGENTS {
        let token = hub
            .signer
            .cluster_token(&Id::new(cluster(i)), &Id::from(ORG), 1)
            .unwrap();
        sockets.push(
            ws_connect(
                &hub.url,
                kubenest_contracts::names::AGENT_SUBPROTOCOL,
                &token,
            )
            .await,
        );
    }
    tokio::time::sleep(Duration::from_secs(2)).await;
    let after = rss_bytes(hub.child.id());
    drop(sockets);
    (after.saturating_sub(before)) as f64 / *IDLE_AGENTS as f64
}

// ---------------------------------------------------------------- NATS

struct NatsProcess {
    child: Child,
    url: String,
}

impl Drop for NatsProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn start_nats() -> NatsProcess {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let child = Command::new("nats-server")
        .args(["-a", "127.0.0.1", "-p", &port.to_string()])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("nats-server (Debian package nats-server) is needed for this benchmark");
    NatsProcess {
        child,
        url: format!("nats://127.0.0.1:{port}"),
    }
}

async fn nats_connect(url: &str) -> async_nats::Client {
    for _ in 0..200 {
        if let Ok(client) = async_nats::connect(url).await {
            return client;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("cannot connect to nats-server");
}

struct NatsSender(async_nats::Client);

impl Send2 for NatsSender {
    async fn send(&mut self, agent: usize, frame: String) {
        self.0
            .publish(format!("cmd.{}", cluster(agent)), frame.into())
            .await
            .unwrap();
    }
}

async fn bench_nats(rate: Option<f64>, nats: &NatsProcess) -> Phases {
    let backend = nats_connect(&nats.url).await;
    let mut status = backend.subscribe("status").await.unwrap();
    let mut agents = Vec::new();
    for i in 0..*AGENTS {
        let client = nats_connect(&nats.url).await;
        let mut commands = client
            .subscribe(format!("cmd.{}", cluster(i)))
            .await
            .unwrap();
        agents.push(tokio::spawn(async move {
            while let Some(message) = commands.next().await {
                if let Some(reply) = answer(i, &message.payload) {
                    let _ = client.publish("status", reply.into()).await;
                }
            }
        }));
    }
    backend.flush().await.unwrap();
    tokio::time::sleep(Duration::from_millis(300)).await;
    let tracker = Tracker::new();
    let (latency_tx, mut latency_rx) = mpsc::unbounded_channel();
    let receiver = tokio::spawn({
        let tracker = tracker.clone();
        async move {
            while let Some(message) = status.next().await {
                if let Some(seq) = answered_seq(&message.payload) {
                    let _ = latency_tx.send(tracker.answered(seq));
                }
            }
        }
    });
    let phases = measure(&mut NatsSender(backend), &tracker, &mut latency_rx, rate).await;
    receiver.abort();
    agents.iter().for_each(tokio::task::JoinHandle::abort);
    phases
}

#[tokio::main]
async fn main() {
    let hub = start_hub();
    let nats = start_nats();
    // Throughput, alternating the two systems over three rounds (the median of each counts),
    // so that a noisy moment on two shared cores does not favour either.
    let (mut hub_rounds, mut nats_rounds) = (Vec::new(), Vec::new());
    for _ in 0..*ROUNDS {
        hub_rounds.push(bench_hub(None, &hub).await.max_per_s);
        nats_rounds.push(bench_nats(None, &nats).await.max_per_s);
    }
    let (hub_max, nats_max) = (median(&mut hub_rounds), median(&mut nats_rounds));
    let rate = TARGET_RATE.min(0.5 * hub_max.min(nats_max)).round();
    let hub_run = bench_hub(Some(rate), &hub).await;
    let nats_run = bench_nats(Some(rate), &nats).await;
    let idle = idle_bytes_per_agent(&hub).await;

    let (hub_msgs, nats_msgs) = (hub_max, nats_max);
    println!(
        "throughput (round trips/s): hub {hub_msgs:.0}, nats {nats_msgs:.0}; at {rate} msg/s: hub p50 {} us p99 {} us, nats p50 {} us p99 {} us; hub idle agent {idle:.0} B",
        percentile(&hub_run.latencies_us, 0.5),
        percentile(&hub_run.latencies_us, 0.99),
        percentile(&nats_run.latencies_us, 0.5),
        percentile(&nats_run.latencies_us, 0.99),
    );
    let report = json!({
        "bench": "hub",
        "agents": *AGENTS,
        "payload_bytes": 256,
        "window": WINDOW,
        "hub_rounds_per_s": hub_rounds,
        "nats_rounds_per_s": nats_rounds,
        "hub_msgs_per_s": hub_msgs.round(),
        "nats_msgs_per_s": nats_msgs.round(),
        "ratio": (hub_msgs / nats_msgs * 1000.0).round() / 1000.0,
        "latency_rate_per_s": rate,
        "hub_p50_us": percentile(&hub_run.latencies_us, 0.5),
        "hub_p99_us": percentile(&hub_run.latencies_us, 0.99),
        "nats_p50_us": percentile(&nats_run.latencies_us, 0.5),
        "nats_p99_us": percentile(&nats_run.latencies_us, 0.99),
        "idle_agents": *IDLE_AGENTS,
        "idle_bytes_per_agent": idle.round(),
    });
    println!("{report}");
}
