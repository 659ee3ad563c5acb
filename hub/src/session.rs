//! One WebSocket session: a reader that validates and routes every frame, and a writer that
//! drains the session's bounded outbox, pings, and notices dead or slow peers.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use axum::extract::ws::{CloseFrame, Message};
use futures::{Sink, SinkExt, Stream, StreamExt};
use kubenest_contracts::{Id, Identity};
use tokio::sync::mpsc;

use crate::Hub;
use crate::metrics::TypeLabel;
use crate::route::{self, Peer};
use crate::sessions::{AgentSession, Outbound, Outbox, close};

/// Serves one upgraded connection until either side closes it.
pub(crate) async fn run<S>(hub: Arc<Hub>, identity: Identity, socket: S)
where
    S: Stream<Item = Result<Message, axum::Error>>
        + Sink<Message, Error = axum::Error>
        + Send
        + 'static,
{
    let session_id = hub.sessions.next_id();
    let capacity = match identity {
        Identity::Cluster { .. } => hub.settings.agent_queue,
        Identity::Backend { .. } => hub.settings.backend_queue,
    };
    let (outbox, outgoing) = Outbox::new(capacity, &hub.shutdown);
    let route = match &identity {
        Identity::Cluster {
            cluster_id,
            org_id,
            token_version,
        } => {
            let epoch = chrono::Utc::now().timestamp_micros();
            let session = AgentSession {
                session_id,
                epoch,
                org_id: org_id.clone(),
                token_version: *token_version,
                outbox: outbox.clone(),
            };
            hub.sessions.register_agent(cluster_id.clone(), session);
            spawn_lease(&hub, cluster_id.clone(), epoch, true);
            tracing::info!(%cluster_id, session_id, "agent connected");
            Some((cluster_id.clone(), org_id.clone(), epoch))
        }
        Identity::Backend { subject } => {
            hub.sessions.register_backend(session_id, outbox.clone());
            tracing::info!(subject, session_id, "backend connected");
            None
        }
    };

    let (sink, stream) = socket.split();
    let started = Instant::now();
    let last_seen = Arc::new(AtomicU64::new(0));
    let route_ids = route.as_ref().map(|(c, o, _)| (c.clone(), o.clone()));
    let writer = tokio::spawn(write_loop(
        hub.clone(),
        outbox.clone(),
        outgoing,
        sink,
        started,
        last_seen.clone(),
        route_ids,
    ));
    let mut peer = Peer {
        session_id,
        identity,
        outbox: outbox.clone(),
        malformed: 0,
    };
    read_loop(&hub, &mut peer, stream, started, &last_seen).await;
    outbox.close(close::GOING_AWAY, "connection closed");
    let _ = writer.await;

    match route {
        Some((cluster_id, _, epoch)) => {
            hub.sessions.unregister_agent(&cluster_id, session_id);
            route::agent_gone(&hub, &cluster_id, session_id);
            spawn_lease(&hub, cluster_id.clone(), epoch, false);
            tracing::info!(%cluster_id, session_id, reason = outbox.close_reason().1, "agent disconnected");
        }
        None => {
            hub.sessions.unregister_backend(session_id);
            route::backend_gone(&hub, session_id);
            tracing::info!(
                session_id,
                reason = outbox.close_reason().1,
                "backend disconnected"
            );
        }
    }
}

fn spawn_lease(hub: &Arc<Hub>, cluster_id: Id, epoch: i64, acquire: bool) {
    let leases = hub.leases.clone();
    tokio::spawn(async move {
        let result = if acquire {
            leases.acquire(&cluster_id, epoch).await
        } else {
            leases.release(&cluster_id, epoch).await
        };
        if let Err(error) = result {
            tracing::warn!(%cluster_id, %error, acquire, "session lease update failed");
        }
    });
}

fn millis_since(started: Instant) -> u64 {
    u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX)
}

async fn read_loop<R>(
    hub: &Hub,
    peer: &mut Peer,
    mut stream: R,
    started: Instant,
    last_seen: &AtomicU64,
) where
    R: Stream<Item = Result<Message, axum::Error>> + Unpin,
{
    loop {
        let next = tokio::select! {
            _ = peer.outbox.closed() => return,
            next = stream.next() => next,
        };
        let Some(Ok(message)) = next else { return };
        last_seen.store(millis_since(started), Ordering::Relaxed);
        match message {
            Message::Text(text) => route::handle_text(hub, peer, text),
            Message::Binary(_) => {
                peer.malformed += 1;
                hub.metrics.reject("binary_frame");
                if peer.malformed > hub.settings.max_malformed {
                    peer.outbox
                        .close(close::POLICY, "too many malformed frames");
                }
            }
            Message::Close(_) => return,
            Message::Ping(_) | Message::Pong(_) => {}
        }
    }
}

async fn write_loop<W>(
    hub: Arc<Hub>,
    outbox: Outbox,
    mut outgoing: mpsc::Receiver<Outbound>,
    mut sink: W,
    started: Instant,
    last_seen: Arc<AtomicU64>,
    route: Option<(Id, Id)>,
) where
    W: Sink<Message, Error = axum::Error> + Unpin,
{
    let settings = &hub.settings;
    let mut ping = tokio::time::interval(settings.ping_interval);
    ping.tick().await;
    loop {
        let frame = tokio::select! {
            biased;
            _ = outbox.closed() => break,
            frame = outgoing.recv() => frame,
            _ = ping.tick() => {
                let silent = millis_since(started).saturating_sub(last_seen.load(Ordering::Relaxed));
                if u128::from(silent) > settings.idle_timeout.as_millis() {
                    outbox.close(close::SLOW_OR_DEAD, "no answer to pings");
                    break;
                }
                if tokio::time::timeout(settings.write_timeout, sink.send(Message::Ping(Default::default()))).await.is_err() {
                    outbox.close(close::SLOW_OR_DEAD, "write timed out");
                    break;
                }
                continue;
            }
        };
        let Some(frame) = frame else { break };
        match tokio::time::timeout(settings.write_timeout, sink.send(Message::Text(frame.text)))
            .await
        {
            Ok(Ok(())) => {
                hub.metrics
                    .frames_out
                    .get_or_create(&TypeLabel { r#type: frame.kind })
                    .inc();
                if let (Some(pending), Some((cluster_id, org_id))) = (&frame.ack, &route) {
                    route::ack(&hub, pending, cluster_id, org_id);
                }
            }
            Ok(Err(_)) => {
                outbox.close(close::GOING_AWAY, "connection lost");
                break;
            }
            Err(_) => {
                outbox.close(close::SLOW_OR_DEAD, "write timed out");
                break;
            }
        }
    }
    // Commands still queued were never written: their backends get no ack and will re-send.
    let (code, reason) = outbox.close_reason();
    let close = Message::Close(Some(CloseFrame {
        code,
        reason: reason.into(),
    }));
    let _ = tokio::time::timeout(settings.write_timeout, sink.send(close)).await;
    let _ = tokio::time::timeout(settings.write_timeout, sink.close()).await;
}
