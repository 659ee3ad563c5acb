//! `kubenest-hub`: the stateless WebSocket router between cluster agents and the management
//! controllers.
//!
//! One endpoint, `GET /v1/connect`, upgraded to a WebSocket. The client names its role with the
//! subprotocol (`kubenest.agent.v1` or `kubenest.backend.v1`) and proves it with a bearer JWT of
//! the same client type ([`kubenest_contracts::TokenVerifier`]). Agents are admitted only while
//! the replica holds fresh revocation floors ([`floors`]). Every frame is validated by
//! [`kubenest_contracts::Validator`]; commands flow only from backends to the agent of their
//! cluster, status events only from an agent (for its own cluster) to the backends. The hub
//! queues nothing for absent agents: a command it cannot write is answered with `route.nack`,
//! and the controllers, who own the durable intent, send it again later.
//!
//! Each replica records its agent sessions as Leases on the management cluster ([`leases`]), so
//! that controllers know which replica holds a cluster.

mod config;
pub mod floors;
mod http;
pub mod leases;
mod logs;
mod metrics;
mod route;
mod session;
pub mod sessions;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use kubenest_contracts::{TokenVerifier, Validator};
use tokio_util::sync::CancellationToken;

pub use config::Args;
use floors::Floors;
use leases::Leases;
use metrics::Metrics;
use sessions::Sessions;

/// Why the hub could not start or stopped with an error.
#[derive(Debug, thiserror::Error)]
pub enum HubError {
    #[error("configuration: {0}")]
    Config(String),
    #[error("{context}: {source}")]
    Io {
        context: &'static str,
        source: std::io::Error,
    },
    #[error("kubernetes: {0}")]
    Kube(#[from] kube::Error),
}

/// Per-session tuning.
#[derive(Debug, Clone)]
pub(crate) struct SessionSettings {
    pub agent_queue: usize,
    pub backend_queue: usize,
    pub ping_interval: Duration,
    pub idle_timeout: Duration,
    pub write_timeout: Duration,
    pub max_malformed: u32,
    pub read_buffer: usize,
    pub write_buffer: usize,
}

/// Everything a replica shares between its sessions.
#[derive(Debug)]
pub(crate) struct Hub {
    pub verifier: TokenVerifier,
    pub validator: &'static Validator,
    pub floors: Floors,
    pub sessions: Sessions,
    /// Open log streams: which backend session each subscription's frames go to.
    pub logs: logs::LogRoutes,
    pub leases: Leases,
    pub metrics: Metrics,
    pub settings: SessionSettings,
    /// Cancelled when the replica drains; every session's outbox is a child of it.
    pub shutdown: CancellationToken,
}

/// Runs a replica on `listener` (WebSocket) and `admin` (metrics and health) until `shutdown`,
/// then closes every session and drains.
pub async fn run(
    args: Args,
    listener: std::net::TcpListener,
    admin: std::net::TcpListener,
    shutdown: CancellationToken,
) -> Result<(), HubError> {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let local: SocketAddr = listener.local_addr().map_err(|source| HubError::Io {
        context: "listener address",
        source,
    })?;
    let mut endpoint = kubenest_runtime::admin::Admin::new("kubenest_hub");
    let metrics = Metrics::new(endpoint.registry());
    let hub = Arc::new(config::build_hub(&args, local, metrics, shutdown.child_token()).await?);
    let renewals = tokio::spawn({
        let (leases, stop) = (hub.leases.clone(), hub.shutdown.clone());
        async move { leases.renew_until(stop).await }
    });
    admin.set_nonblocking(true).map_err(|source| HubError::Io {
        context: "admin listener",
        source,
    })?;
    let admin = tokio::net::TcpListener::from_std(admin).map_err(|source| HubError::Io {
        context: "admin listener",
        source,
    })?;
    let endpoint = http::admin(endpoint, hub.clone());
    let admin_server = tokio::spawn(endpoint.serve(admin, shutdown.clone()));
    tracing::info!(%local, replica = %args.replica, "hub listening");
    let served = http::serve(hub.clone(), &args, listener, shutdown).await;
    renewals.abort();
    let _ = admin_server.await;
    served
}
