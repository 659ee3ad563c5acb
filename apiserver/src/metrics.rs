//! The API server's Prometheus metrics (all named `kubenest_apiserver_...`) and its admin
//! endpoint's readiness checks: PostgreSQL and the management cluster.
//!
//! One process-wide set ([`metrics`]): the router's layer and every open stream move it.
//! Label values are constants (route templates, never paths).
//!
//! - `http_requests_total{method, route, status}` and `http_request_duration_seconds{method,
//!   route}` ([`kubenest_runtime::http_metrics`]);
//! - `sse_subscribers`: event streams open now;
//! - `log_readers`: log streams being read through this server now;
//! - the pool: `db_connections{state}`, `db_connections_max`.

use std::sync::LazyLock;

use kubenest_runtime::admin::{Admin, PoolGauges};
use kubenest_runtime::http_metrics::HttpMetrics;
use kubenest_store::History;
use prometheus_client::metrics::gauge::Gauge;

/// Every metric of the API server.
#[derive(Debug, Default)]
pub struct Metrics {
    pub http: HttpMetrics,
    pub sse_subscribers: Gauge,
    pub log_readers: Gauge,
    pub pool: PoolGauges,
}

static METRICS: LazyLock<Metrics> = LazyLock::new(Metrics::default);

/// The process's metrics.
pub fn metrics() -> &'static Metrics {
    &METRICS
}

/// Counts an open event stream for as long as it lives.
#[derive(Debug)]
pub struct Subscriber(());

impl Subscriber {
    pub fn open() -> Self {
        metrics().sse_subscribers.inc();
        Self(())
    }
}

impl Drop for Subscriber {
    fn drop(&mut self) {
        metrics().sse_subscribers.dec();
    }
}

/// Records how many log streams are being read now.
pub fn log_readers(open: usize) {
    metrics()
        .log_readers
        .set(i64::try_from(open).unwrap_or(i64::MAX));
}

/// The API server's admin endpoint: its metrics, and readiness on PostgreSQL and the
/// management cluster.
pub fn admin(client: &kube::Client, history: &History) -> Admin {
    let metrics = metrics();
    let mut admin = Admin::new("kubenest_apiserver");
    let registry = admin.registry();
    metrics.http.register(registry);
    registry.register(
        "sse_subscribers",
        "Event streams open now",
        metrics.sse_subscribers.clone(),
    );
    registry.register(
        "log_readers",
        "Log streams being read through this server now",
        metrics.log_readers.clone(),
    );
    metrics.pool.register(registry);
    let (scraped, pinged) = (history.clone(), history.clone());
    admin
        .before_scrape(move || {
            let pool = scraped.pool_use();
            metrics.pool.set(pool.size, pool.idle, pool.max);
        })
        .check("postgres", move || {
            let history = pinged.clone();
            async move { history.ping().await.map_err(|e| e.to_string()) }
        })
        .check(
            "management_cluster",
            kubenest_runtime::admin::kube_check(client.clone()),
        )
}
