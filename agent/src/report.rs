//! What the agent tells the hub about its Apps, and how: the [`Reporter`] that queues events for
//! the uplink, the `app.status` a StackDeploy's status stands for, and the last report of each
//! App, which a resync repeats.

use std::sync::Arc;

use kubenest_contracts::{self as wire, AppPhase, Message};
use kubenest_crds::names::conditions;
use tokio::sync::{mpsc, watch};

use crate::crd::StackDeploy;

/// Where status events go; cheap to clone.
#[derive(Debug, Clone)]
pub struct Reporter {
    events: mpsc::Sender<Message>,
    connected: watch::Receiver<bool>,
    sequence: Arc<std::sync::atomic::AtomicU64>,
}

impl Reporter {
    /// A reporter and the receiving end the uplink drains.
    pub fn new() -> (Self, mpsc::Receiver<Message>, watch::Sender<bool>) {
        let (events, receiver) = mpsc::channel(4096);
        let (connected_tx, connected) = watch::channel(false);
        let reporter = Self {
            events,
            connected,
            sequence: Arc::default(),
        };
        (reporter, receiver, connected_tx)
    }

    /// Queues an event for the hub; dropped while disconnected or when the queue is full
    /// (the next snapshot and resync carry the state instead).
    pub fn report(&self, event: impl Into<Message>) {
        if *self.connected.borrow() {
            let _ = self.events.try_send(event.into());
        }
    }

    /// Queues an event that must not be lost silently: `false` when it could not be queued
    /// (no session, or the queue is full), so the caller can end what it was doing.
    pub fn offer(&self, event: impl Into<Message>) -> bool {
        *self.connected.borrow() && self.events.try_send(event.into()).is_ok()
    }

    /// Follows whether a session is up.
    pub fn watch_connected(&self) -> watch::Receiver<bool> {
        self.connected.clone()
    }

    /// Whether a session is up.
    pub fn connected(&self) -> bool {
        *self.connected.borrow()
    }

    /// The next `app.status` sequence number. The controllers drop events whose sequence is not
    /// newer than the last one, across agent restarts too, so it is the wall clock in
    /// microseconds, kept strictly rising within a process: no state to persist.
    pub fn next_sequence(&self) -> u64 {
        use std::sync::atomic::Ordering;
        let now = u64::try_from(chrono::Utc::now().timestamp_micros()).unwrap_or(0);
        let mut current = self.sequence.load(Ordering::Relaxed);
        loop {
            let next = now.max(current + 1);
            match self
                .sequence
                .compare_exchange(current, next, Ordering::SeqCst, Ordering::Relaxed)
            {
                Ok(_) => return next,
                Err(seen) => current = seen,
            }
        }
    }
}

/// An App phase from its stored name.
pub fn phase_of(name: Option<&str>) -> AppPhase {
    match name {
        Some("Deploying") => AppPhase::Deploying,
        Some("Running") => AppPhase::Running,
        Some("Failed") => AppPhase::Failed,
        Some("Paused") => AppPhase::Paused,
        Some("Deleting") => AppPhase::Deleting,
        _ => AppPhase::Pending,
    }
}

/// The stored name of an App phase.
pub fn phase_name(phase: AppPhase) -> &'static str {
    match phase {
        AppPhase::Pending => "Pending",
        AppPhase::Deploying => "Deploying",
        AppPhase::Running => "Running",
        AppPhase::Failed => "Failed",
        AppPhase::Paused => "Paused",
        AppPhase::Deleting => "Deleting",
        AppPhase::Deleted => "Deleted",
    }
}

/// The `app.status` event of a StackDeploy as its status stands.
pub fn app_status(reporter: &Reporter, held: &StackDeploy) -> wire::AppStatus {
    let status = held.status.clone().unwrap_or_default();
    let deploy = &held.spec.deploy;
    let phase = phase_of(status.phase.as_deref());
    let mut conditions = Vec::new();
    if let Some(rejection) = &status.rejection {
        conditions.push(wire::Condition {
            type_: conditions::READY.into(),
            status: wire::ConditionStatus::False,
            reason: "NamespaceViolation".into(),
            message: rejection.chars().take(4096).collect(),
            last_transition_time: chrono::Utc::now(),
        });
    }
    if let Some(error) = &status.gitops_error {
        conditions.push(wire::Condition {
            type_: conditions::GITOPS_RECORDED.into(),
            status: wire::ConditionStatus::False,
            reason: "WriteFailed".into(),
            message: error.chars().take(4096).collect(),
            last_transition_time: chrono::Utc::now(),
        });
    }
    wire::AppStatus {
        app_id: deploy.app.app_id.clone(),
        observed_revision: status
            .observed_revision
            .unwrap_or_else(|| deploy.revision.clone()),
        phase,
        components: status.components,
        ingress_address: status.ingress_address,
        exports: status.exports,
        conditions,
        observed_at: chrono::Utc::now(),
        sequence: reporter.next_sequence(),
    }
}

/// The `app.status` this process last reported for each App, by App id.
#[derive(Debug, Default)]
pub struct LastReports(std::sync::Mutex<std::collections::HashMap<String, wire::AppStatus>>);

impl LastReports {
    fn reports(
        &self,
    ) -> std::sync::MutexGuard<'_, std::collections::HashMap<String, wire::AppStatus>> {
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub fn record(&self, status: &wire::AppStatus) {
        self.reports()
            .insert(status.app_id.to_string(), status.clone());
    }

    pub fn forget(&self, app_id: &str) {
        self.reports().remove(app_id);
    }

    /// What a resync says of `held`'s App: the last report, with a new sequence number, else
    /// (nothing reported since this process started) its StackDeploy's status, if it has one.
    /// Never the StackDeploy's status over a report: it is written after the report, so it
    /// can be a step behind, and the next pass, finding nothing changed, would not correct it.
    pub fn again(&self, reporter: &Reporter, held: &StackDeploy) -> Option<wire::AppStatus> {
        let last = self
            .reports()
            .get(held.spec.deploy.app.app_id.as_str())
            .cloned();
        match last {
            Some(mut last) => {
                last.sequence = reporter.next_sequence();
                Some(last)
            }
            None => held.status.is_some().then(|| app_status(reporter, held)),
        }
    }
}

/// The reason of the condition an App's `Deleting` report names what is left with.
pub const OBJECTS_REMAINING: &str = "ObjectsRemaining";

/// `app.status` saying the App is being removed and what is still on the cluster (`left`):
/// a `False` condition of reason [`OBJECTS_REMAINING`], which the management side shows as the
/// App's cluster message.
pub fn deleting(
    reporter: &Reporter,
    app_id: wire::Id,
    revision: String,
    left: &str,
) -> wire::AppStatus {
    let now = chrono::Utc::now();
    wire::AppStatus {
        phase: AppPhase::Deleting,
        conditions: vec![wire::Condition {
            type_: "Removed".into(),
            status: wire::ConditionStatus::False,
            reason: OBJECTS_REMAINING.into(),
            message: left.to_owned(),
            last_transition_time: now,
        }],
        observed_at: now,
        ..deleted(reporter, app_id, Some(revision))
    }
}

/// `app.status` saying the App is gone from the cluster.
pub fn deleted(reporter: &Reporter, app_id: wire::Id, revision: Option<String>) -> wire::AppStatus {
    wire::AppStatus {
        app_id,
        observed_revision: revision.unwrap_or_else(|| "0".into()),
        phase: AppPhase::Deleted,
        components: vec![],
        ingress_address: None,
        exports: vec![],
        conditions: vec![],
        observed_at: chrono::Utc::now(),
        sequence: reporter.next_sequence(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::crd::{StackDeploySpec, StackDeployStatus};

    fn held(phase: Option<&str>) -> StackDeploy {
        let deploy = serde_json::from_value(serde_json::json!({
            "app": {"app_id": "a1", "name": "shop", "project_id": "p1", "namespace": "shop"},
            "revision": "r1", "progress_deadline_seconds": 60, "components": [],
        }))
        .unwrap();
        let mut held = StackDeploy::new(
            "app-a1",
            StackDeploySpec {
                deploy,
                restart_id: None,
            },
        );
        held.status = phase.map(|p| StackDeployStatus {
            phase: Some(p.into()),
            observed_revision: Some("r1".into()),
            ..StackDeployStatus::default()
        });
        held
    }

    #[test]
    fn a_resync_repeats_the_last_report_over_a_status_one_step_behind() {
        let (reporter, _events, _connected) = Reporter::new();
        let reports = LastReports::default();
        let running = app_status(&reporter, &held(Some("Running")));
        reports.record(&running);
        // The report went out; the StackDeploy's status still says what it said before.
        let again = reports.again(&reporter, &held(Some("Deploying"))).unwrap();
        assert_eq!(again.phase, AppPhase::Running);
        assert!(
            again.sequence > running.sequence,
            "newer than what it repeats"
        );

        reports.forget("a1");
        let from_status = reports.again(&reporter, &held(Some("Deploying"))).unwrap();
        assert_eq!(
            from_status.phase,
            AppPhase::Deploying,
            "nothing reported: the status"
        );
        assert!(reports.again(&reporter, &held(None)).is_none());
    }

    #[test]
    fn sequences_rise_strictly_and_start_from_the_clock() {
        let (reporter, _rx, _tx) = Reporter::new();
        let first = reporter.next_sequence();
        let second = reporter.next_sequence();
        assert!(second > first);
        let micros = u64::try_from(chrono::Utc::now().timestamp_micros()).unwrap();
        assert!(first <= micros && first > micros - 60_000_000);
    }
}
