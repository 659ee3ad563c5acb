//! The controllers' command-line settings, and a replica started from them.

use std::sync::Arc;
use std::time::Duration;

use kube::api::Api;
use kubenest_contracts::{TokenError, TokenSigner};

use kubenest_runtime::admin::Admin;
use kubenest_runtime::logs::LogFormat;

use crate::run::{Config, run};
use kubenest_runtime::leader::Election;
use kubenest_store::{DatabaseUrl, History, StoreError};

/// Runs the Organization, Cluster, Project, App and AddonInstance controllers, the status router
/// and fleet health. Of several replicas one leads (a Lease); the others stand by.
#[derive(Debug, clap::Parser)]
#[command(name = "kubenest-controllers", version)]
pub struct Args {
    /// Kubeconfig of the management cluster (in-cluster configuration when absent).
    #[arg(long, env = "KUBECONFIG")]
    kubeconfig: Option<std::path::PathBuf>,
    /// PostgreSQL URL of the history store.
    #[arg(long, env = "KUBENEST_DATABASE_URL")]
    database_url: String,
    /// A hub replica's `ws(s)://host:port/v1/connect` (repeat, or comma-separate, for each).
    #[arg(
        long = "hub-url",
        env = "KUBENEST_HUB_URLS",
        value_delimiter = ',',
        required = true
    )]
    hub_urls: Vec<String>,
    /// Ed25519 private key (PKCS#8 PEM) that signs cluster and backend tokens.
    #[arg(long, env = "KUBENEST_SIGNING_KEY")]
    signing_key: std::path::PathBuf,
    /// The tokens' issuer; the hub pins it.
    #[arg(long, env = "KUBENEST_JWT_ISSUER", default_value = "kubenest")]
    issuer: String,
    /// Namespace of the hub's session Leases.
    #[arg(long, default_value = "kubenest-system")]
    session_namespace: String,
    /// Namespace of global AddonDefinitions and StackTemplates, and of the leader Lease.
    #[arg(long, default_value = "kubenest-system")]
    system_namespace: String,
    /// This replica's name in the leader election (defaults to host name and process id).
    #[arg(long, env = "POD_NAME")]
    identity: Option<String>,
    /// Seconds without a heartbeat before a cluster's checks turn Unknown.
    #[arg(long, default_value_t = 90)]
    heartbeat_window_seconds: u32,
    /// Apply the CRDs and ClusterRoles at start (charts do this in production).
    #[arg(long)]
    install_crds: bool,
    /// Address of the admin endpoint (/metrics, /healthz, /readyz).
    #[arg(
        long,
        env = "KUBENEST_CONTROLLERS_ADMIN_LISTEN",
        default_value = "0.0.0.0:9090"
    )]
    admin_listen: std::net::SocketAddr,
    /// Log lines as `json` (for collectors) or `text` (for people).
    #[arg(
        long,
        env = "KUBENEST_CONTROLLERS_LOG_FORMAT",
        value_enum,
        default_value_t = LogFormat::Json
    )]
    pub log_format: LogFormat,
}

/// Why a replica could not start, or stopped.
#[derive(Debug, thiserror::Error)]
pub enum ReplicaError {
    /// The kube client cannot be configured.
    #[error(transparent)]
    Client(#[from] kubenest_runtime::kube::ClientError),
    /// Installing the CRDs or ClusterRoles failed.
    #[error(transparent)]
    Kube(#[from] kube::Error),
    /// PostgreSQL is unreachable or its migrations failed.
    #[error(transparent)]
    History(#[from] StoreError),
    /// The signing key file cannot be read.
    #[error(transparent)]
    Io(#[from] std::io::Error),
    /// The signing key is not an Ed25519 PKCS#8 PEM.
    #[error(transparent)]
    SigningKey(#[from] TokenError),
    /// The admin endpoint cannot listen on `--admin-listen`.
    #[error("admin endpoint: {0}")]
    Admin(std::io::Error),
    /// Another replica took the Lease while this one led.
    #[error("leadership lost; exiting so a fresh process stands for election")]
    LeadershipLost,
}

/// A candidate for leadership with everything its controllers need, connected.
#[derive(Debug)]
pub struct Replica {
    election: Election,
    config: Config,
    /// Served from [`Replica::run`] on, by leader and standby alike.
    admin: (Admin, std::net::SocketAddr),
}

impl Replica {
    /// Connects to the management cluster (installing the CRDs if asked) and to PostgreSQL.
    pub async fn start(args: Args) -> Result<Self, ReplicaError> {
        let client = kubenest_runtime::kube::client(args.kubeconfig.as_deref()).await?;
        if args.install_crds {
            crate::ensure_crds(&client).await?;
            crate::rbac::ensure_cluster_roles(&client).await?;
            tokio::time::sleep(Duration::from_secs(1)).await; // let the new CRDs be served
        }
        let url = DatabaseUrl::new(args.database_url.clone());
        let history = History::connect(&url, 16).await?;
        let key = std::fs::read(&args.signing_key)?;
        let signer = Arc::new(TokenSigner::from_pem(&key, args.issuer.clone())?);
        let identity = args.identity.clone().unwrap_or_else(|| {
            let host = std::fs::read_to_string("/etc/hostname").unwrap_or_else(|_| "local".into());
            format!("{}-{}", host.trim(), std::process::id())
        });
        let election = Election::new(
            Api::namespaced(client.clone(), &args.system_namespace),
            "kubenest-controllers",
            &identity,
        );
        let admin = (crate::metrics::admin(&client, &history), args.admin_listen);
        let config = Config {
            client,
            history,
            hub_urls: args.hub_urls,
            signer,
            session_namespace: args.session_namespace,
            system_namespace: args.system_namespace,
            heartbeat_window: chrono::Duration::seconds(i64::from(args.heartbeat_window_seconds)),
        };
        Ok(Self {
            election,
            config,
            admin,
        })
    }

    /// Stands for election and runs the controllers while leading, until `shutdown`. Fails when
    /// leadership is lost, so the process exits and a fresh one stands again.
    pub async fn run(
        self,
        shutdown: tokio_util::sync::CancellationToken,
    ) -> Result<(), ReplicaError> {
        let (admin, address) = self.admin;
        admin
            .bind(address, shutdown.clone())
            .await
            .map_err(ReplicaError::Admin)?;
        let config = self.config;
        let lost = self
            .election
            .run(shutdown, |leading| async move {
                if let Err(error) = run(config, leading).await {
                    tracing::error!(%error, "controllers stopped");
                }
            })
            .await;
        if lost {
            return Err(ReplicaError::LeadershipLost);
        }
        Ok(())
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
