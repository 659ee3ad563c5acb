//! The agent's command-line settings, and the [`Config`] they make.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use crate::context::Builders;
use crate::egress::Egress;
use crate::helm::Helm;
use crate::uplink::UplinkConfig;
use crate::{Config, token_identity};
use kubenest_domain::sources::AllowList;

/// The per-cluster kubenest agent. It needs access to its own cluster's API server only and
/// accepts no connection from the hub's side: it dials out to the hub. Its one port is the
/// admin endpoint, for its own cluster's probes and scrapes.
#[derive(Debug, clap::Parser)]
#[command(name = "kubenest-agent", version)]
pub struct Args {
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
    /// The builder image of Git workloads (images/builder: checks out, builds, pushes).
    #[arg(
        long,
        env = "KUBENEST_BUILDER_IMAGE",
        default_value = "localhost/kubenest/builder:0.1.0"
    )]
    builder_image: String,
    /// PEM file of a private CA trusted beside the public roots: by the builds (a Git server or
    /// registry it signs) and by helm's chart pulls (a chart repository or OCI registry).
    #[arg(long, env = "KUBENEST_PRIVATE_CA_FILE", alias = "build-ca-file")]
    private_ca_file: Option<std::path::PathBuf>,
    /// Chart sources (comma-separated URL prefixes, `https://host[:port][/path]` or
    /// `oci://host[:port][/path]`) that Helm workloads may pull from on the cluster's own
    /// network (loopback, private, link-local addresses); any other source is reached only at
    /// public addresses. Decided per connection, by host and port ([`crate::egress`]).
    #[arg(long, env = "KUBENEST_CHART_SOURCES", value_delimiter = ',')]
    chart_sources: Vec<String>,
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
    /// The ClusterRole of the agent's powers inside a project namespace, when its own are
    /// namespaced (the chart's install): it binds that role to its ServiceAccount in each
    /// project namespace it makes, and watches project namespaces one by one. Without it the
    /// agent's credentials must hold those powers cluster-wide.
    #[arg(
        long,
        env = "KUBENEST_AGENT_PROJECT_ROLE",
        requires = "service_account"
    )]
    project_role: Option<String>,
    /// Namespaces whose pods may connect to every isolated project's pods, beside the agent's
    /// own (an ingress controller's namespace), comma-separated.
    #[arg(long, env = "KUBENEST_AGENT_TRUSTED_NAMESPACES", value_delimiter = ',')]
    trusted_namespaces: Vec<String>,
    /// The agent's own ServiceAccount (in `--namespace`), the subject of its project bindings.
    #[arg(long, env = "KUBENEST_AGENT_SERVICE_ACCOUNT")]
    service_account: Option<String>,
    /// Address of the admin endpoint (/metrics, /healthz, /readyz). The agent's only listener:
    /// it is for the cluster's own probes and scrapes, the hub is still dialled out to.
    #[arg(
        long,
        env = "KUBENEST_AGENT_ADMIN_LISTEN",
        default_value = "0.0.0.0:9090"
    )]
    pub admin_listen: std::net::SocketAddr,
    /// Log lines as `json` (for collectors) or `text` (for people).
    #[arg(
        long,
        env = "KUBENEST_AGENT_LOG_FORMAT",
        value_enum,
        default_value_t = kubenest_runtime::logs::LogFormat::Json
    )]
    pub log_format: kubenest_runtime::logs::LogFormat,
}

/// Why the settings do not make a [`Config`].
#[derive(Debug, thiserror::Error)]
pub enum ArgsError {
    /// The token or CA file cannot be read.
    #[error("reading {}", path.display())]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// A trusted namespace that is no namespace name.
    #[error("--trusted-namespaces: {0:?} is not a namespace name (a DNS label)")]
    TrustedNamespace(String),
    /// The token is not a cluster token.
    #[error("the cluster token names no cluster and organization")]
    NoIdentity,
    /// The CA file holds something that is not a certificate.
    #[error(transparent)]
    Pem(#[from] rustls::pki_types::pem::Error),
    /// A certificate of the CA file is not usable as a root.
    #[error(transparent)]
    Tls(#[from] rustls::Error),
    /// `--chart-sources` has an entry that is not an https:// or oci:// URL prefix.
    #[error("--chart-sources: {0}")]
    ChartSources(#[from] kubenest_domain::sources::SourceError),
    /// The kube client cannot be configured.
    #[error(transparent)]
    Kube(#[from] kubenest_runtime::kube::ClientError),
}

impl Args {
    /// Reads the token and CA files and connects the kube client.
    pub async fn config(self) -> Result<Config, ArgsError> {
        // The uplink's TLS (and the CA below) need the process-wide crypto provider.
        let _ = rustls::crypto::ring::default_provider().install_default();
        let token = read_to_string(&self.token_file)?.trim().to_owned();
        let (cluster_id, org_id) = token_identity(&token).ok_or(ArgsError::NoIdentity)?;
        let private_ca = self
            .private_ca_file
            .as_deref()
            .map(read_to_string)
            .transpose()?;
        Ok(Config {
            client: kubenest_runtime::kube::client(self.kubeconfig.as_deref()).await?,
            uplink: UplinkConfig {
                url: self.hub_url,
                token,
                tls: tls(self.hub_ca_file.as_deref())?,
                heartbeat_every: Duration::from_secs(self.heartbeat_seconds.max(1)),
                backoff_base: Duration::from_millis(500),
                backoff_max: Duration::from_secs(self.backoff_max_seconds.max(1)),
                reconnect_spread: Duration::from_secs(self.reconnect_spread_seconds),
                cluster_id,
                org_id,
            },
            helm: Helm::new(self.helm, self.catalog)
                .with_ca_file(self.private_ca_file)
                .with_egress(Egress::new(AllowList::parse(&self.chart_sources)?)),
            gitops: self
                .gitops_repo
                .map(|repo| (repo, self.gitops_branch, self.gitops_workdir)),
            builders: Builders {
                image: self.builder_image,
                push_prefix: self.build_push_prefix,
                ca: private_ca,
            },
            install_crds: self.install_crds,
            project_grant: self
                .project_role
                .zip(self.service_account)
                .map(|(role, account)| crate::apply::ProjectGrant {
                    role,
                    service_account: (self.namespace.clone(), account),
                }),
            trusted_namespaces: self
                .trusted_namespaces
                .into_iter()
                .map(|ns| {
                    kubenest_domain::names::is_dns_label(&ns)
                        .then_some(ns.clone())
                        .ok_or(ArgsError::TrustedNamespace(ns))
                })
                .collect::<Result<_, _>>()?,
            namespace: self.namespace,
        })
    }
}

fn read_to_string(path: &Path) -> Result<String, ArgsError> {
    std::fs::read_to_string(path).map_err(|source| ArgsError::Read {
        path: path.to_owned(),
        source,
    })
}

/// The hub's TLS roots: the CA file's certificates, or the public roots when absent.
fn tls(ca_file: Option<&Path>) -> Result<Option<Arc<rustls::ClientConfig>>, ArgsError> {
    let Some(path) = ca_file else {
        return Ok(None);
    };
    let pem = std::fs::read(path).map_err(|source| ArgsError::Read {
        path: path.to_owned(),
        source,
    })?;
    let mut roots = rustls::RootCertStore::empty();
    for cert in rustls::pki_types::pem::PemObject::pem_slice_iter(&pem) {
        roots.add(cert?)?;
    }
    let config = rustls::ClientConfig::builder()
        .with_root_certificates(roots)
        .with_no_client_auth();
    Ok(Some(Arc::new(config)))
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
