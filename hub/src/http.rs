//! HTTP: the WebSocket endpoint (authentication and admission before the upgrade) and the admin
//! endpoint.

use std::sync::Arc;
use std::time::Duration;

use axum::Json;
use axum::Router;
use axum::extract::State;
use axum::extract::ws::WebSocketUpgrade;
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use kubenest_contracts::{ClientType, Identity};
use kubenest_runtime::admin::Admin;
use tokio_util::sync::CancellationToken;

use crate::floors::Refusal;
use kubenest_contracts::names::{
    AGENT_SUBPROTOCOL as AGENT_PROTOCOL, BACKEND_SUBPROTOCOL as BACKEND_PROTOCOL,
};

use crate::{Args, Hub, HubError, session};

/// Seconds an agent refused for lack of fresh floors should wait.
const RETRY_AFTER_SECS: u64 = 5;

pub(crate) async fn serve(
    hub: Arc<Hub>,
    args: &Args,
    listener: std::net::TcpListener,
    shutdown: CancellationToken,
) -> Result<(), HubError> {
    let app = Router::new()
        .route("/v1/connect", get(connect))
        .with_state(hub.clone());
    let handle = axum_server::Handle::new();
    let drain = Duration::from_secs(args.drain_secs);
    tokio::spawn({
        let (handle, hub) = (handle.clone(), hub.clone());
        async move {
            shutdown.cancelled().await;
            // Sessions close themselves (close frame 1001) when the hub token is cancelled.
            hub.shutdown.cancel();
            handle.graceful_shutdown(Some(drain));
        }
    });
    listener
        .set_nonblocking(true)
        .map_err(|source| HubError::Io {
            context: "listener",
            source,
        })?;
    let served = match (&args.tls_cert, &args.tls_key) {
        (Some(cert), Some(key)) => {
            let tls = axum_server::tls_rustls::RustlsConfig::from_pem_file(cert, key)
                .await
                .map_err(|source| HubError::Io {
                    context: "read TLS certificate and key",
                    source,
                })?;
            axum_server::tls_rustls::from_tcp_rustls(listener, tls)
                .map_err(|source| HubError::Io {
                    context: "listener",
                    source,
                })?
                .map(|tls| tls.acceptor(no_delay()))
                .handle(handle)
                .serve(app.into_make_service())
                .await
        }
        _ => {
            axum_server::from_tcp(listener)
                .map_err(|source| HubError::Io {
                    context: "listener",
                    source,
                })?
                .acceptor(no_delay())
                .handle(handle)
                .serve(app.into_make_service())
                .await
        }
    };
    served.map_err(|source| HubError::Io {
        context: "serve",
        source,
    })
}

/// Accepted sockets send each frame at once: Nagle's algorithm would hold a frame that follows
/// another (a `route.ack`, then the command) until the peer's delayed acknowledgement, 40 ms.
fn no_delay() -> axum_server::accept::TcpConfigAcceptor {
    axum_server::accept::TcpConfigAcceptor::new(
        axum_server::accept::TcpSocketConfig::new().nodelay(true),
    )
}

fn refuse(status: StatusCode, code: &str, message: &str) -> Response {
    // The API server's error shape, an RFC 9457 problem (kubenest_api::problem).
    let body = (
        [(header::CONTENT_TYPE, kubenest_api::problem::PROBLEM_JSON)],
        Json(kubenest_api::Problem::new(status.as_u16(), code, message)),
    );
    if status == StatusCode::SERVICE_UNAVAILABLE {
        (
            status,
            [(header::RETRY_AFTER, RETRY_AFTER_SECS.to_string())],
            body,
        )
            .into_response()
    } else {
        (status, body).into_response()
    }
}

fn bearer(headers: &HeaderMap) -> Option<&str> {
    headers
        .get(header::AUTHORIZATION)?
        .to_str()
        .ok()?
        .strip_prefix("Bearer ")
}

async fn connect(
    State(hub): State<Arc<Hub>>,
    headers: HeaderMap,
    ws: WebSocketUpgrade,
) -> Response {
    let requested = |p: &str| {
        ws.requested_protocols()
            .any(|v| v.as_bytes() == p.as_bytes())
    };
    let (protocol, client_type) = if requested(AGENT_PROTOCOL) {
        (AGENT_PROTOCOL, ClientType::Cluster)
    } else if requested(BACKEND_PROTOCOL) {
        (BACKEND_PROTOCOL, ClientType::Backend)
    } else {
        hub.metrics.reject("no_subprotocol");
        let message = format!("request subprotocol {AGENT_PROTOCOL} or {BACKEND_PROTOCOL}");
        return refuse(StatusCode::BAD_REQUEST, "bad_subprotocol", &message);
    };
    let Some(token) = bearer(&headers) else {
        hub.metrics.reject("no_token");
        return refuse(
            StatusCode::UNAUTHORIZED,
            "unauthorized",
            "missing bearer token",
        );
    };
    let identity = match hub.verifier.verify(token, client_type) {
        Ok(identity) => identity,
        Err(error) => {
            hub.metrics.reject("bad_token");
            tracing::info!(%error, "connection refused");
            return refuse(StatusCode::UNAUTHORIZED, "unauthorized", &error.to_string());
        }
    };
    if let Identity::Cluster {
        cluster_id,
        org_id,
        token_version,
    } = &identity
    {
        match hub.floors.admit(cluster_id, org_id, *token_version) {
            Ok(()) => {}
            Err(Refusal::Unavailable) => {
                hub.metrics.reject("floors_unavailable");
                return refuse(
                    StatusCode::SERVICE_UNAVAILABLE,
                    "floors_unavailable",
                    "this hub replica has no fresh revocation floors yet; retry",
                );
            }
            Err(Refusal::Forbidden(reason)) => {
                hub.metrics.reject("forbidden");
                tracing::info!(%cluster_id, reason, "agent refused");
                return refuse(StatusCode::FORBIDDEN, "forbidden", reason);
            }
        }
    }
    if hub.shutdown.is_cancelled() {
        return refuse(
            StatusCode::SERVICE_UNAVAILABLE,
            "draining",
            "this hub replica is shutting down",
        );
    }
    let max_frame = hub.validator.limits().max_frame_bytes;
    let settings = &hub.settings;
    ws.protocols([protocol])
        .max_message_size(max_frame)
        .max_frame_size(max_frame)
        .read_buffer_size(settings.read_buffer)
        .write_buffer_size(settings.write_buffer)
        .max_write_buffer_size(max_frame + settings.write_buffer)
        .on_upgrade(move |socket| session::run(hub, identity, socket))
}

/// The admin endpoint ([`kubenest_runtime::admin`]): the session gauges and floors freshness
/// read at each scrape, and readiness that fails only while draining — floors freshness is a
/// metric (`floors_fresh`), not readiness, because backends must reach a replica to deliver the
/// floors in the first place.
pub(crate) fn admin(admin: Admin, hub: Arc<Hub>) -> Admin {
    let scraped = hub.clone();
    admin
        .before_scrape(move || {
            let hub = &scraped;
            let (agents, backends) = hub.sessions.counts();
            let gauge = |kind| {
                hub.metrics
                    .sessions
                    .get_or_create(&crate::metrics::KindLabel { kind })
                    .clone()
            };
            gauge("agent").set(i64::try_from(agents).unwrap_or(i64::MAX));
            gauge("backend").set(i64::try_from(backends).unwrap_or(i64::MAX));
            hub.metrics
                .floors_fresh
                .set(i64::from(hub.floors.is_fresh()));
        })
        .check("serving", move || {
            let draining = hub.shutdown.is_cancelled();
            async move {
                if draining {
                    Err("this hub replica is draining".to_owned())
                } else {
                    Ok(())
                }
            }
        })
}
