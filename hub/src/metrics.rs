//! Prometheus metrics of a hub replica (all named `kubenest_hub_...`), served on the admin port
//! ([`crate::http::admin`]).

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct KindLabel {
    pub kind: &'static str,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct TypeLabel {
    pub r#type: &'static str,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ReasonLabel {
    pub reason: &'static str,
}

/// Every metric of the hub.
#[derive(Debug)]
pub struct Metrics {
    pub sessions: Family<KindLabel, Gauge>,
    pub frames_in: Family<TypeLabel, Counter>,
    pub frames_out: Family<TypeLabel, Counter>,
    pub rejections: Family<ReasonLabel, Counter>,
    pub route_latency: Histogram,
    pub floors_fresh: Gauge,
    pub log_routes: Gauge,
}

impl Metrics {
    /// The metrics, registered in `registry`.
    pub fn new(registry: &mut Registry) -> Self {
        let sessions = Family::<KindLabel, Gauge>::default();
        registry.register(
            "sessions",
            "Open sessions by kind (agent, backend)",
            sessions.clone(),
        );
        let frames_in = Family::<TypeLabel, Counter>::default();
        registry.register(
            "frames_in",
            "Valid frames received, by type",
            frames_in.clone(),
        );
        let frames_out = Family::<TypeLabel, Counter>::default();
        registry.register(
            "frames_out",
            "Frames written to sockets, by type",
            frames_out.clone(),
        );
        let rejections = Family::<ReasonLabel, Counter>::default();
        registry.register(
            "rejections",
            "Refused connections and frames, by reason",
            rejections.clone(),
        );
        // 10 µs … ~1.3 s.
        let route_latency = Histogram::new(exponential_buckets(0.00001, 2.0, 18));
        registry.register(
            "route_latency_seconds",
            "From a command's arrival to its write on the agent's socket",
            route_latency.clone(),
        );
        let floors_fresh = Gauge::default();
        registry.register(
            "floors_fresh",
            "1 while this replica holds fresh floors",
            floors_fresh.clone(),
        );
        let log_routes = Gauge::default();
        registry.register(
            "log_routes",
            "Log streams routed through this replica now",
            log_routes.clone(),
        );
        Self {
            log_routes,
            sessions,
            frames_in,
            frames_out,
            rejections,
            route_latency,
            floors_fresh,
        }
    }
}

impl Metrics {
    /// Counts a refusal.
    pub fn reject(&self, reason: &'static str) {
        self.rejections.get_or_create(&ReasonLabel { reason }).inc();
    }
}
