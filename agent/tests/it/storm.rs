//! A reconnect storm: 500 agent sessions on one hub replica, the replica restarted, and every
//! agent back through the agent's own dialer (`uplink::Dialer`, with the production
//! settings: a lost session is followed by a random wait of up to 10 s; failed attempts back off
//! from 500 ms to 30 s with full jitter on top of any `Retry-After`). The returns must be spread
//! — the busiest second sees at most 3× the average rate over the whole return — and all 500
//! back within 30 s of the restart. The hub is real (in-process, on a real socket), as is
//! the backend that pushes the revocation floors the hub needs before it admits agents.

use crate::common;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::{SinkExt as _, StreamExt as _};
use kubenest_agent::uplink::{self, UplinkConfig};
use kubenest_contracts::{self as wire, Envelope, FloorsSnapshot, Validator};
use tokio_tungstenite::tungstenite::Message as Ws;
use tokio_tungstenite::tungstenite::client::IntoClientRequest as _;
use tokio_util::sync::CancellationToken;

const AGENTS: usize = 500;

/// A hub replica without session Leases, restartable at the same address.
fn start_hub(
    key: &common::HubKey,
    address: &str,
) -> (CancellationToken, tokio::task::JoinHandle<()>) {
    let listener = std::net::TcpListener::bind(address).unwrap();
    let admin = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let args = <kubenest_hub::Args as clap::Parser>::try_parse_from([
        "kubenest-hub".to_owned(),
        format!("--jwt-public-key={}", key.public.display()),
        "--jwt-issuer=kubenest".to_owned(),
        "--insecure-plaintext".to_owned(),
        "--no-leases".to_owned(),
        "--drain=1".to_owned(),
    ])
    .unwrap();
    let shutdown = CancellationToken::new();
    let stop = shutdown.clone();
    let task = tokio::spawn(async move {
        let _ = kubenest_hub::run(args, listener, admin, stop).await;
    });
    (shutdown, task)
}

/// The controllers' part: a backend session that pushes the floors of every cluster, again
/// after each reconnect.
async fn backend(url: String, signer: Arc<wire::TokenSigner>, clusters: Vec<wire::Floor>) {
    loop {
        let mut request = url.as_str().into_client_request().unwrap();
        let token = signer
            .backend_token("storm", Duration::from_secs(3600))
            .unwrap();
        request.headers_mut().insert(
            "Sec-WebSocket-Protocol",
            kubenest_contracts::names::BACKEND_SUBPROTOCOL
                .parse()
                .unwrap(),
        );
        request
            .headers_mut()
            .insert("Authorization", format!("Bearer {token}").parse().unwrap());
        let Ok((socket, _)) = tokio_tungstenite::connect_async(request).await else {
            tokio::time::sleep(Duration::from_millis(100)).await;
            continue;
        };
        let (mut tx, mut rx) = socket.split();
        let frame = Envelope::new(FloorsSnapshot {
            snapshot_id: uuid::Uuid::new_v4(),
            part: 1,
            parts: 1,
            floors: clusters.clone(),
        });
        let text = Validator::shared().unwrap().encode(&frame).unwrap();
        if tx.send(Ws::text(text)).await.is_err() {
            continue;
        }
        while let Some(Ok(_)) = rx.next().await {}
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn five_hundred_agents_return_spread_out_after_a_hub_restart() {
    let key = common::HubKey::new();
    let address = format!("127.0.0.1:{}", kubenest_testkit::free_port().unwrap());
    let url = format!("ws://{address}/v1/connect");
    let (first_stop, first_hub) = start_hub(&key, &address);

    let org = wire::Id::new(uuid::Uuid::new_v4().to_string());
    let clusters: Vec<wire::Id> = (0..AGENTS)
        .map(|_| wire::Id::new(uuid::Uuid::new_v4().to_string()))
        .collect();
    let floors = clusters
        .iter()
        .map(|cluster_id| wire::Floor {
            cluster_id: cluster_id.clone(),
            org_id: org.clone(),
            min_token_version: 1,
        })
        .collect();
    let backend = tokio::spawn(backend(url.clone(), Arc::clone(&key.signer), floors));

    let open = Arc::new(AtomicUsize::new(0));
    let connects: Arc<Mutex<Vec<Instant>>> = Arc::default();
    let agents = CancellationToken::new();
    // The agents are futures of the test's own task; the hub and the backend run on the
    // runtime's workers.
    let fleet = futures::future::join_all(clusters.iter().map(|cluster_id| {
        let config = UplinkConfig {
            url: url.clone(),
            token: key.signer.cluster_token(cluster_id, &org, 1).unwrap(),
            tls: None,
            heartbeat_every: Duration::from_secs(15),
            backoff_base: Duration::from_millis(500),
            backoff_max: Duration::from_secs(30),
            reconnect_spread: Duration::from_secs(10),
            cluster_id: cluster_id.clone(),
            org_id: org.clone(),
        };
        let (open, connects, stop) = (Arc::clone(&open), Arc::clone(&connects), agents.clone());
        async move {
            let mut dialer = uplink::Dialer::new(&config);
            while let Some(socket) = dialer.session(&stop).await {
                connects.lock().unwrap().push(Instant::now());
                open.fetch_add(1, Ordering::SeqCst);
                // Until the hub closes the session (a close frame, or the socket ends), or the
                // test ends.
                let (_tx, mut rx) = socket.split();
                loop {
                    tokio::select! {
                        () = stop.cancelled() => break,
                        message = rx.next() => match message {
                            Some(Ok(message)) if !message.is_close() => {}
                            _ => break,
                        },
                    }
                }
                open.fetch_sub(1, Ordering::SeqCst);
            }
        }
    }));
    let script = async {
        common::eventually(
            "all 500 agents connected",
            Duration::from_secs(60),
            async || open.load(Ordering::SeqCst) == AGENTS,
        )
        .await;

        // The restart: every session ends, the replica is back on the same address at once.
        first_stop.cancel();
        first_hub.await.unwrap();
        // The replica sent every session a close frame; the agents have seen it.
        common::eventually(
            "every session closed",
            Duration::from_secs(10),
            async || open.load(Ordering::SeqCst) == 0,
        )
        .await;
        connects.lock().unwrap().clear();
        let restarted_hub = start_hub(&key, &address);
        let restarted = Instant::now();
        common::eventually("all 500 agents back", Duration::from_secs(30), async || {
            open.load(Ordering::SeqCst) == AGENTS
        })
        .await;

        let times = connects.lock().unwrap().clone();
        assert_eq!(times.len(), AGENTS, "each agent came back exactly once");
        let offsets: Vec<f64> = times
            .iter()
            .map(|t| t.duration_since(restarted).as_secs_f64())
            .collect();
        let (first, last) = (
            offsets.iter().copied().fold(f64::MAX, f64::min),
            offsets.iter().copied().fold(0.0, f64::max),
        );
        // The busiest second: the most returns within one second of any return.
        let mut sorted = offsets.clone();
        sorted.sort_by(f64::total_cmp);
        let busiest = (0..sorted.len())
            .map(|i| {
                sorted[i..]
                    .iter()
                    .take_while(|t| **t < sorted[i] + 1.0)
                    .count()
            })
            .max()
            .unwrap_or(0);
        let span = (last - first).max(1.0);
        let average = AGENTS as f64 / span;
        let peak = busiest as f64;
        eprintln!(
            "500 agents back between {first:.2}s and {last:.2}s after the restart: average \
             {average:.0}/s, busiest second {peak:.0}/s ({:.2}× the average)",
            peak / average
        );
        assert!(last <= 30.0, "the last agent came back after {last:.1}s");
        assert!(
            peak <= 3.0 * average,
            "returns bunched: the busiest second saw {peak:.0}, {:.1}× the average {average:.0}/s",
            peak / average
        );
        agents.cancel();
        restarted_hub
    };
    let (_, (hub_stop, hub)) = tokio::join!(fleet, script);
    backend.abort();
    hub_stop.cancel();
    let _ = hub.await;
}
