//! The `kubenest-agent` binary: dials the hub and runs the cluster-side controllers.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context as _;
use clap::Parser;
use kubenest_agent::context::Builders;
use kubenest_agent::helm::Helm;
use kubenest_agent::uplink::UplinkConfig;
use kubenest_agent::{Config, run, token_identity};
use tokio_util::sync::CancellationToken;

/// The per-cluster kubenest agent. It needs access to its own cluster's API server only and
/// never listens on a port: it dials out to the hub.
#[derive(Debug, Parser)]
#[command(name = "kubenest-agent", version)]
struct Args {
    /// Kubeconfig of the local cluster (in-cluster configuration when absent).
    #[arg(long, env = "KUBECONFIG")]
    kubeconfig: Option<PathBuf>,
    /// The hub's `wss://host:port/v1/connect` (`ws://` only for local development).
    #[arg(long, env = "KUBENEST_HUB_URL")]
    hub_url: String,
    /// File holding the cluster token (the connection token of the registration).
    #[arg(long, env = "KUBENEST_CLUSTER_TOKEN_FILE")]
    token_file: PathBuf,
    /// PEM file of the CA that signed the hub's certificate (default: public roots).
    #[arg(long, env = "KUBENEST_HUB_CA_FILE")]
    hub_ca_file: Option<PathBuf>,
    /// Namespace of the agent's own objects (StackDeploys, AddonReleases, BuildRequests).
    #[arg(
        long,
        env = "KUBENEST_AGENT_NAMESPACE",
        default_value = "kubenest-system"
    )]
    namespace: String,
    /// Directory of the addon chart catalog.
    #[arg(
        long,
        env = "KUBENEST_CHART_CATALOG",
        default_value = "/opt/kubenest/charts/addons"
    )]
    catalog: PathBuf,
    /// The helm binary.
    #[arg(long, env = "KUBENEST_HELM", default_value = "helm")]
    helm: PathBuf,
    /// The cluster's GitOps repository (URL or path); addons are committed there.
    #[arg(long, env = "KUBENEST_GITOPS_REPO")]
    gitops_repo: Option<String>,
    #[arg(long, env = "KUBENEST_GITOPS_BRANCH", default_value = "main")]
    gitops_branch: String,
    /// Where the agent keeps its working clone of the GitOps repository.
    #[arg(
        long,
        env = "KUBENEST_GITOPS_WORKDIR",
        default_value = "/var/lib/kubenest-agent/gitops"
    )]
    gitops_workdir: PathBuf,
    /// Seconds between heartbeats.
    #[arg(long, default_value_t = 15)]
    heartbeat_seconds: u64,
    /// Upper bound of the reconnect backoff, in seconds.
    #[arg(long, default_value_t = 30)]
    backoff_max_seconds: u64,
    /// Seconds over which the agent spreads its return after a hub session ends (a uniformly
    /// random wait up to this), so a restarted hub replica is not hit by its whole fleet at once.
    #[arg(long, default_value_t = 10)]
    reconnect_spread_seconds: u64,
    /// Image of the Kaniko executor (Dockerfile builds).
    #[arg(
        long,
        env = "KUBENEST_KANIKO_IMAGE",
        default_value = "kaniko-executor:v1.23.2"
    )]
    kaniko_image: String,
    /// Image of the Cloud Native Buildpacks builder (buildpack builds).
    #[arg(
        long,
        env = "KUBENEST_BUILDPACKS_IMAGE",
        default_value = "buildpacks-builder:0.20"
    )]
    buildpacks_image: String,
    /// Where Git workloads' images are pushed (`<prefix>/<namespace>/<name>:<revision>`).
    #[arg(
        long,
        env = "KUBENEST_BUILD_PUSH_PREFIX",
        default_value = "kubenest-builds"
    )]
    build_push_prefix: String,
    /// Apply the agent's CRDs at start (the chart does this in production).
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

fn tls(ca_file: Option<&std::path::Path>) -> anyhow::Result<Option<Arc<rustls::ClientConfig>>> {
    let Some(path) = ca_file else {
        return Ok(None);
    };
    let pem = std::fs::read(path).with_context(|| format!("reading {}", path.display()))?;
    let mut roots = rustls::RootCertStore::empty();
    for cert in rustls::pki_types::pem::PemObject::pem_slice_iter(&pem) {
        roots.add(cert?)?;
    }
    let config = rustls::ClientConfig::builder()
        .with_root_certificates(roots)
        .with_no_client_auth();
    Ok(Some(Arc::new(config)))
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
    let _ = rustls::crypto::ring::default_provider().install_default();
    let token = std::fs::read_to_string(&args.token_file)
        .with_context(|| format!("reading {}", args.token_file.display()))?
        .trim()
        .to_owned();
    let (cluster_id, org_id) =
        token_identity(&token).context("the cluster token names no cluster and organization")?;
    let config = Config {
        client: client(args.kubeconfig.as_deref()).await?,
        uplink: UplinkConfig {
            url: args.hub_url,
            token,
            tls: tls(args.hub_ca_file.as_deref())?,
            heartbeat_every: Duration::from_secs(args.heartbeat_seconds.max(1)),
            backoff_base: Duration::from_millis(500),
            backoff_max: Duration::from_secs(args.backoff_max_seconds.max(1)),
            reconnect_spread: Duration::from_secs(args.reconnect_spread_seconds),
            cluster_id,
            org_id,
        },
        namespace: args.namespace,
        helm: Helm::new(args.helm, args.catalog),
        gitops: args
            .gitops_repo
            .map(|repo| (repo, args.gitops_branch, args.gitops_workdir)),
        builders: Builders {
            kaniko: args.kaniko_image,
            buildpacks: args.buildpacks_image,
            push_prefix: args.build_push_prefix,
        },
        install_crds: args.install_crds,
    };
    run(config, shutdown_on_signal()).await?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn verify_cli() {
        use clap::CommandFactory;
        Args::command().debug_assert();
    }
}
