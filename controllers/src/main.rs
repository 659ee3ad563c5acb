//! The `kubenest-controllers` binary: leader-elected management-plane controllers.

use std::sync::Arc;
use std::time::Duration;

use clap::Parser;
use kube::api::Api;
use kubenest_contracts::TokenSigner;
use kubenest_controllers::history::{DatabaseUrl, History};
use kubenest_controllers::leader::Election;
use kubenest_controllers::run::{Config, run};
use tokio_util::sync::CancellationToken;

/// Runs the Organization, Cluster, Project, App and AddonInstance controllers, the status router
/// and fleet health. Of several replicas one leads (a Lease); the others stand by.
#[derive(Debug, Parser)]
#[command(name = "kubenest-controllers", version)]
struct Args {
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
}

async fn client(kubeconfig: Option<&std::path::Path>) -> anyhow::Result<kube::Client> {
    let config = match kubeconfig {
        Some(path) => {
            let kubeconfig = kube::config::Kubeconfig::read_from(path)?;
            kube::Config::from_custom_kubeconfig(kubeconfig, &Default::default()).await?
        }
        None => kube::Config::infer().await?,
    };
    Ok(kube::Client::try_from(config)?)
}

fn shutdown_on_signal() -> CancellationToken {
    let shutdown = CancellationToken::new();
    tokio::spawn({
        let shutdown = shutdown.clone();
        async move {
            let mut term =
                tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()).ok();
            let term = async {
                match term.as_mut() {
                    Some(t) => t.recv().await,
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                _ = tokio::signal::ctrl_c() => {}
                _ = term => {}
            }
            shutdown.cancel();
        }
    });
    shutdown
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
        )
        .json()
        .init();
    let client = client(args.kubeconfig.as_deref()).await?;
    if args.install_crds {
        kubenest_controllers::ensure_crds(&client).await?;
        kubenest_controllers::rbac::ensure_cluster_roles(&client).await?;
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
    let config = Config {
        client,
        history,
        hub_urls: args.hub_urls,
        signer,
        session_namespace: args.session_namespace,
        system_namespace: args.system_namespace,
        heartbeat_window: chrono::Duration::seconds(i64::from(args.heartbeat_window_seconds)),
    };
    let shutdown = shutdown_on_signal();
    let lost = election
        .run(shutdown, |leading| async move {
            if let Err(error) = run(config, leading).await {
                tracing::error!(%error, "controllers stopped");
            }
        })
        .await;
    if lost {
        anyhow::bail!("leadership lost; exiting so a fresh process stands for election");
    }
    Ok(())
}
