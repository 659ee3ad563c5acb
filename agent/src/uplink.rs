//! The uplink: the agent's one outbound connection to the hub.
//!
//! It dials the hub with the cluster JWT (TLS unless the URL says `ws://`), retries with capped
//! exponential backoff and full jitter (and never sooner than a `503`'s `Retry-After`), and on
//! every connect sends `hello`, a full `snapshot` and the current status of everything it holds,
//! so events lost while it was away heal themselves. Commands go to [`crate::commands`], which
//! stores them durably before they are answered; status events from the controllers reach the hub
//! through the [`Reporter`](crate::report::Reporter). While disconnected, events are dropped: they are level-based and
//! the reconnect resync replaces them.

use std::sync::Arc;
use std::time::Duration;

use futures::{SinkExt, StreamExt};
use kubenest_contracts::{self as wire, Envelope, Message, Validator};
use kubenest_runtime::backoff::{self, Backoff};
use tokio::sync::{mpsc, watch};
use tokio_tungstenite::tungstenite::Message as Ws;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::tungstenite::http::HeaderValue;
use tokio_util::sync::CancellationToken;

use crate::commands::Commands;

/// How the uplink dials.
#[derive(Clone)]
pub struct UplinkConfig {
    /// `ws(s)://host:port/v1/connect`.
    pub url: String,
    /// The cluster JWT.
    pub token: String,
    /// TLS roots for `wss://` (None: the built-in public roots).
    pub tls: Option<Arc<rustls::ClientConfig>>,
    pub heartbeat_every: Duration,
    /// First retry delay bound; doubles per failed attempt up to `backoff_max`.
    pub backoff_base: Duration,
    pub backoff_max: Duration,
    /// After a session ends the agent waits a uniformly random time up to this before dialling
    /// again: every agent of a replica that restarts loses its session at the same moment, and
    /// this spreads their return over the window instead of the first half second.
    pub reconnect_spread: Duration,
    /// The cluster and org ids (from the token's claims).
    pub cluster_id: wire::Id,
    pub org_id: wire::Id,
}

impl std::fmt::Debug for UplinkConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("UplinkConfig")
            .field("url", &self.url)
            .field("cluster_id", &self.cluster_id)
            .finish_non_exhaustive()
    }
}

/// A refused or failed connection attempt.
#[derive(Debug, thiserror::Error)]
pub enum ConnectError {
    #[error("the hub refused the session with HTTP {status}")]
    Refused {
        status: u16,
        retry_after: Option<Duration>,
    },
    #[error("connection failed: {0}")]
    Failed(String),
}

/// Uniformly random in `[0, window]`.
pub fn spread(window: Duration) -> Duration {
    backoff::spread(Duration::ZERO, window)
}

/// The wait before the next attempt after one failed: the jittered backoff
/// ([`Backoff`]: full jitter under a doubling cap), on top of what the hub asked for with
/// `Retry-After`. On top, not the larger of the two: a replica that answers every agent
/// `Retry-After: 5` would otherwise have them all back in the same instant.
pub fn next_delay(backoff: &mut Backoff, retry_after: Option<Duration>) -> Duration {
    let delay = backoff.next_delay();
    retry_after.map_or(delay, |after| after + delay)
}

/// A WebSocket session with the hub.
pub type Socket =
    tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>;

/// One attempt to open a session: the socket, or why the hub refused it.
pub async fn connect(config: &UplinkConfig) -> Result<Socket, ConnectError> {
    let mut request = config
        .url
        .as_str()
        .into_client_request()
        .map_err(|e| ConnectError::Failed(e.to_string()))?;
    let headers = request.headers_mut();
    headers.insert(
        "Sec-WebSocket-Protocol",
        HeaderValue::from_static(kubenest_contracts::names::AGENT_SUBPROTOCOL),
    );
    let bearer = HeaderValue::from_str(&format!("Bearer {}", config.token))
        .map_err(|_| ConnectError::Failed("the token is not a valid header value".into()))?;
    headers.insert("Authorization", bearer);
    let connector = config.tls.clone().map(tokio_tungstenite::Connector::Rustls);
    let ws_config = tokio_tungstenite::tungstenite::protocol::WebSocketConfig::default()
        .read_buffer_size(4096)
        .write_buffer_size(4096)
        .max_message_size(Some(1 << 20))
        .max_frame_size(Some(1 << 20));
    match tokio_tungstenite::connect_async_tls_with_config(
        request,
        Some(ws_config),
        // Frames are small and often follow each other (an acceptance, then a status): with
        // Nagle's algorithm the second waits for the peer's delayed acknowledgement (40 ms).
        true,
        connector,
    )
    .await
    {
        Ok((socket, _)) => Ok(socket),
        Err(tokio_tungstenite::tungstenite::Error::Http(response)) => {
            let retry_after = response
                .headers()
                .get("Retry-After")
                .and_then(|v| v.to_str().ok())
                .and_then(|v| v.trim().parse::<u64>().ok())
                .map(Duration::from_secs);
            Err(ConnectError::Refused {
                status: response.status().as_u16(),
                retry_after,
            })
        }
        Err(other) => Err(ConnectError::Failed(other.to_string())),
    }
}

/// Runs the uplink until `shutdown`.
pub async fn run(
    config: UplinkConfig,
    commands: Arc<Commands>,
    mut events: mpsc::Receiver<Message>,
    connected: watch::Sender<bool>,
    shutdown: CancellationToken,
) {
    let mut dialer = Dialer::new(&config);
    while let Some(socket) = dialer.session(&shutdown).await {
        tracing::info!(url = %config.url, "connected to the hub");
        // Whatever queued while disconnected is older than the resync about to be sent.
        while events.try_recv().is_ok() {}
        let _ = connected.send(true);
        let reason = session(&config, &commands, socket, &mut events, &shutdown).await;
        let _ = connected.send(false);
        tracing::info!(%reason, "hub session ended");
    }
}

/// Dials the hub with the agent's pacing. The first session is dialled at once; after a
/// session the next waits a random time of at most `reconnect_spread` (every agent of a replica
/// that restarts loses its session at the same moment, and this spreads their return over the
/// window); each failed attempt is followed by [`next_delay`]: full jitter under a doubling cap,
/// on top of any `Retry-After`.
#[derive(Debug)]
pub struct Dialer<'a> {
    config: &'a UplinkConfig,
    backoff: Backoff,
    wait: Duration,
}

impl<'a> Dialer<'a> {
    pub fn new(config: &'a UplinkConfig) -> Self {
        Self {
            config,
            backoff: Backoff::new(config.backoff_base, config.backoff_max),
            wait: Duration::ZERO,
        }
    }

    /// The next session, after whatever wait is due; `None` once `shutdown` is cancelled.
    pub async fn session(&mut self, shutdown: &CancellationToken) -> Option<Socket> {
        let config = self.config;
        loop {
            tokio::select! {
                _ = shutdown.cancelled() => return None,
                _ = tokio::time::sleep(self.wait) => {}
            }
            let outcome = tokio::select! {
                _ = shutdown.cancelled() => return None,
                outcome = connect(config) => outcome,
            };
            match outcome {
                Ok(socket) => {
                    self.backoff.reset();
                    self.wait = spread(config.reconnect_spread);
                    return Some(socket);
                }
                Err(ConnectError::Refused {
                    status,
                    retry_after,
                }) => {
                    self.wait = next_delay(&mut self.backoff, retry_after);
                    tracing::warn!(status, ?retry_after, wait = ?self.wait, "the hub refused the session");
                }
                Err(error) => {
                    self.wait = self.backoff.next_delay();
                    tracing::warn!(%error, wait = ?self.wait, "cannot reach the hub; retrying");
                }
            }
        }
    }
}

/// One session: hello, snapshot and resync, then commands in and events out until it ends.
async fn session(
    config: &UplinkConfig,
    commands: &Arc<Commands>,
    socket: Socket,
    events: &mut mpsc::Receiver<Message>,
    shutdown: &CancellationToken,
) -> String {
    let validator = match Validator::shared() {
        Ok(v) => v,
        Err(error) => return format!("validator: {error}"),
    };
    let (mut sink, mut stream) = socket.split();
    let address = |message: Message| {
        Envelope::new(message).for_cluster(config.cluster_id.clone(), config.org_id.clone())
    };
    let (replies_tx, mut replies) = mpsc::channel::<Envelope>(1024);
    let mut greeting = vec![address(commands.hello().into())];
    greeting.push(address(commands.snapshot().await.into()));
    for status in commands.resync().await {
        greeting.push(address(status));
    }
    for frame in greeting {
        if let Err(reason) = send(&mut sink, validator, &frame).await {
            return reason;
        }
    }
    let mut heartbeat = tokio::time::interval(config.heartbeat_every);
    loop {
        let frame = tokio::select! {
            _ = shutdown.cancelled() => {
                let _ = sink.send(Ws::Close(None)).await;
                return "shutting down".into();
            }
            _ = heartbeat.tick() => match commands.heartbeat().await {
                Ok(beat) => address(beat.into()),
                Err(error) => {
                    tracing::warn!(%error, "heartbeat: cannot read capacity");
                    continue;
                }
            },
            Some(event) = events.recv() => address(event),
            Some(reply) = replies.recv() => reply,
            incoming = stream.next() => match incoming {
                Some(Ok(Ws::Text(text))) => {
                    match validator.decode(text.as_bytes()) {
                        Ok(envelope) => on_frame(commands, envelope, &replies_tx, config),
                        Err(error) => tracing::warn!(%error, "the hub sent a frame that fails its contract"),
                    }
                    continue;
                }
                Some(Ok(Ws::Close(frame))) => {
                    return format!("closed by the hub: {}", frame.map(|f| format!("{} {}", f.code, f.reason)).unwrap_or_default());
                }
                Some(Ok(_)) => continue,
                Some(Err(error)) => return format!("read: {error}"),
                None => return "connection closed".into(),
            },
        };
        if let Err(reason) = send(&mut sink, validator, &frame).await {
            return reason;
        }
    }
}

async fn send<S>(sink: &mut S, validator: &Validator, frame: &Envelope) -> Result<(), String>
where
    S: futures::Sink<Ws> + Unpin,
    S::Error: std::fmt::Display,
{
    let text = validator
        .encode(frame)
        .map_err(|e| format!("refusing to send an invalid {}: {e}", frame.message_type()))?;
    tokio::time::timeout(Duration::from_secs(10), sink.send(Ws::text(text)))
        .await
        .map_err(|_| "write timed out".to_owned())?
        .map_err(|e| format!("write: {e}"))
}

/// Hands a command to the workers; control frames from the hub are only logged.
fn on_frame(
    commands: &Arc<Commands>,
    envelope: Envelope,
    replies: &mpsc::Sender<Envelope>,
    config: &UplinkConfig,
) {
    if envelope.direction != wire::Direction::Command {
        if let Message::Error(error) = &envelope.message {
            tracing::warn!(?error, "the hub reported an error");
        }
        return;
    }
    let replies = replies.clone();
    let (cluster, org) = (config.cluster_id.clone(), config.org_id.clone());
    commands.submit(envelope, move |answer| {
        let frame = Envelope::new(answer).for_cluster(cluster, org);
        let _ = replies.try_send(frame);
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_retry_after_is_a_floor_under_the_backoff() {
        let (base, max) = (Duration::from_millis(500), Duration::from_secs(30));
        let mut backoff = Backoff::new(base, max);
        for _ in 0..5 {
            assert!(
                next_delay(&mut backoff, Some(Duration::from_secs(5))) >= Duration::from_secs(5)
            );
        }
        // Agents told the same Retry-After do not all come back at the same moment.
        let delays: std::collections::BTreeSet<Duration> = (0..50)
            .map(|_| {
                let mut backoff = Backoff::new(base, max);
                backoff.next_delay();
                next_delay(&mut backoff, Some(Duration::from_secs(5)))
            })
            .collect();
        assert!(delays.len() > 10, "{delays:?}");
        // Without one, the first retries come quickly.
        assert!(next_delay(&mut Backoff::new(base, max), None) <= base);
    }
}
