//! What every handler shares. Nothing here is request state: the index and the event channel
//! are caches of the management cluster and PostgreSQL, rebuilt by any replica on start.

use std::sync::Arc;

use kubenest_store::History;

use crate::auth::accounts::Accounts;
use crate::auth::tokens::AccessTokens;
use crate::events::Events;
use crate::k8s::Index;
use crate::limits::Limits;
use crate::secrets::Secrets;

/// Settings the responses need.
#[derive(Debug, Clone)]
pub struct Settings {
    /// The hub's public `wss://host:port/v1/connect`, for the agent's install command.
    pub public_hub_url: String,
    /// The agent chart in the install command: a path or a chart reference, then `--version
    /// X` when one is asked for (checked by `args::agent_chart`).
    pub agent_chart: String,
    /// Namespace of global AddonDefinitions and StackTemplates.
    pub system_namespace: String,
    /// Whether the refresh cookie is marked `Secure` (off only for plain-HTTP loopback tests).
    pub secure_cookies: bool,
    /// How long a registration waits for the controllers to mint the cluster's token.
    pub mint_timeout: std::time::Duration,
    /// How many events a stream subscriber may fall behind before it catches up from the
    /// database instead of the live channel.
    pub event_buffer: usize,
    /// The web console's built assets (`console/dist`), served at `/`; none when absent.
    pub console_dir: Option<std::path::PathBuf>,
    /// Where templates from charts may read charts from, and the CA to trust there.
    pub charts: crate::charts::ChartSettings,
}

/// The shared state; cheap to clone.
#[derive(Clone, Debug)]
pub struct AppState(Arc<Inner>);

pub struct Inner {
    pub client: kube::Client,
    pub history: History,
    pub accounts: Accounts,
    pub tokens: AccessTokens,
    pub index: Arc<Index>,
    /// Apps as the event stream's watch last saw them, for the fence check.
    pub mirror: Arc<crate::mirror::Mirror>,
    pub limits: Limits,
    pub secrets: Secrets,
    /// Readers of log streams on this server.
    pub logs: crate::logs::Subscribers,
    /// The hub replicas, when configured: a token rotation raises the floor on each itself.
    pub hub: Option<kubenest_hub_client::HubClient>,
    pub events: Events,
    /// Reads charts for templates made from them.
    pub charts: crate::charts::ChartFetcher,
    pub settings: Settings,
}

impl std::fmt::Debug for Inner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Inner")
            .field("settings", &self.settings)
            .finish_non_exhaustive()
    }
}

impl AppState {
    pub fn new(inner: Inner) -> Self {
        Self(Arc::new(inner))
    }

    pub fn client(&self) -> &kube::Client {
        &self.0.client
    }

    pub fn history(&self) -> &History {
        &self.0.history
    }

    pub fn accounts(&self) -> &Accounts {
        &self.0.accounts
    }

    pub fn tokens(&self) -> &AccessTokens {
        &self.0.tokens
    }

    pub fn index(&self) -> &Index {
        &self.0.index
    }

    pub fn mirror(&self) -> &crate::mirror::Mirror {
        &self.0.mirror
    }

    pub fn limits(&self) -> &Limits {
        &self.0.limits
    }

    pub fn secrets(&self) -> &Secrets {
        &self.0.secrets
    }

    pub fn logs(&self) -> &crate::logs::Subscribers {
        &self.0.logs
    }

    pub fn hub(&self) -> Option<&kubenest_hub_client::HubClient> {
        self.0.hub.as_ref()
    }

    pub fn events(&self) -> &Events {
        &self.0.events
    }

    pub fn charts(&self) -> &crate::charts::ChartFetcher {
        &self.0.charts
    }

    pub fn settings(&self) -> &Settings {
        &self.0.settings
    }
}
