//! Builds the shared state from configuration: connects PostgreSQL (running the migrations),
//! creates the bootstrap administrator, starts the id index, the event stream and, when hub
//! replicas are configured, the hub session used for component secrets and for raising a
//! cluster's revocation floor when its token is rotated.

use std::sync::Arc;

use k8s_openapi::api::coordination::v1::Lease;
use kube::api::Api;
use kubenest_contracts::TokenSigner;
use kubenest_hub_client::{HubClient, HubClientConfig};
use kubenest_store::{Database, DatabaseUrl};
use tokio_util::sync::CancellationToken;

use crate::auth::accounts::Accounts;
use crate::auth::tokens::AccessTokens;
use crate::events::Events;
use crate::k8s::Index;
use crate::limits::{Limits, LimitsConfig};
use crate::secrets::Secrets;
use crate::state::{AppState, Inner, Settings};

/// The hub replicas and the key that signs this server's backend token.
pub struct HubConfig {
    pub urls: Vec<String>,
    pub signer: Arc<TokenSigner>,
    /// Namespace of the hub's session Leases.
    pub session_namespace: String,
}

impl std::fmt::Debug for HubConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HubConfig")
            .field("urls", &self.urls)
            .finish_non_exhaustive()
    }
}

/// Everything the API server needs.
pub struct Config {
    pub client: kube::Client,
    pub database_url: DatabaseUrl,
    /// Ed25519 PKCS#8 PEM that signs access tokens.
    pub signing_key_pem: String,
    pub issuer: String,
    /// The bootstrap administrator, created on first start.
    pub admin: Option<(String, String)>,
    pub hub: Option<HubConfig>,
    pub settings: Settings,
    pub limits: LimitsConfig,
}

impl std::fmt::Debug for Config {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Config")
            .field("issuer", &self.issuer)
            .field("hub", &self.hub)
            .field("settings", &self.settings)
            .finish_non_exhaustive()
    }
}

/// Connects everything and returns the state the routes share.
pub async fn start(config: Config, shutdown: &CancellationToken) -> anyhow::Result<AppState> {
    let database = Database::connect(&config.database_url, 16).await?;
    let history = database.history();
    let accounts = Accounts::new(&database).map_err(|e| anyhow::anyhow!("{e}"))?;
    if let Some((user, password)) = &config.admin
        && accounts.bootstrap_admin(user, password).await?
    {
        tracing::info!(%user, "bootstrap administrator created");
    }
    let tokens = AccessTokens::from_pem(&config.signing_key_pem, config.issuer.clone())?;
    let mut hub_client = None;
    let logs = crate::logs::Subscribers::default();
    let secrets = match config.hub {
        Some(hub) => {
            let leases: Api<Lease> = Api::namespaced(config.client.clone(), &hub.session_namespace);
            let (client, statuses) = HubClient::start(
                HubClientConfig {
                    urls: hub.urls,
                    signer: hub.signer,
                    leases,
                },
                shutdown.clone(),
            )
            .map_err(|e| anyhow::anyhow!("{e}"))?;
            hub_client = Some(client.clone());
            Secrets::start(client, statuses, logs.clone())
        }
        None => Secrets::disabled(),
    };
    let index = Index::start(&config.client, shutdown);
    let (mirror, mirror_writer) = crate::mirror::Mirror::new();
    let events = Events::start(
        &config.client,
        index.clone(),
        mirror_writer,
        database.event_log(),
        config.settings.event_buffer,
        shutdown,
    )
    .await?;
    Ok(AppState::new(Inner {
        client: config.client,
        history,
        accounts,
        tokens,
        index,
        mirror,
        limits: Limits::new(config.limits),
        secrets,
        logs,
        hub: hub_client,
        events,
        charts: crate::charts::ChartFetcher::new(&config.settings.charts)
            .map_err(|e| anyhow::anyhow!("reading charts: {e}"))?,
        settings: config.settings,
    }))
}
