//! One backend session per hub replica ([`session_loop`]): dialled with a backend token,
//! re-dialled with jittered backoff, fed the floors first on every connect; the replica's
//! status events go to the caller, its acknowledgements to the dispatch waiting for them.

use std::sync::Arc;
use std::time::Duration;

use futures::{SinkExt, StreamExt};
use kubenest_contracts::{Direction, Envelope, Message, TokenSigner};
use kubenest_runtime::backoff::Backoff;
use tokio::sync::mpsc;
use tokio_tungstenite::tungstenite::Message as Ws;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_util::sync::CancellationToken;

use super::Inner;

const BACKOFF_BASE: Duration = Duration::from_millis(250);
const BACKOFF_CAP: Duration = Duration::from_secs(30);

pub(super) async fn session_loop(
    inner: Arc<Inner>,
    url: String,
    signer: Arc<TokenSigner>,
    statuses: mpsc::Sender<Envelope>,
    shutdown: CancellationToken,
) {
    let mut backoff = Backoff::new(BACKOFF_BASE, BACKOFF_CAP);
    loop {
        let connected = tokio::select! {
            _ = shutdown.cancelled() => return,
            connected = connect(&url, &signer) => connected,
        };
        match connected {
            Ok(socket) => {
                backoff.reset();
                tracing::info!(%url, "connected to hub replica");
                let (tx, rx) = mpsc::channel(1024);
                for frame in inner.floor_frames() {
                    let _ = tx.try_send(frame);
                }
                inner.sessions().insert(url.clone(), tx);
                inner.connects.send_modify(|n| *n += 1);
                tokio::select! {
                    _ = shutdown.cancelled() => {}
                    _ = serve(&inner, socket, rx, &statuses) => {}
                }
                inner.sessions().remove(&url);
                tracing::info!(%url, "disconnected from hub replica");
                if shutdown.is_cancelled() {
                    return;
                }
            }
            Err(error) => tracing::debug!(%url, %error, "hub connect failed"),
        }
        let delay = backoff.next_delay();
        tokio::select! {
            _ = shutdown.cancelled() => return,
            _ = tokio::time::sleep(delay) => {}
        }
    }
}

type Socket =
    tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>;

async fn connect(url: &str, signer: &TokenSigner) -> Result<Socket, String> {
    let token = signer
        .backend_token("controllers", Duration::from_secs(3600))
        .map_err(|e| e.to_string())?;
    let mut request = url.into_client_request().map_err(|e| e.to_string())?;
    let headers = request.headers_mut();
    headers.insert(
        "Sec-WebSocket-Protocol",
        "kubenest.backend.v1".parse().map_err(|_| "header")?,
    );
    headers.insert(
        "Authorization",
        format!("Bearer {token}").parse().map_err(|_| "header")?,
    );
    // No Nagle: a command after a command would wait for the hub's delayed acknowledgement.
    let (socket, _) = tokio_tungstenite::connect_async_with_config(request, None, true)
        .await
        .map_err(|e| e.to_string())?;
    Ok(socket)
}

async fn serve(
    inner: &Inner,
    socket: Socket,
    mut outgoing: mpsc::Receiver<String>,
    statuses: &mpsc::Sender<Envelope>,
) {
    let (mut sink, mut stream) = socket.split();
    loop {
        tokio::select! {
            frame = outgoing.recv() => {
                let Some(frame) = frame else { return };
                if sink.send(Ws::text(frame)).await.is_err() {
                    return;
                }
            }
            incoming = stream.next() => {
                let Some(Ok(message)) = incoming else { return };
                let Ws::Text(text) = message else { continue };
                let Ok(envelope) = inner.validator.decode(text.as_bytes()) else {
                    tracing::warn!("hub sent an invalid frame");
                    continue;
                };
                if envelope.direction == Direction::Status {
                    if statuses.send(envelope).await.is_err() {
                        return;
                    }
                    continue;
                }
                match (envelope.message, envelope.correlation_id) {
                    (
                        message @ (Message::RouteAck(_)
                        | Message::RouteNack(_)
                        | Message::FloorsApplied(_)),
                        Some(id),
                    ) => {
                        if let Some(waiter) = inner.pending().remove(&id) {
                            let _ = waiter.send(message);
                        }
                    }
                    (Message::Error(error), _) => {
                        tracing::warn!(code = ?error.code, path = %error.path, "hub refused a frame");
                    }
                    _ => {}
                }
            }
        }
    }
}
