//! The admin endpoint every program serves on a port of its own (`--admin-listen`, 9090 by
//! default), apart from its traffic so probes and scrapes never queue behind it:
//!
//! - `GET /healthz`: `200 ok` while the process runs (the liveness probe);
//! - `GET /readyz`: runs the program's dependency checks side by side (each bounded by
//!   [`CHECK_TIMEOUT`]) and answers `200` when all pass, else `503`; the JSON body names every
//!   check and, under `failing`, each failing dependency with its error;
//! - `GET /metrics`: the program's Prometheus registry in the OpenMetrics text format.
//!
//! A program builds an [`Admin`] with its registry, its checks ([`Admin::check`], e.g.
//! [`kube_check`]) and what to refresh before each scrape ([`Admin::before_scrape`]: gauges
//! read from live state, such as pool use), then [`Admin::bind`]s it.

use std::collections::BTreeMap;
use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;
use serde_json::json;
use tokio_util::sync::CancellationToken;

/// Longest a single readiness check may take before it counts as failed: a dependency that
/// hangs is as unusable as one that refuses.
pub const CHECK_TIMEOUT: Duration = Duration::from_secs(3);

/// What a check returns: `Err` with why the dependency is unusable.
pub type CheckResult = Result<(), String>;

type CheckFuture = Pin<Box<dyn Future<Output = CheckResult> + Send>>;
type Check = Arc<dyn Fn() -> CheckFuture + Send + Sync>;
type Refresh = Box<dyn Fn() + Send + Sync>;

/// The admin endpoint of a program, before it is served.
pub struct Admin {
    registry: Registry,
    checks: Vec<(&'static str, Check)>,
    refresh: Vec<Refresh>,
}

impl std::fmt::Debug for Admin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let checks: Vec<&str> = self.checks.iter().map(|(name, _)| *name).collect();
        f.debug_struct("Admin")
            .field("checks", &checks)
            .finish_non_exhaustive()
    }
}

impl Admin {
    /// An endpoint whose metrics are all named `<prefix>_...` (e.g. `kubenest_agent`).
    pub fn new(prefix: &str) -> Self {
        Self {
            registry: Registry::with_prefix(prefix),
            checks: Vec::new(),
            refresh: Vec::new(),
        }
    }

    /// The registry the program's metrics go into.
    pub fn registry(&mut self) -> &mut Registry {
        &mut self.registry
    }

    /// Adds the readiness check of dependency `name` (a constant: it is what `/readyz` names).
    pub fn check<F, Fut>(mut self, name: &'static str, check: F) -> Self
    where
        F: Fn() -> Fut + Send + Sync + 'static,
        Fut: Future<Output = CheckResult> + Send + 'static,
    {
        self.checks
            .push((name, Arc::new(move || Box::pin(check()) as CheckFuture)));
        self
    }

    /// Runs `refresh` before every scrape, to set gauges from live state.
    pub fn before_scrape(mut self, refresh: impl Fn() + Send + Sync + 'static) -> Self {
        self.refresh.push(Box::new(refresh));
        self
    }

    /// The routes, for tests and for programs that serve them themselves.
    pub fn router(self) -> Router {
        Router::new()
            .route("/healthz", get(|| async { "ok" }))
            .route("/readyz", get(readyz))
            .route("/metrics", get(metrics))
            .with_state(Arc::new(self))
    }

    /// Binds `address` and serves until `shutdown` on a task of its own; returns the bound
    /// address (port 0 picks one).
    pub async fn bind(
        self,
        address: SocketAddr,
        shutdown: CancellationToken,
    ) -> std::io::Result<SocketAddr> {
        let listener = tokio::net::TcpListener::bind(address).await?;
        let local = listener.local_addr()?;
        tokio::spawn(self.serve(listener, shutdown));
        Ok(local)
    }

    /// Serves on `listener` until `shutdown`.
    pub async fn serve(self, listener: tokio::net::TcpListener, shutdown: CancellationToken) {
        if let Ok(local) = listener.local_addr() {
            tracing::info!(address = %local, "admin endpoint listening");
        }
        let served = axum::serve(listener, self.router())
            .with_graceful_shutdown(shutdown.cancelled_owned())
            .await;
        if let Err(error) = served {
            tracing::warn!(%error, "admin endpoint failed");
        }
    }
}

/// The outcome of every check, by name.
async fn run_checks(admin: &Admin) -> BTreeMap<&'static str, CheckResult> {
    let runs = admin.checks.iter().map(|(name, check)| {
        let check = check.clone();
        async move {
            let outcome = match tokio::time::timeout(CHECK_TIMEOUT, check()).await {
                Ok(outcome) => outcome,
                Err(_) => Err(format!("no answer within {CHECK_TIMEOUT:?}")),
            };
            (*name, outcome)
        }
    });
    futures::future::join_all(runs).await.into_iter().collect()
}

async fn readyz(State(admin): State<Arc<Admin>>) -> Response {
    let outcomes = run_checks(&admin).await;
    let failing: Vec<_> = outcomes
        .iter()
        .filter_map(|(name, outcome)| {
            outcome
                .as_ref()
                .err()
                .map(|error| json!({ "dependency": name, "error": error }))
        })
        .collect();
    let checks: BTreeMap<_, _> = outcomes
        .iter()
        .map(|(name, outcome)| (*name, if outcome.is_ok() { "ok" } else { "failing" }))
        .collect();
    let ready = failing.is_empty();
    let status = if ready {
        StatusCode::OK
    } else {
        for failure in &failing {
            tracing::debug!(%failure, "not ready");
        }
        StatusCode::SERVICE_UNAVAILABLE
    };
    let body = json!({ "ready": ready, "checks": checks, "failing": failing });
    (status, axum::Json(body)).into_response()
}

async fn metrics(State(admin): State<Arc<Admin>>) -> Response {
    for refresh in &admin.refresh {
        refresh();
    }
    let mut text = String::new();
    if let Err(error) = prometheus_client::encoding::text::encode(&mut text, &admin.registry) {
        tracing::warn!(%error, "metrics could not be encoded");
        return StatusCode::INTERNAL_SERVER_ERROR.into_response();
    }
    (
        [(
            header::CONTENT_TYPE,
            "application/openmetrics-text; version=1.0.0; charset=utf-8",
        )],
        text,
    )
        .into_response()
}

/// The use of a database connection pool: `db_connections{state="idle"|"busy"}` and
/// `db_connections_max`, set by the program before each scrape ([`Admin::before_scrape`]).
#[derive(Debug, Clone, Default)]
pub struct PoolGauges {
    connections: prometheus_client::metrics::family::Family<StateLabel, Gauge>,
    max: Gauge,
}

/// The state of pooled connections.
#[derive(Debug, Clone, Hash, PartialEq, Eq, prometheus_client::encoding::EncodeLabelSet)]
pub struct StateLabel {
    pub state: &'static str,
}

impl PoolGauges {
    /// Registers both gauges.
    pub fn register(&self, registry: &mut Registry) {
        registry.register(
            "db_connections",
            "Open database connections, by state (idle, busy)",
            self.connections.clone(),
        );
        registry.register(
            "db_connections_max",
            "The most connections the pool opens",
            self.max.clone(),
        );
    }

    /// Records `size` open connections of which `idle` wait, out of `max`.
    pub fn set(&self, size: u32, idle: u32, max: u32) {
        let gauge = |state| {
            self.connections
                .get_or_create(&StateLabel { state })
                .clone()
        };
        gauge("idle").set(i64::from(idle));
        gauge("busy").set(i64::from(size.saturating_sub(idle)));
        self.max.set(i64::from(max));
    }
}

/// A check that the cluster of `client` answers (`GET /version`, which every authenticated
/// identity may read).
pub fn kube_check(
    client: kube::Client,
) -> impl Fn() -> Pin<Box<dyn Future<Output = CheckResult> + Send>> + Send + Sync + 'static {
    move || {
        let client = client.clone();
        Box::pin(async move {
            client
                .apiserver_version()
                .await
                .map(|_| ())
                .map_err(|error| error.to_string())
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn get(router: Router, path: &str) -> (StatusCode, String) {
        use tower::ServiceExt as _;
        let request = axum::http::Request::get(path)
            .body(axum::body::Body::empty())
            .unwrap();
        let response = router.oneshot(request).await.unwrap();
        let status = response.status();
        let body = axum::body::to_bytes(response.into_body(), 1 << 20)
            .await
            .unwrap();
        (status, String::from_utf8(body.to_vec()).unwrap())
    }

    #[tokio::test]
    async fn readyz_names_each_failing_dependency() {
        let admin = Admin::new("test")
            .check("database", || async { Ok(()) })
            .check("hub", || async { Err("no session".to_owned()) });
        let (status, body) = get(admin.router(), "/readyz").await;
        assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE);
        let body: serde_json::Value = serde_json::from_str(&body).unwrap();
        assert_eq!(body["ready"], false);
        assert_eq!(body["checks"]["database"], "ok");
        assert_eq!(body["failing"][0]["dependency"], "hub");
        assert_eq!(body["failing"][0]["error"], "no session");
    }

    #[tokio::test]
    async fn metrics_refresh_before_they_are_encoded() {
        let gauge = Gauge::<i64>::default();
        let mut admin = Admin::new("test");
        admin.registry().register("level", "A level", gauge.clone());
        let admin = admin.before_scrape(move || {
            gauge.set(7);
        });
        let (status, body) = get(admin.router(), "/metrics").await;
        assert_eq!(status, StatusCode::OK);
        assert!(body.contains("test_level 7"), "{body}");
        assert!(body.ends_with("# EOF\n"), "{body}");
    }
}
