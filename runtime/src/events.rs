//! Kubernetes Events, written off the reconcile path with kube-runtime's event [`Recorder`].
//!
//! A reconcile that sees something worth telling (a condition turning, a revision recorded, a
//! drift found) hands an [`Event`] to an [`EventSink`] and goes on: one task per program writes
//! them in order. The queue is bounded ([`QUEUE`]): when the API server is slower than the
//! program makes Events, the newest are dropped and counted (`events_dropped_total`), never
//! buffered without limit and never slowing a reconcile. The Recorder aggregates repeats of
//! one reason on one object into a series, as `kubectl describe` shows them.
//!
//! What an object's conditions say is the main source: [`condition_events`] (pure) turns the
//! change of a status's conditions into Events whose reason is the condition's reason, the same
//! constant the status, the REST event stream and the metrics show. `events_total{reason, type}`
//! counts what was written.

use k8s_openapi::api::core::v1::ObjectReference;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::Resource;
use kube::runtime::events::{Recorder, Reporter};
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::registry::Registry;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

pub use kube::runtime::events::{Event, EventType};

/// An Event about its object alone (no secondary object), with a note.
pub fn event(type_: EventType, reason: &str, note: String, action: &str) -> Event {
    Event {
        type_,
        reason: reason.into(),
        note: Some(note),
        action: action.into(),
        secondary: None,
    }
}

/// Events waiting to be written, at most.
pub const QUEUE: usize = 1024;
/// An Event's note is at most 1 kB (the API server refuses longer ones).
const NOTE_MAX: usize = 1024;

/// The labels of a written Event.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct EventLabels {
    pub reason: String,
    pub r#type: &'static str,
}

/// Counts of the Events a program wrote and dropped; cheap to clone.
#[derive(Debug, Clone, Default)]
pub struct EventMetrics {
    written: Family<EventLabels, Counter>,
    dropped: Counter,
    failed: Counter,
}

impl EventMetrics {
    /// Registers `events_total`, `events_dropped_total` and `events_failed_total`.
    pub fn register(&self, registry: &mut Registry) {
        registry.register(
            "events",
            "Kubernetes Events written, by reason and type",
            self.written.clone(),
        );
        registry.register(
            "events_dropped",
            "Kubernetes Events dropped because the queue was full",
            self.dropped.clone(),
        );
        registry.register(
            "events_failed",
            "Kubernetes Events the API server did not take",
            self.failed.clone(),
        );
    }

    /// Events of `reason` written so far (for tests).
    pub fn written(&self, reason: &str, type_: EventType) -> u64 {
        self.written
            .get_or_create(&EventLabels {
                reason: reason.to_owned(),
                r#type: type_name(type_),
            })
            .get()
    }
}

fn type_name(type_: EventType) -> &'static str {
    match type_ {
        EventType::Normal => "Normal",
        EventType::Warning => "Warning",
    }
}

/// Where a program's Events go; cheap to clone. Without a running writer (see [`Self::start`])
/// Events are dropped, e.g. in unit tests.
#[derive(Debug, Clone)]
pub struct EventSink {
    queue: Option<mpsc::Sender<(ObjectReference, Event)>>,
    metrics: EventMetrics,
}

impl EventSink {
    /// Starts the writer of the Events of `controller` (the reporting component, e.g.
    /// `kubenest-controllers`) until `shutdown`.
    pub fn start(
        client: kube::Client,
        controller: &str,
        metrics: EventMetrics,
        shutdown: CancellationToken,
    ) -> Self {
        let (queue, mut events) = mpsc::channel::<(ObjectReference, Event)>(QUEUE);
        let recorder = Recorder::new(
            client,
            Reporter {
                controller: controller.to_owned(),
                instance: std::env::var("POD_NAME").ok(),
            },
        );
        let counts = metrics.clone();
        tokio::spawn(async move {
            loop {
                let next = tokio::select! {
                    () = shutdown.cancelled() => return,
                    next = events.recv() => next,
                };
                let Some((reference, event)) = next else {
                    return;
                };
                match recorder.publish(&event, &reference).await {
                    Ok(()) => {
                        counts
                            .written
                            .get_or_create(&EventLabels {
                                reason: event.reason.clone(),
                                r#type: type_name(event.type_),
                            })
                            .inc();
                    }
                    Err(error) => {
                        counts.failed.inc();
                        tracing::debug!(%error, reason = %event.reason, "event not written");
                    }
                }
            }
        });
        Self {
            queue: Some(queue),
            metrics,
        }
    }

    /// A sink that writes nothing (for unit tests and programs without Events).
    pub fn disabled() -> Self {
        Self {
            queue: None,
            metrics: EventMetrics::default(),
        }
    }

    /// Queues `events` about `object`; drops (and counts) what does not fit.
    pub fn emit<K>(&self, object: &K, events: impl IntoIterator<Item = Event>)
    where
        K: Resource<DynamicType = ()>,
    {
        let reference = object.object_ref(&());
        self.emit_to(&reference, events);
    }

    /// Queues `events` about the object `reference` names.
    pub fn emit_to(&self, reference: &ObjectReference, events: impl IntoIterator<Item = Event>) {
        let Some(queue) = &self.queue else { return };
        for mut event in events {
            if let Some(note) = &mut event.note {
                truncate(note, NOTE_MAX);
            }
            if queue.try_send((reference.clone(), event)).is_err() {
                self.metrics.dropped.inc();
            }
        }
    }
}

/// Cuts `text` to at most `max` bytes at a character boundary.
fn truncate(text: &mut String, max: usize) {
    if text.len() <= max {
        return;
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    text.truncate(end);
}

/// Whether a condition in this state is bad news: a `Warning` Event. `Ready` and `Synced`
/// warn when `False`; the other types (`Progressing`, `DeletionBlocked`, ...) by reason.
fn warns(condition: &Condition, warning_reasons: &[&str]) -> bool {
    match condition.type_.as_str() {
        "Ready" | "Synced" => condition.status == "False",
        _ => warning_reasons.contains(&condition.reason.as_str()),
    }
}

/// The Events the change of conditions from `old` to `new` makes: one per condition whose
/// status or reason changed (a message-only change is not news), its reason the condition's
/// reason and its note the condition's message; a reason several conditions turned to at once
/// is told once. `warning_reasons` lists the reasons that are warnings whatever the condition's
/// type (e.g. `ClusterUnreachable` on `Progressing`).
pub fn condition_events(
    old: &[Condition],
    new: &[Condition],
    warning_reasons: &[&str],
) -> Vec<Event> {
    let mut events: Vec<Event> = Vec::new();
    for condition in new {
        let before = old.iter().find(|c| c.type_ == condition.type_);
        let changed =
            before.is_none_or(|b| b.status != condition.status || b.reason != condition.reason);
        // A condition first set to a quiet default is no news either.
        if !changed || condition.reason.is_empty() {
            continue;
        }
        if events.iter().any(|e| e.reason == condition.reason) {
            continue;
        }
        events.push(Event {
            type_: if warns(condition, warning_reasons) {
                EventType::Warning
            } else {
                EventType::Normal
            },
            reason: condition.reason.clone(),
            note: (!condition.message.is_empty()).then(|| condition.message.clone()),
            action: condition.type_.clone(),
            secondary: None,
        });
    }
    events
}

#[cfg(test)]
mod tests {
    use super::*;

    fn condition(type_: &str, status: &str, reason: &str, message: &str) -> Condition {
        Condition {
            type_: type_.into(),
            status: status.into(),
            reason: reason.into(),
            message: message.into(),
            observed_generation: None,
            last_transition_time: k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
                k8s_openapi::jiff::Timestamp::UNIX_EPOCH,
            ),
        }
    }

    fn summary(events: &[Event]) -> Vec<String> {
        events
            .iter()
            .map(|e| format!("{} {} {}", type_name(e.type_), e.reason, e.action))
            .collect()
    }

    #[test]
    fn a_turned_condition_is_told_once_with_its_reason_and_a_message_change_is_not() {
        let old = vec![
            condition("Ready", "False", "RollingOut", "1/2 ready"),
            condition("Progressing", "True", "RollingOut", "1/2 ready"),
        ];
        let mut new = old.clone();
        new[0].message = "2/3 ready".into();
        assert!(condition_events(&old, &new, &[]).is_empty());

        let new = vec![
            condition(
                "Ready",
                "False",
                "ProgressDeadlineExceeded",
                "web: ImagePullBackOff",
            ),
            condition("Progressing", "False", "ProgressDeadlineExceeded", "web"),
        ];
        let events = condition_events(&old, &new, &[]);
        assert_eq!(summary(&events), ["Warning ProgressDeadlineExceeded Ready"]);
        assert_eq!(events[0].note.as_deref(), Some("web: ImagePullBackOff"));
    }

    #[test]
    fn warnings_follow_readiness_or_the_named_reasons() {
        let new = vec![
            condition("Ready", "True", "Running", ""),
            condition("Progressing", "True", "ClusterUnreachable", "no session"),
            condition("Synced", "False", "DriftDetected", "1 field"),
        ];
        assert_eq!(
            summary(&condition_events(&[], &new, &["ClusterUnreachable"])),
            [
                "Normal Running Ready",
                "Warning ClusterUnreachable Progressing",
                "Warning DriftDetected Synced"
            ]
        );
    }

    #[test]
    fn long_notes_are_cut_at_a_character_boundary() {
        let mut text = "é".repeat(600);
        truncate(&mut text, NOTE_MAX);
        assert!(text.len() <= NOTE_MAX);
        assert!(text.chars().all(|c| c == 'é'));
    }
}
