//! The agent's Prometheus metrics (all named `kubenest_agent_...`) and its admin endpoint's
//! readiness checks: the cluster's API server and a live hub session.
//!
//! One process-wide set ([`metrics`]), as in the controllers: the command workers, the
//! StackDeploy controller and the uplink all move it. Label values are constants.
//!
//! - `commands_handled_total{type, outcome}`: each command answered, `accepted` or the reject
//!   reason (`invalid`, `namespace_violation`, `unsupported`, `stale`, `internal`);
//! - `apply_duration_seconds`: one StackDeploy pass's writes to the cluster (its rollout);
//! - `drift_heals_total`: drifted fields found and re-applied (recoverable drift);
//! - `hub_connected`: 1 while a hub session is up;
//! - Kubernetes Events: `events_total{reason, type}`, `events_dropped_total`,
//!   `events_failed_total`;
//! - `log_streams`: log streams being served now;
//! - reconciles of the `stack`, `addon` and `build` controllers
//!   ([`kubenest_runtime::reconciles`]).

use std::sync::{LazyLock, Mutex};

use kubenest_contracts::{MessageType, RejectReason};
use kubenest_runtime::admin::Admin;
use kubenest_runtime::events::EventMetrics;
use kubenest_runtime::reconciles::Reconciles;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};

use crate::report::Reporter;

/// A command's type and how it was answered.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct HandledLabels {
    pub r#type: &'static str,
    pub outcome: &'static str,
}

/// Every metric of the agent.
#[derive(Debug)]
pub struct Metrics {
    pub reconciles: Reconciles,
    pub commands_handled: Family<HandledLabels, Counter>,
    pub apply_duration: Histogram,
    pub drift_heals: Counter,
    pub hub_connected: Gauge,
    /// The Kubernetes Events written ([`kubenest_runtime::events`]).
    pub events: EventMetrics,
    pub log_streams: Gauge,
    /// The reporter of the running agent, whose session state readiness reads.
    reporter: Mutex<Option<Reporter>>,
}

static METRICS: LazyLock<Metrics> = LazyLock::new(|| Metrics {
    reconciles: Reconciles::default(),
    commands_handled: Family::default(),
    // 1 ms … ~16 s.
    apply_duration: Histogram::new(exponential_buckets(0.001, 2.0, 15)),
    drift_heals: Counter::default(),
    hub_connected: Gauge::default(),
    events: EventMetrics::default(),
    log_streams: Gauge::default(),
    reporter: Mutex::default(),
});

/// The process's metrics.
pub fn metrics() -> &'static Metrics {
    &METRICS
}

/// A reject reason as its wire name.
fn reason_label(reason: RejectReason) -> &'static str {
    match reason {
        RejectReason::Invalid => "invalid",
        RejectReason::NamespaceViolation => "namespace_violation",
        RejectReason::Unsupported => "unsupported",
        RejectReason::Stale => "stale",
        RejectReason::Internal => "internal",
    }
}

impl Metrics {
    fn reporter(&self) -> std::sync::MutexGuard<'_, Option<Reporter>> {
        self.reporter.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Counts a command answered: accepted (`None`) or refused for `reason`.
    pub fn handled(&self, r#type: MessageType, refused: Option<RejectReason>) {
        let outcome = refused.map_or("accepted", reason_label);
        self.commands_handled
            .get_or_create(&HandledLabels {
                r#type: r#type.as_str(),
                outcome,
            })
            .inc();
    }

    /// Records how many log streams are live.
    pub fn log_streams(&self, live: usize) {
        self.log_streams
            .set(i64::try_from(live).unwrap_or(i64::MAX));
    }

    /// The agent's reporter, whose session state readiness and `hub_connected` show.
    pub fn report_through(&self, reporter: &Reporter) {
        *self.reporter() = Some(reporter.clone());
    }

    fn session_up(&self) -> bool {
        self.reporter().as_ref().is_some_and(Reporter::connected)
    }
}

/// The agent's admin endpoint: its metrics, and readiness on its cluster's API server and a
/// live hub session.
pub fn admin(client: &kube::Client) -> Admin {
    let metrics = metrics();
    let mut admin = Admin::new("kubenest_agent");
    let registry = admin.registry();
    metrics.reconciles.register(registry);
    metrics.events.register(registry);
    registry.register(
        "commands_handled",
        "Commands answered, by type and outcome (accepted or the reject reason)",
        metrics.commands_handled.clone(),
    );
    registry.register(
        "apply_duration_seconds",
        "Time a StackDeploy pass took to write its objects to the cluster",
        metrics.apply_duration.clone(),
    );
    registry.register(
        "drift_heals",
        "Drifted fields found and applied back",
        metrics.drift_heals.clone(),
    );
    registry.register(
        "hub_connected",
        "1 while a hub session is up",
        metrics.hub_connected.clone(),
    );
    registry.register(
        "log_streams",
        "Log streams being served now",
        metrics.log_streams.clone(),
    );
    admin
        .before_scrape(move || {
            metrics.hub_connected.set(i64::from(metrics.session_up()));
        })
        .check(
            "cluster",
            kubenest_runtime::admin::kube_check(client.clone()),
        )
        .check("hub", move || {
            let up = metrics.session_up();
            async move {
                if up {
                    Ok(())
                } else {
                    Err("no hub session".to_owned())
                }
            }
        })
}
