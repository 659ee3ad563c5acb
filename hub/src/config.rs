//! Command-line settings and building a replica from them.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use kubenest_contracts::{TokenVerifier, Validator};
use tokio_util::sync::CancellationToken;

use crate::floors::Floors;
use crate::leases::Leases;
use crate::metrics::Metrics;
use crate::sessions::Sessions;
use crate::{Hub, HubError, SessionSettings};

/// Settings of one hub replica.
#[derive(Debug, Clone, clap::Parser)]
#[command(
    name = "kubenest-hub",
    version,
    about = "The kubenest WebSocket router"
)]
pub struct Args {
    /// Address of the WebSocket endpoint.
    #[arg(long, env = "KUBENEST_HUB_LISTEN", default_value = "0.0.0.0:8443")]
    pub listen: SocketAddr,
    /// Address of the admin endpoint (/metrics, /healthz, /readyz).
    #[arg(
        long,
        env = "KUBENEST_HUB_ADMIN_LISTEN",
        default_value = "0.0.0.0:9090"
    )]
    pub admin_listen: SocketAddr,
    /// PEM Ed25519 public key that verifies cluster and backend tokens.
    #[arg(long, env = "KUBENEST_HUB_JWT_PUBLIC_KEY")]
    pub jwt_public_key: PathBuf,
    /// The `iss` every token must carry.
    #[arg(long, env = "KUBENEST_HUB_JWT_ISSUER", default_value = "kubenest")]
    pub jwt_issuer: String,
    /// PEM certificate chain for TLS.
    #[arg(long, env = "KUBENEST_HUB_TLS_CERT", requires = "tls_key")]
    pub tls_cert: Option<PathBuf>,
    /// PEM private key for TLS.
    #[arg(long, env = "KUBENEST_HUB_TLS_KEY", requires = "tls_cert")]
    pub tls_key: Option<PathBuf>,
    /// Serve plain WebSocket without TLS. For local use only.
    #[arg(
        long,
        env = "KUBENEST_HUB_INSECURE_PLAINTEXT",
        conflicts_with = "tls_cert"
    )]
    pub insecure_plaintext: bool,
    /// This replica's identity in session Leases (the pod name in Kubernetes).
    #[arg(long, env = "KUBENEST_HUB_REPLICA", default_value = "hub-0")]
    pub replica: String,
    /// `ws(s)://host:port` (no path) controllers use to reach this replica (default: the
    /// listener address).
    #[arg(long, env = "KUBENEST_HUB_ADVERTISE")]
    pub advertise: Option<String>,
    /// Kubeconfig of the management cluster (default: in-cluster or $KUBECONFIG).
    #[arg(long, env = "KUBENEST_HUB_KUBECONFIG")]
    pub kubeconfig: Option<PathBuf>,
    /// Namespace of the session Leases.
    #[arg(
        long,
        env = "KUBENEST_HUB_LEASE_NAMESPACE",
        default_value = "kubenest-system"
    )]
    pub lease_namespace: String,
    /// Do not record sessions as Leases (no management cluster, e.g. benchmarks).
    #[arg(long, env = "KUBENEST_HUB_NO_LEASES")]
    pub no_leases: bool,
    /// Seconds after the last floors snapshot or update before agents are refused with 503.
    #[arg(
        long = "floors-max-age",
        env = "KUBENEST_HUB_FLOORS_MAX_AGE",
        default_value_t = 120
    )]
    pub floors_max_age_secs: u64,
    /// Frames an agent session may have waiting to be written before it is disconnected as slow.
    #[arg(long, env = "KUBENEST_HUB_SEND_QUEUE", default_value_t = 256)]
    pub send_queue: usize,
    /// The same for backend sessions, which receive the status of every cluster.
    #[arg(long, env = "KUBENEST_HUB_BACKEND_SEND_QUEUE", default_value_t = 8192)]
    pub backend_send_queue: usize,
    /// Seconds between pings to each peer.
    #[arg(
        long = "ping-interval",
        env = "KUBENEST_HUB_PING_INTERVAL",
        default_value_t = 15
    )]
    pub ping_interval_secs: u64,
    /// Seconds of silence after which a peer is considered dead.
    #[arg(
        long = "idle-timeout",
        env = "KUBENEST_HUB_IDLE_TIMEOUT",
        default_value_t = 45
    )]
    pub idle_timeout_secs: u64,
    /// Seconds a single socket write may take before the peer is disconnected as slow.
    #[arg(
        long = "write-timeout",
        env = "KUBENEST_HUB_WRITE_TIMEOUT",
        default_value_t = 10
    )]
    pub write_timeout_secs: u64,
    /// Malformed frames a session may send before it is closed.
    #[arg(long, env = "KUBENEST_HUB_MAX_MALFORMED", default_value_t = 20)]
    pub max_malformed: u32,
    /// Seconds to wait for sessions to close on shutdown.
    #[arg(long = "drain", env = "KUBENEST_HUB_DRAIN", default_value_t = 10)]
    pub drain_secs: u64,
    /// Log lines as `json` (for collectors) or `text` (for people).
    #[arg(
        long,
        env = "KUBENEST_HUB_LOG_FORMAT",
        value_enum,
        default_value_t = kubenest_runtime::logs::LogFormat::Json
    )]
    pub log_format: kubenest_runtime::logs::LogFormat,
}

pub(crate) async fn build_hub(
    args: &Args,
    local: SocketAddr,
    metrics: Metrics,
    shutdown: CancellationToken,
) -> Result<Hub, HubError> {
    if args.tls_cert.is_none() && !args.insecure_plaintext {
        return Err(HubError::Config(
            "TLS needs --tls-cert and --tls-key (or --insecure-plaintext for local use)".into(),
        ));
    }
    let pem = std::fs::read(&args.jwt_public_key).map_err(|source| HubError::Io {
        context: "read --jwt-public-key",
        source,
    })?;
    let verifier = TokenVerifier::from_pem(&pem, &args.jwt_issuer)
        .map_err(|e| HubError::Config(format!("--jwt-public-key: {e}")))?;
    let validator = Validator::shared().map_err(|e| HubError::Config(e.to_string()))?;
    let leases = if args.no_leases {
        Leases::Disabled
    } else {
        let client = kube_client(args.kubeconfig.as_deref()).await?;
        let scheme = if args.insecure_plaintext { "ws" } else { "wss" };
        let address = match &args.advertise {
            Some(address) => address.clone(),
            // 0.0.0.0 in a Lease would send controllers nowhere.
            None if local.ip().is_unspecified() => {
                return Err(HubError::Config(
                    "--advertise is required when listening on all addresses (the pod IP in Kubernetes)"
                        .into(),
                ));
            }
            None => format!("{scheme}://{local}"),
        };
        Leases::kube(
            client,
            &args.lease_namespace,
            &args.replica,
            &address,
            Duration::from_secs(30),
        )
    };
    Ok(Hub {
        verifier,
        validator,
        floors: Floors::new(Duration::from_secs(args.floors_max_age_secs)),
        sessions: Sessions::default(),
        logs: Default::default(),
        leases,
        metrics,
        settings: SessionSettings {
            agent_queue: args.send_queue.max(1),
            backend_queue: args.backend_send_queue.max(1),
            ping_interval: Duration::from_secs(args.ping_interval_secs.max(1)),
            idle_timeout: Duration::from_secs(args.idle_timeout_secs.max(1)),
            write_timeout: Duration::from_secs(args.write_timeout_secs.max(1)),
            max_malformed: args.max_malformed,
            // Small buffers keep idle sessions cheap; frames larger than this still arrive whole.
            read_buffer: 4 * 1024,
            write_buffer: 4 * 1024,
        },
        shutdown,
    })
}

async fn kube_client(kubeconfig: Option<&std::path::Path>) -> Result<kube::Client, HubError> {
    use kubenest_runtime::kube::ClientError;
    match kubenest_runtime::kube::client(kubeconfig).await {
        Ok(client) => Ok(client),
        Err(ClientError::Kubeconfig(e)) => Err(HubError::Config(format!("--kubeconfig: {e}"))),
        Err(ClientError::Infer(e)) => Err(HubError::Config(format!("kube config: {e}"))),
        Err(ClientError::Client(e)) => Err(e.into()),
    }
}

#[cfg(test)]
mod tests {
    use clap::CommandFactory;

    use super::*;

    #[test]
    fn verify_cli() {
        Args::command().debug_assert();
    }
}
