//! The controllers' Prometheus metrics (all named `kubenest_controllers_...`) and their admin
//! endpoint's readiness checks.
//!
//! The metrics are one process-wide set ([`metrics`]): they are counters of the process, the
//! reconcilers that move them are spread over every controller, and a value in each of their
//! contexts would only ever point at the same set. Label values are constants — controller
//! names, command types, reasons and outcomes — never an object's name.
//!
//! - reconciles: `reconciles_total`, `reconcile_errors_total{category}`,
//!   `reconcile_duration_seconds`, `reconciles_in_flight`, by `controller`
//!   ([`kubenest_runtime::reconciles`]);
//! - work queues: `queue_depth{queue}` — the App and Project trigger channels and the status
//!   events waiting for the status router;
//! - commands: `commands_sent_total{type}`, `commands_acked_total{type}` (the hub routed it),
//!   `commands_unrouted_total{type, reason}` (the condition reason the object shows),
//!   `commands_resent_total{type}` (a send of an object's command after the first, until it
//!   settles), and the agents' answers `command_answers_total{answer}` (`accepted`,
//!   `rejected`);
//! - `revision_confirmation_seconds{outcome}`: from a deployment's row (its revision's start)
//!   to its outcome once the agent reported it (`succeeded`, `failed`);
//! - verified deployments: `verification_verdicts_total{verdict}` and
//!   `automatic_rollbacks_total` (after a failed verification);
//! - Kubernetes Events: `events_total{reason, type}`, `events_dropped_total`,
//!   `events_failed_total` ([`kubenest_runtime::events`]);
//! - `hub_replicas_connected`, and the history store's pool (`db_connections{state}`,
//!   `db_connections_max`).

use std::sync::{LazyLock, Mutex};

use kubenest_hub_client::HubClient;
use kubenest_runtime::admin::{Admin, PoolGauges};
use kubenest_runtime::events::EventMetrics;
use kubenest_runtime::reconciles::Reconciles;
use kubenest_store::History;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use tokio::sync::mpsc;

/// A command type (`app.deploy`, ...).
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct TypeLabel {
    pub r#type: &'static str,
}

/// A command that was not routed, and why (the reason its object's condition shows).
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct UnroutedLabels {
    pub r#type: &'static str,
    pub reason: &'static str,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct QueueLabel {
    pub queue: &'static str,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct AnswerLabel {
    pub answer: &'static str,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct VerdictLabel {
    pub verdict: &'static str,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct OutcomeLabel {
    pub outcome: &'static str,
}

fn confirmation_histogram() -> Histogram {
    // 50 ms … ~27 min.
    Histogram::new(exponential_buckets(0.05, 2.0, 16))
}

/// Every metric of the controllers.
#[derive(Debug)]
pub struct Metrics {
    pub reconciles: Reconciles,
    pub queue_depth: Family<QueueLabel, Gauge>,
    pub commands_sent: Family<TypeLabel, Counter>,
    pub commands_acked: Family<TypeLabel, Counter>,
    pub commands_unrouted: Family<UnroutedLabels, Counter>,
    pub commands_resent: Family<TypeLabel, Counter>,
    pub command_answers: Family<AnswerLabel, Counter>,
    pub revision_confirmation: Family<OutcomeLabel, Histogram, fn() -> Histogram>,
    pub hub_replicas_connected: Gauge,
    /// Verdicts on verified revisions, by verdict.
    pub verdicts: Family<VerdictLabel, Counter>,
    /// Rollbacks kubenest made after a failed verification.
    pub automatic_rollbacks: Counter,
    pub pool: PoolGauges,
    /// The Kubernetes Events written (`events_total{reason, type}`, dropped, failed).
    pub events: EventMetrics,
    /// What the scrape reads live: the hub client while leading, the queues' senders.
    live: Mutex<Live>,
}

#[derive(Debug, Default)]
struct Live {
    hub: Option<HubClient>,
    queues: Vec<(&'static str, Box<dyn QueueLen>)>,
}

/// A channel whose waiting items can be counted.
trait QueueLen: Send + std::fmt::Debug {
    fn waiting(&self) -> usize;
    fn closed(&self) -> bool;
}

impl<T: Send + std::fmt::Debug> QueueLen for mpsc::Sender<T> {
    fn waiting(&self) -> usize {
        self.max_capacity().saturating_sub(self.capacity())
    }
    fn closed(&self) -> bool {
        self.is_closed()
    }
}

static METRICS: LazyLock<Metrics> = LazyLock::new(|| Metrics {
    reconciles: Reconciles::default(),
    queue_depth: Family::default(),
    commands_sent: Family::default(),
    commands_acked: Family::default(),
    commands_unrouted: Family::default(),
    commands_resent: Family::default(),
    verdicts: Family::default(),
    automatic_rollbacks: Counter::default(),
    command_answers: Family::default(),
    revision_confirmation: Family::new_with_constructor(confirmation_histogram),
    hub_replicas_connected: Gauge::default(),
    pool: PoolGauges::default(),
    events: EventMetrics::default(),
    live: Mutex::default(),
});

/// The process's metrics.
pub fn metrics() -> &'static Metrics {
    &METRICS
}

impl Metrics {
    fn live(&self) -> std::sync::MutexGuard<'_, Live> {
        self.live.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Counts a command handed to the hub client, and whether it is a re-send.
    pub fn sent(&self, r#type: &'static str, resend: bool) {
        let label = TypeLabel { r#type };
        if resend {
            self.commands_resent.get_or_create(&label).inc();
        }
        self.commands_sent.get_or_create(&label).inc();
    }

    /// Counts the hub's answer to a sent command: routed, or the reason it was not.
    pub fn routed(&self, r#type: &'static str, unrouted: Option<&'static str>) {
        let counter = match unrouted {
            None => self
                .commands_acked
                .get_or_create(&TypeLabel { r#type })
                .clone(),
            Some(reason) => self
                .commands_unrouted
                .get_or_create(&UnroutedLabels { r#type, reason })
                .clone(),
        };
        counter.inc();
    }

    /// Counts an agent's answer (`accepted` or `rejected`).
    pub fn answered(&self, answer: &'static str) {
        self.command_answers
            .get_or_create(&AnswerLabel { answer })
            .inc();
    }

    /// Records how long a revision took from its deployment row to its outcome.
    pub fn confirmed(&self, outcome: &'static str, seconds: f64) {
        self.revision_confirmation
            .get_or_create(&OutcomeLabel { outcome })
            .observe(seconds.max(0.0));
    }

    /// While this replica leads: the hub client whose sessions readiness and
    /// `hub_replicas_connected` report (`None` when it stops leading).
    pub fn lead_with(&self, hub: Option<HubClient>) {
        self.live().hub = hub;
    }

    /// Adds the items waiting in `sender`'s channel to the depth of `queue` on every scrape,
    /// until the channel closes (several channels may make one queue, e.g. the router's lanes).
    pub fn watch_queue<T: Send + std::fmt::Debug + 'static>(
        &self,
        queue: &'static str,
        sender: &mpsc::Sender<T>,
    ) {
        let mut live = self.live();
        live.queues.retain(|(_, q)| !q.closed());
        live.queues.push((queue, Box::new(sender.clone())));
    }

    fn refresh(&self, history: &History) {
        let live = self.live();
        let connected = live.hub.as_ref().map_or(0, HubClient::connected);
        self.hub_replicas_connected
            .set(i64::try_from(connected).unwrap_or(i64::MAX));
        let mut depths = std::collections::BTreeMap::<&'static str, usize>::new();
        for (queue, sender) in &live.queues {
            let waiting = if sender.closed() { 0 } else { sender.waiting() };
            *depths.entry(queue).or_default() += waiting;
        }
        for (queue, depth) in depths {
            self.queue_depth
                .get_or_create(&QueueLabel { queue })
                .set(i64::try_from(depth).unwrap_or(i64::MAX));
        }
        let pool = history.pool_use();
        self.pool.set(pool.size, pool.idle, pool.max);
    }

    /// Whether the leader reaches a hub replica (a standby replica sends nothing, so it is
    /// ready without).
    fn hub_check(&self) -> Result<(), String> {
        match &self.live().hub {
            Some(hub) if hub.connected() == 0 => {
                Err("leading, but connected to no hub replica".to_owned())
            }
            _ => Ok(()),
        }
    }
}

/// The controllers' admin endpoint: its metrics, and readiness on the management cluster,
/// PostgreSQL and (while leading) a hub replica.
pub fn admin(client: &kube::Client, history: &History) -> Admin {
    let metrics = metrics();
    let mut admin = Admin::new("kubenest_controllers");
    let registry = admin.registry();
    metrics.reconciles.register(registry);
    metrics.events.register(registry);
    registry.register(
        "queue_depth",
        "Items waiting in a work queue, by queue",
        metrics.queue_depth.clone(),
    );
    registry.register(
        "verification_verdicts",
        "Verdicts on verified revisions, by verdict (Passed, Failed, Inconclusive)",
        metrics.verdicts.clone(),
    );
    registry.register(
        "automatic_rollbacks",
        "Rollbacks kubenest made by itself after a revision failed its verification",
        metrics.automatic_rollbacks.clone(),
    );
    registry.register(
        "commands_sent",
        "Commands handed to the hub, by type",
        metrics.commands_sent.clone(),
    );
    registry.register(
        "commands_acked",
        "Commands the hub routed to the cluster's agent (route.ack), by type",
        metrics.commands_acked.clone(),
    );
    registry.register(
        "commands_unrouted",
        "Commands the hub did not route, by type and reason",
        metrics.commands_unrouted.clone(),
    );
    registry.register(
        "commands_resent",
        "Commands sent again for an object that had not settled, by type",
        metrics.commands_resent.clone(),
    );
    registry.register(
        "command_answers",
        "Agents' answers to commands (accepted, rejected)",
        metrics.command_answers.clone(),
    );
    registry.register(
        "revision_confirmation_seconds",
        "From a deployment's row to its outcome reported by the agent, by outcome",
        metrics.revision_confirmation.clone(),
    );
    registry.register(
        "hub_replicas_connected",
        "Hub replicas the leader holds a session to (0 on a standby replica)",
        metrics.hub_replicas_connected.clone(),
    );
    metrics.pool.register(registry);
    let scraped = history.clone();
    let pinged = history.clone();
    admin
        .before_scrape(move || metrics.refresh(&scraped))
        .check(
            "management_cluster",
            kubenest_runtime::admin::kube_check(client.clone()),
        )
        .check("postgres", move || {
            let history = pinged.clone();
            async move { history.ping().await.map_err(|e| e.to_string()) }
        })
        .check("hub", move || {
            let outcome = metrics.hub_check();
            async move { outcome }
        })
}
