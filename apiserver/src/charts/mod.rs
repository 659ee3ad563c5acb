//! Reading a chart's default values from where a user says it is (a chart repository or an
//! OCI registry) for a template, in Rust, without lending the user this server's network:
//! every URL requested is decided by [`kubenest_domain::sources::decide`], names resolve to
//! public addresses only (unless the source is on the administrator's allow-list), bodies are
//! bounded, the whole read has a deadline, and a few reads run at once.
//!
//! What went wrong is for the server's log; the caller is told only that the chart cannot be
//! read, so a fetch is no probe of ports and hosts.

mod net;
mod oci;
mod package;

use std::net::IpAddr;
use std::sync::Arc;
use std::time::Duration;

use kubenest_domain::sources::{AllowList, Source, SourceError};
use reqwest::header::HeaderMap;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// How long reading one chart may take, all requests together.
pub const FETCH_TIMEOUT: Duration = Duration::from_secs(30);
/// Chart reads one server runs at once.
pub const CONCURRENT_FETCHES: usize = 4;
const INDEX_LIMIT: usize = 8 * 1024 * 1024;
const CHART_LIMIT: usize = 8 * 1024 * 1024;
const VALUES_LIMIT: usize = 1024 * 1024;

/// Where charts may be read from, and whom to trust.
#[derive(Debug, Clone, Default)]
pub struct ChartSettings {
    /// Sources that may be on this server's own network (`--chart-sources`).
    pub sources: AllowList,
    /// PEM CA certificates trusted beside the public roots (`--private-ca-file`).
    pub ca_pem: Option<String>,
    /// This server's own addresses, never fetched from unless allowed (its `--listen`).
    pub own_addresses: Vec<IpAddr>,
}

/// Why a chart could not be read (logged, never shown to the caller).
#[derive(Debug, thiserror::Error)]
pub enum FetchError {
    #[error("{url} refused: {reason}")]
    Refused { url: String, reason: SourceError },
    #[error("{0} is this server's own address")]
    OwnAddress(String),
    #[error(transparent)]
    Http(#[from] reqwest::Error),
    #[error("{url} answered {status}")]
    Status { url: String, status: u16 },
    #[error("{url} is over {limit} bytes")]
    TooLarge { url: String, limit: usize },
    #[error("more than {0} redirects")]
    Redirects(usize),
    #[error("the repository index: {0}")]
    Index(String),
    #[error("the registry: {0}")]
    Registry(String),
    #[error("the package: {0}")]
    Package(String),
    #[error("values.yaml is not YAML: {0}")]
    Values(String),
    #[error("took longer than {0:?}")]
    Timeout(Duration),
    #[error("the HTTP client: {0}")]
    Client(String),
}

/// Reads charts' values; shared by every request of one server.
#[derive(Debug)]
pub struct ChartFetcher {
    net: net::Net,
    permits: Arc<Semaphore>,
}

impl ChartFetcher {
    /// A fetcher of `settings`; fails on a CA that is not PEM.
    pub fn new(settings: &ChartSettings) -> Result<Self, FetchError> {
        Ok(Self {
            net: net::Net::new(
                settings.sources.clone(),
                settings.ca_pem.as_deref(),
                settings.own_addresses.clone(),
            )?,
            permits: Arc::new(Semaphore::new(CONCURRENT_FETCHES)),
        })
    }

    /// A turn to fetch, or `None` while [`CONCURRENT_FETCHES`] reads are running.
    pub fn try_turn(&self) -> Option<OwnedSemaphorePermit> {
        self.permits.clone().try_acquire_owned().ok()
    }

    /// The default values (`values.yaml`) of chart `name` at `version` from `source`.
    pub async fn values(
        &self,
        source: &Source,
        name: &str,
        version: &str,
    ) -> Result<serde_json::Value, FetchError> {
        let package = tokio::time::timeout(FETCH_TIMEOUT, self.package(source, name, version))
            .await
            .map_err(|_| FetchError::Timeout(FETCH_TIMEOUT))??;
        let text =
            tokio::task::spawn_blocking(move || package::values_yaml(&package, VALUES_LIMIT))
                .await
                .map_err(|e| FetchError::Package(e.to_string()))??;
        if text.trim().is_empty() {
            return Ok(serde_json::Value::Object(Default::default()));
        }
        serde_yaml::from_str(&text).map_err(|e| FetchError::Values(e.to_string()))
    }

    async fn package(
        &self,
        source: &Source,
        name: &str,
        version: &str,
    ) -> Result<Vec<u8>, FetchError> {
        match source {
            Source::Registry(registry) => oci::pull(&self.net, registry, name, version).await,
            Source::Repository(repository) => {
                let index_url = reqwest::Url::parse(&format!(
                    "{}/index.yaml",
                    repository.as_str().trim_end_matches('/')
                ))
                .map_err(|e| FetchError::Index(e.to_string()))?;
                let index = self
                    .net
                    .get(index_url.clone(), HeaderMap::new(), INDEX_LIMIT)
                    .await?;
                let chart = package::chart_url(&index_url, &index, name, version)?;
                self.net.get(chart, HeaderMap::new(), CHART_LIMIT).await
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_more_than_the_cap_of_reads_run_at_once() {
        let fetcher = ChartFetcher::new(&ChartSettings::default()).unwrap();
        let turns: Vec<_> = (0..CONCURRENT_FETCHES)
            .map(|_| fetcher.try_turn().unwrap())
            .collect();
        assert!(fetcher.try_turn().is_none());
        drop(turns);
        assert!(fetcher.try_turn().is_some());
    }
}
