//! The API server's command-line settings, and a server run from them.

use std::sync::Arc;

use kubenest_contracts::{TokenError, TokenSigner};
use kubenest_domain::sources::AllowList;
use kubenest_store::DatabaseUrl;
use tokio_util::sync::CancellationToken;

use crate::client_address::TrustedProxies;
use crate::limits::LimitsConfig;
use crate::run::{Config, HubConfig, start};
use crate::state::Settings;

/// Serves the REST API over the management cluster and PostgreSQL. Replicas share nothing but
/// those two, so any number can run behind one address.
#[derive(Debug, clap::Parser)]
#[command(name = "kubenest-apiserver", version)]
pub struct Args {
    /// Kubeconfig of the management cluster (in-cluster configuration when absent).
    #[arg(long, env = "KUBECONFIG")]
    kubeconfig: Option<std::path::PathBuf>,
    /// Address to listen on.
    #[arg(long, env = "KUBENEST_API_LISTEN", default_value = "127.0.0.1:8080")]
    listen: std::net::SocketAddr,
    /// PEM certificate chain to serve HTTPS with (with `--tls-key`).
    #[arg(long, env = "KUBENEST_API_TLS_CERT", requires = "tls_key")]
    tls_cert: Option<std::path::PathBuf>,
    /// PEM private key of `--tls-cert`.
    #[arg(long, env = "KUBENEST_API_TLS_KEY", requires = "tls_cert")]
    tls_key: Option<std::path::PathBuf>,
    /// Serve plain HTTP on a non-loopback `--listen` (only behind a proxy that terminates
    /// TLS): passwords and tokens cross this listener.
    #[arg(long, conflicts_with = "tls_cert")]
    insecure_plaintext: bool,
    /// PostgreSQL URL (history, users, sessions, events).
    #[arg(long, env = "KUBENEST_DATABASE_URL")]
    database_url: String,
    /// Ed25519 private key (PKCS#8 PEM) that signs access tokens.
    #[arg(long, env = "KUBENEST_API_SIGNING_KEY")]
    api_signing_key: std::path::PathBuf,
    /// Issuer of access tokens.
    #[arg(long, env = "KUBENEST_JWT_ISSUER", default_value = "kubenest")]
    issuer: String,
    /// Bootstrap administrator's user name (created on first start).
    #[arg(long, env = "KUBENEST_ADMIN_USER")]
    admin_user: Option<String>,
    /// Bootstrap administrator's password.
    #[arg(long, env = "KUBENEST_ADMIN_PASSWORD", hide_env_values = true)]
    admin_password: Option<String>,
    /// A hub replica's `ws(s)://host:port/v1/connect` (repeat or comma-separate), for component
    /// secrets. Without it, secret requests answer 503.
    #[arg(long = "hub-url", env = "KUBENEST_HUB_URLS", value_delimiter = ',')]
    hub_urls: Vec<String>,
    /// Ed25519 key (PKCS#8 PEM) that signs this server's backend token for the hub (the
    /// controllers' key).
    #[arg(long, env = "KUBENEST_SIGNING_KEY")]
    hub_signing_key: Option<std::path::PathBuf>,
    /// Namespace of the hub's session Leases.
    #[arg(long, default_value = "kubenest-system")]
    session_namespace: String,
    /// Namespace of global AddonDefinitions and StackTemplates.
    #[arg(long, default_value = "kubenest-system")]
    system_namespace: String,
    /// The hub's public `wss://.../v1/connect` for agents (in the install command).
    #[arg(long, env = "KUBENEST_PUBLIC_HUB_URL", default_value = "")]
    public_hub_url: String,
    /// The agent chart in the install command: a path, `<repo>/kubenest-agent` or
    /// `oci://<registry>/<path>/kubenest-agent` (as `make release` publishes it).
    #[arg(
        long,
        env = "KUBENEST_AGENT_CHART",
        default_value = "charts/kubenest-agent"
    )]
    agent_chart: String,
    /// The agent chart's version the install command asks for (`--version`); none by default.
    #[arg(long, env = "KUBENEST_AGENT_CHART_VERSION")]
    agent_chart_version: Option<String>,
    /// Events an event-stream subscriber may fall behind before it catches up from PostgreSQL.
    #[arg(long, default_value_t = 4096)]
    event_buffer: usize,
    /// Mark the refresh cookie Secure (turn off only for plain-HTTP loopback use).
    #[arg(long, default_value_t = true, action = clap::ArgAction::Set)]
    secure_cookies: bool,
    /// Requests per second per user that only read.
    #[arg(long, default_value_t = 200)]
    reads_per_second: u32,
    #[arg(long, default_value_t = 50)]
    writes_per_second: u32,
    /// Reverse proxies in front of this server (comma-separated networks, `10.0.0.0/8`, or
    /// addresses): from these peers the client's address is read from
    /// `--client-address-header`, and the login limits count it. Without any, every request
    /// counts as its TCP peer's.
    #[arg(long, env = "KUBENEST_TRUSTED_PROXIES", value_delimiter = ',')]
    trusted_proxies: Vec<String>,
    /// The header the trusted proxies append each client's address to (comma-separated, the
    /// nearest proxy's on the right).
    #[arg(
        long,
        env = "KUBENEST_CLIENT_ADDRESS_HEADER",
        default_value = "X-Forwarded-For"
    )]
    client_address_header: String,
    /// The web console's built assets (`console/dist`), served at `/` on the API's origin.
    #[arg(long, env = "KUBENEST_CONSOLE_DIR")]
    console_dir: Option<std::path::PathBuf>,
    /// Chart sources (comma-separated URL prefixes, `https://host[:port][/path]` or
    /// `oci://host[:port][/path]`) that templates from charts may read on this server's own
    /// network (loopback, private, link-local addresses). Any other source is read only from
    /// public addresses.
    #[arg(long, env = "KUBENEST_CHART_SOURCES", value_delimiter = ',')]
    chart_sources: Vec<String>,
    /// PEM CA certificates trusted, beside the public roots, when reading charts.
    #[arg(long, env = "KUBENEST_PRIVATE_CA_FILE")]
    private_ca_file: Option<std::path::PathBuf>,
    /// Address of the admission webhooks (HTTPS, with `--admission-tls-cert`): the same rules
    /// and a true actor for kubectl and GitOps writers.
    #[arg(
        long,
        env = "KUBENEST_ADMISSION_LISTEN",
        requires = "admission_tls_cert"
    )]
    admission_listen: Option<std::net::SocketAddr>,
    /// PEM certificate chain of the webhooks' listener.
    #[arg(
        long,
        env = "KUBENEST_ADMISSION_TLS_CERT",
        requires = "admission_tls_key"
    )]
    admission_tls_cert: Option<std::path::PathBuf>,
    /// PEM private key of `--admission-tls-cert`.
    #[arg(
        long,
        env = "KUBENEST_ADMISSION_TLS_KEY",
        requires = "admission_tls_cert"
    )]
    admission_tls_key: Option<std::path::PathBuf>,
    /// The CA the kube-apiserver verifies the webhooks with (default: the certificate itself).
    #[arg(long, env = "KUBENEST_ADMISSION_CA")]
    admission_ca: Option<std::path::PathBuf>,
    /// PEM CA that signed the client certificate the kube-apiserver presents to the webhooks
    /// (its `--admission-control-config-file`): a caller without a certificate it signed is
    /// refused in the TLS handshake. Without it anyone who reaches the port may post a review.
    #[arg(long, env = "KUBENEST_ADMISSION_CLIENT_CA")]
    admission_client_ca: Option<std::path::PathBuf>,
    /// Register the webhooks, reached at `https://host:port` or the Service
    /// `namespace/name:port`.
    #[arg(
        long,
        env = "KUBENEST_ADMISSION_ENDPOINT",
        requires = "admission_listen"
    )]
    admission_endpoint: Option<crate::admission::register::Endpoint>,
    /// Kubernetes users whose writes skip the webhooks (the controllers'; this server's own
    /// identity always does). Repeat or comma-separate.
    #[arg(
        long = "admission-trusted-user",
        env = "KUBENEST_ADMISSION_TRUSTED_USERS",
        value_delimiter = ','
    )]
    admission_trusted_users: Vec<String>,
    /// Address of the admin endpoint (/metrics, /healthz, /readyz).
    #[arg(
        long,
        env = "KUBENEST_APISERVER_ADMIN_LISTEN",
        default_value = "0.0.0.0:9090"
    )]
    admin_listen: std::net::SocketAddr,
    /// Log lines as `json` (for collectors) or `text` (for people).
    #[arg(
        long,
        env = "KUBENEST_APISERVER_LOG_FORMAT",
        value_enum,
        default_value_t = kubenest_runtime::logs::LogFormat::Json
    )]
    pub log_format: kubenest_runtime::logs::LogFormat,
}

/// Why the server could not start, or stopped serving.
#[derive(Debug, thiserror::Error)]
pub enum ServerError {
    /// Hub replicas without the key that signs the backend token.
    #[error("--hub-url needs --hub-signing-key")]
    HubUrlWithoutKey,
    /// A key file cannot be read, or the listener cannot bind or serve.
    #[error(transparent)]
    Io(#[from] std::io::Error),
    /// The hub signing key is not an Ed25519 PKCS#8 PEM.
    #[error(transparent)]
    SigningKey(#[from] TokenError),
    /// The kube client cannot be configured.
    #[error(transparent)]
    Client(#[from] kubenest_runtime::kube::ClientError),
    /// Plain HTTP on an address other machines reach, without saying so.
    #[error(
        "--listen {0} is not loopback: serve HTTPS (--tls-cert, --tls-key) or, behind a proxy \
         that terminates TLS, pass --insecure-plaintext"
    )]
    PlaintextOffLoopback(std::net::SocketAddr),
    /// `--console-dir` names a folder without the console's `index.html`.
    #[error("--console-dir {0} has no index.html (build it with `npm run build` in console/)")]
    ConsoleMissing(std::path::PathBuf),
    /// `--chart-sources` has an entry that is not an https:// or oci:// URL prefix.
    #[error("--chart-sources: {0}")]
    ChartSources(String),
    /// `--agent-chart` or `--agent-chart-version` cannot go into a shell command.
    #[error("{0}")]
    AgentChart(String),
    /// `--trusted-proxies` or `--client-address-header` cannot be used.
    #[error(transparent)]
    TrustedProxies(#[from] crate::client_address::ProxyError),
    /// PostgreSQL, the bootstrap administrator, the index or the hub session.
    #[error(transparent)]
    Start(#[from] anyhow::Error),
}

/// Connects everything, then serves on `--listen` until `shutdown`.
pub async fn run(args: Args, shutdown: CancellationToken) -> Result<(), ServerError> {
    if args.tls_cert.is_none() && !args.insecure_plaintext && !args.listen.ip().is_loopback() {
        return Err(ServerError::PlaintextOffLoopback(args.listen));
    }
    if let Some(dir) = &args.console_dir
        && !dir.join("index.html").is_file()
    {
        return Err(ServerError::ConsoleMissing(dir.clone()));
    }
    let trusted_proxies =
        TrustedProxies::parse(&args.trusted_proxies, &args.client_address_header)?;
    let hub = match (&args.hub_signing_key, args.hub_urls.is_empty()) {
        (Some(key), false) => Some(HubConfig {
            urls: args.hub_urls.clone(),
            signer: Arc::new(TokenSigner::from_pem(
                &std::fs::read(key)?,
                args.issuer.clone(),
            )?),
            session_namespace: args.session_namespace.clone(),
        }),
        (None, false) => return Err(ServerError::HubUrlWithoutKey),
        _ => None,
    };
    let config = Config {
        client: kubenest_runtime::kube::client(args.kubeconfig.as_deref()).await?,
        database_url: DatabaseUrl::new(args.database_url.clone()),
        signing_key_pem: std::fs::read_to_string(&args.api_signing_key)?,
        issuer: args.issuer.clone(),
        admin: args.admin_user.clone().zip(args.admin_password.clone()),
        hub,
        settings: Settings {
            public_hub_url: args.public_hub_url.clone(),
            agent_chart: agent_chart(&args.agent_chart, args.agent_chart_version.as_deref())?,
            system_namespace: args.system_namespace.clone(),
            secure_cookies: args.secure_cookies,
            mint_timeout: std::time::Duration::from_secs(15),
            event_buffer: args.event_buffer,
            console_dir: args.console_dir.clone(),
            charts: crate::charts::ChartSettings {
                sources: AllowList::parse(&args.chart_sources)
                    .map_err(|e| ServerError::ChartSources(e.to_string()))?,
                ca_pem: args
                    .private_ca_file
                    .as_ref()
                    .map(std::fs::read_to_string)
                    .transpose()?,
                own_addresses: own_addresses(args.listen),
            },
        },
        limits: LimitsConfig {
            reads_per_second: args.reads_per_second,
            writes_per_second: args.writes_per_second,
            trusted_proxies,
            ..LimitsConfig::default()
        },
    };
    let state = start(config, &shutdown).await?;
    crate::metrics::admin(state.client(), state.history())
        .bind(args.admin_listen, shutdown.clone())
        .await?;
    if let Some(address) = args.admission_listen {
        serve_admission(&args, address, &state, &shutdown).await?;
    }
    let listener = tokio::net::TcpListener::bind(args.listen).await?;
    let tls = match (&args.tls_cert, &args.tls_key) {
        (Some(cert), Some(key)) => Some(crate::Tls::from_pem_files(cert, key).await?),
        _ => None,
    };
    tracing::info!(
        address = %listener.local_addr()?,
        tls = tls.is_some(),
        "kubenest-apiserver listening"
    );
    let stop = async move { shutdown.cancelled().await };
    match tls {
        Some(tls) => crate::serve_tls(listener, state, tls, stop).await?,
        None => crate::serve(listener, state, stop).await?,
    }
    Ok(())
}

/// The agent chart as the install command names it: `{chart}`, or `{chart} --version
/// {version}`. The command is run by a shell, so each part may hold only what chart references
/// and versions are written with (no space, quote or shell syntax) and may not start with `-`.
fn agent_chart(chart: &str, version: Option<&str>) -> Result<String, ServerError> {
    fn check(flag: &str, value: &str, allowed: fn(char) -> bool) -> Result<(), ServerError> {
        match value.chars().find(|c| !allowed(*c)) {
            _ if value.is_empty() || value.starts_with('-') => Err(ServerError::AgentChart(
                format!("{flag}: {value:?} is empty or starts with '-'"),
            )),
            Some(c) => Err(ServerError::AgentChart(format!(
                "{flag}: {value:?} has {c:?}, which a chart reference or version does not hold"
            ))),
            None => Ok(()),
        }
    }
    check("--agent-chart", chart, |c| {
        c.is_ascii_alphanumeric() || "._/:@+-".contains(c)
    })?;
    match version {
        None => Ok(chart.to_owned()),
        Some(version) => {
            check("--agent-chart-version", version, |c| {
                c.is_ascii_alphanumeric() || ".+-".contains(c)
            })?;
            Ok(format!("{chart} --version {version}"))
        }
    }
}

/// The addresses `listen` is reached at, which a chart fetch must not call back to (all
/// loopback and private addresses are refused anyway; this adds a public one).
fn own_addresses(listen: std::net::SocketAddr) -> Vec<std::net::IpAddr> {
    if listen.ip().is_unspecified() {
        Vec::new()
    } else {
        vec![listen.ip()]
    }
}

/// Starts the admission webhooks on `address` and, with `--admission-endpoint`, registers them.
async fn serve_admission(
    args: &Args,
    address: std::net::SocketAddr,
    state: &crate::state::AppState,
    shutdown: &CancellationToken,
) -> Result<(), ServerError> {
    let (Some(cert), Some(key)) = (&args.admission_tls_cert, &args.admission_tls_key) else {
        return Ok(());
    };
    let client = state.client();
    let mut trusted = args.admission_trusted_users.clone();
    trusted.push(
        crate::admission::register::own_username(client)
            .await
            .map_err(|e| anyhow::anyhow!("who this server is (SelfSubjectReview): {e}"))?,
    );
    let tls = match &args.admission_client_ca {
        Some(client_ca) => {
            crate::Tls::from_pem_files_verifying_clients(cert, key, client_ca).await?
        }
        None => {
            tracing::warn!(
                "admission webhooks take callers without a client certificate \
                 (no --admission-client-ca)"
            );
            crate::Tls::from_pem_files(cert, key).await?
        }
    };
    let listener = tokio::net::TcpListener::bind(address).await?;
    tracing::info!(address = %listener.local_addr()?, ?trusted, "admission webhooks listening");
    let admission = crate::admission::Admission::new(state.clone(), trusted.clone());
    let stop = shutdown.clone();
    tokio::spawn(async move {
        if let Err(error) =
            crate::serve_admission(
                listener,
                admission,
                tls,
                async move { stop.cancelled().await },
            )
            .await
        {
            tracing::error!(%error, "admission webhooks stopped");
        }
    });
    if let Some(endpoint) = &args.admission_endpoint {
        let ca = std::fs::read_to_string(args.admission_ca.as_ref().unwrap_or(cert))?;
        crate::admission::register::register(client, endpoint, &ca, &trusted)
            .await
            .map_err(|e| anyhow::anyhow!("registering the admission webhooks: {e}"))?;
        tracing::info!(?endpoint, "admission webhooks registered");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use clap::CommandFactory;

    use super::*;

    #[test]
    fn verify_cli() {
        Args::command().debug_assert();
    }

    #[test]
    fn the_agent_chart_goes_into_the_install_command_only_as_a_reference_and_a_version() {
        assert_eq!(
            agent_chart(
                "oci://10.0.0.1:5000/kubenest/charts/kubenest-agent",
                Some("0.1.0")
            )
            .unwrap(),
            "oci://10.0.0.1:5000/kubenest/charts/kubenest-agent --version 0.1.0"
        );
        assert_eq!(
            agent_chart("/srv/kubenest/charts/kubenest-agent", None).unwrap(),
            "/srv/kubenest/charts/kubenest-agent"
        );
        for (chart, version, says) in [
            (
                "charts/agent; rm -rf ~",
                None,
                "--agent-chart: \"charts/agent; rm -rf ~\" has ';'",
            ),
            ("$(id)", None, "--agent-chart: \"$(id)\" has '$'"),
            (
                "--post-renderer=x",
                None,
                "--agent-chart: \"--post-renderer=x\" is empty",
            ),
            ("", None, "--agent-chart: \"\" is empty"),
            (
                "kubenest/kubenest-agent",
                Some("1.0 --devel"),
                "--agent-chart-version: \"1.0 --devel\" has ' '",
            ),
            (
                "kubenest/kubenest-agent",
                Some("-1"),
                "--agent-chart-version: \"-1\" is empty",
            ),
        ] {
            let error = agent_chart(chart, version).unwrap_err().to_string();
            assert!(error.starts_with(says), "{chart} {version:?}: {error}");
        }
    }

    #[tokio::test]
    async fn a_trusted_proxy_that_is_no_network_stops_the_server_before_it_connects() {
        use clap::Parser;
        let args = Args::try_parse_from([
            "kubenest-apiserver",
            "--database-url=postgres://nowhere.invalid/kubenest",
            "--api-signing-key=/nonexistent/api-signing.pem",
            "--trusted-proxies=10.0.0.0/8,10.0.0.1/8",
        ])
        .unwrap();
        let error = run(args, CancellationToken::new()).await.unwrap_err();
        assert_eq!(
            error.to_string(),
            "--trusted-proxies: \"10.0.0.1/8\" has address bits past its prefix; the network \
             is 10.0.0.0/8"
        );
    }
}
