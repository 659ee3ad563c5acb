//! Every controller's reconciles, measured and traced the same way: [`Reconciles::measure`]
//! wraps a kube-runtime reconcile function so that each call
//!
//! - runs in a span `reconcile` with the controller, the object's kind, namespace and name, and
//!   an empty `revision` field the reconcile records once it knows it
//!   (`tracing::Span::current().record("revision", ...)`), so every line logged inside names
//!   the object and the revision it works on;
//! - counts in `reconciles_total{controller}`, its time in
//!   `reconcile_duration_seconds{controller}`, and when it fails in
//!   `reconcile_errors_total{controller, category}` with the error's [`Category`] (a constant
//!   that also chooses the retry policy);
//! - shows in `reconciles_in_flight{controller}` while it runs;
//! - when it fails, is told as a Kubernetes Event on the object (reason `ReconcileFailed`, the
//!   note the error's category and words), once the program names its Event sink
//!   ([`Reconciles::tell_errors_to`]): `kubectl describe` shows why an object is stuck without
//!   anyone reading the controller's log. Repeats are one Event series (the recorder's).

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, RwLock};
use std::time::Instant;

use kube::ResourceExt;
use kube::runtime::controller::Action;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;
use tracing::Instrument as _;

use crate::events::{EventSink, EventType, event};

/// The reason of the Event a failed reconcile makes.
pub const RECONCILE_FAILED: &str = "ReconcileFailed";

/// What kind of failure an error is, as a constant: the metric label (and the retry policy's
/// and an Event's reason).
pub trait Category {
    /// E.g. `kubernetes`, `invalid`, `history`.
    fn category(&self) -> &'static str;
}

impl Category for kube::Error {
    fn category(&self) -> &'static str {
        "kubernetes"
    }
}

/// The label of a controller.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ControllerLabel {
    pub controller: &'static str,
}

/// The labels of a failed reconcile.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ErrorLabels {
    pub controller: &'static str,
    pub category: &'static str,
}

fn histogram() -> Histogram {
    // 1 ms … ~16 s.
    Histogram::new(exponential_buckets(0.001, 2.0, 15))
}

/// The reconcile metrics of a program's controllers; cheap to clone.
#[derive(Debug, Clone)]
pub struct Reconciles {
    total: Family<ControllerLabel, Counter>,
    errors: Family<ErrorLabels, Counter>,
    duration: Family<ControllerLabel, Histogram, fn() -> Histogram>,
    in_flight: Family<ControllerLabel, Gauge>,
    /// Where failed reconciles are told; the program's last started sink (tests start several
    /// in one process, one after another).
    told: Arc<RwLock<Option<EventSink>>>,
}

impl Default for Reconciles {
    fn default() -> Self {
        Self {
            total: Family::default(),
            errors: Family::default(),
            duration: Family::new_with_constructor(histogram),
            in_flight: Family::default(),
            told: Arc::default(),
        }
    }
}

/// A boxed reconcile future.
pub type ReconcileFuture<E> = Pin<Box<dyn Future<Output = Result<Action, E>> + Send>>;

impl Reconciles {
    /// Registers the four metrics.
    pub fn register(&self, registry: &mut Registry) {
        registry.register(
            "reconciles",
            "Reconciles run, by controller",
            self.total.clone(),
        );
        registry.register(
            "reconcile_errors",
            "Reconciles that failed, by controller and error category",
            self.errors.clone(),
        );
        registry.register(
            "reconcile_duration_seconds",
            "Time a reconcile took, by controller",
            self.duration.clone(),
        );
        registry.register(
            "reconciles_in_flight",
            "Reconciles running now, by controller",
            self.in_flight.clone(),
        );
    }

    /// Tells every failed reconcile from now on as an Event through `sink`.
    pub fn tell_errors_to(&self, sink: EventSink) {
        *self.told.write().unwrap_or_else(|e| e.into_inner()) = Some(sink);
    }

    /// Reconciles of `controller` run so far (for tests).
    pub fn count(&self, controller: &'static str) -> u64 {
        self.total
            .get_or_create(&ControllerLabel { controller })
            .get()
    }

    /// `reconcile`, measured and run in its span (see the module documentation).
    pub fn measure<K, C, E, F, Fut>(
        &self,
        controller: &'static str,
        reconcile: F,
    ) -> impl FnMut(Arc<K>, Arc<C>) -> ReconcileFuture<E> + Send + 'static
    where
        K: kube::Resource<DynamicType = ()> + Send + Sync + 'static,
        C: Send + Sync + 'static,
        E: Category + std::fmt::Display + Send + 'static,
        F: Fn(Arc<K>, Arc<C>) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<Action, E>> + Send + 'static,
    {
        let metrics = self.clone();
        move |object: Arc<K>, context: Arc<C>| {
            let label = ControllerLabel { controller };
            let span = tracing::info_span!(
                "reconcile",
                controller,
                kind = %K::kind(&()),
                namespace = %object.namespace().unwrap_or_default(),
                name = %object.name_any(),
                revision = tracing::field::Empty,
            );
            // An object last written through the API carries that request's trace: its
            // reconciles are spans of the same trace, the journey of the change.
            if let Some(parent) = object.annotations().get(crate::traces::ANNOTATION) {
                crate::traces::continue_from(&span, parent);
            }
            let reference = object.object_ref(&());
            let running = reconcile(object, context);
            let metrics = metrics.clone();
            Box::pin(
                async move {
                    let started = Instant::now();
                    let in_flight = metrics.in_flight.get_or_create(&label).clone();
                    in_flight.inc();
                    let outcome = running.await;
                    in_flight.dec();
                    metrics.total.get_or_create(&label).inc();
                    metrics
                        .duration
                        .get_or_create(&label)
                        .observe(started.elapsed().as_secs_f64());
                    if let Err(error) = &outcome {
                        let category = error.category();
                        metrics
                            .errors
                            .get_or_create(&ErrorLabels {
                                controller,
                                category,
                            })
                            .inc();
                        metrics.tell(&reference, category, error);
                    }
                    outcome
                }
                .instrument(span),
            )
        }
    }

    /// The failed reconcile of the object at `reference` as a Warning Event, if a sink is set.
    fn tell(
        &self,
        reference: &k8s_openapi::api::core::v1::ObjectReference,
        category: &str,
        error: &impl std::fmt::Display,
    ) {
        let told = self.told.read().unwrap_or_else(|e| e.into_inner());
        if let Some(sink) = told.as_ref() {
            let note = format!("{category} error: {error}");
            let failed = event(EventType::Warning, RECONCILE_FAILED, note, "Reconcile");
            sink.emit_to(reference, [failed]);
        }
    }
}
