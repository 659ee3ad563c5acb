//! Alerts: what raises one and what ends it (pure). The controllers open and resolve alert rows
//! by these rules and the API server derives the live stream's `alert` events from the same,
//! so both say the same of the same object.
//!
//! - A Cluster silent past its heartbeat window (fleet health's critical `HeartbeatMissed`
//!   condition) raises `heartbeat_missed`; its next report ends it.
//! - An App that failed its progress deadline raises `progress_deadline_exceeded`: phase
//!   `Failed` with `Ready` reason `ProgressDeadlineExceeded` (the controllers' deadline), or with
//!   a workload past its deadline (the agent's `blocked_sync` drift: a Deployment observing
//!   `ProgressDeadlineExceeded`, or a StatefulSet, DaemonSet or Job still not ready at the
//!   App's deadline). It ends when the App runs again (phase `Running`), not merely when a new
//!   rollout starts.
//! - An App, standalone addon or Project whose deletion did not finish within its progress
//!   deadline (`Ready=False` of reason `DeletionDeadlineExceeded`, see
//!   [`crate::deletion`]) raises `deletion_deadline_exceeded`; it ends when the object is gone
//!   (or removed by force).
//! - An App whose revision failed its verification and whose automatic rollback failed too (or
//!   had nothing to go back to) raises `verification_failed` (critical): kubenest stopped
//!   acting; a revision that passes ends it.
//! - An App or standalone addon whose agent could not write its GitOps folder (a commit or a
//!   push refused: `gitopsError` in its status) raises `gitops_write_failed`; the next write
//!   that succeeds ends it. The App or addon runs regardless.

use kubenest_crds::app::AppStatus;
use kubenest_crds::cluster::ClusterStatus;
use kubenest_crds::names::conditions::{HEARTBEAT_MISSED, READY};

/// The reason of `Ready` of an App whose revision was not running in time.
pub const PROGRESS_DEADLINE_EXCEEDED: &str = "ProgressDeadlineExceeded";

/// What an alert is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum AlertKind {
    /// A cluster has not reported within its heartbeat window.
    HeartbeatMissed,
    /// An App's revision was not running within its progress deadline.
    ProgressDeadlineExceeded,
    /// An App's, addon's or Project's deletion did not finish within its progress deadline.
    DeletionDeadlineExceeded,
    /// An App's or addon's GitOps folder could not be written.
    GitOpsWriteFailed,
    /// An App's revision failed its verification and kubenest stopped acting on it (its
    /// automatic rollback failed too, or nothing earlier passed): a person must decide.
    VerificationFailed,
}

impl AlertKind {
    /// Every kind.
    pub const ALL: [AlertKind; 5] = [
        Self::HeartbeatMissed,
        Self::ProgressDeadlineExceeded,
        Self::DeletionDeadlineExceeded,
        Self::GitOpsWriteFailed,
        Self::VerificationFailed,
    ];

    /// The kind as stored and as the API and the stream name it.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::HeartbeatMissed => "heartbeat_missed",
            Self::ProgressDeadlineExceeded => "progress_deadline_exceeded",
            Self::DeletionDeadlineExceeded => "deletion_deadline_exceeded",
            Self::GitOpsWriteFailed => "gitops_write_failed",
            Self::VerificationFailed => "verification_failed",
        }
    }

    /// The kind named `name`.
    pub fn parse(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|k| k.as_str() == name)
    }

    /// `critical` (nothing is known of a whole cluster, or a bad revision runs and kubenest
    /// stopped acting on it) or `warning` (one object).
    pub fn severity(self) -> &'static str {
        match self {
            Self::HeartbeatMissed | Self::VerificationFailed => "critical",
            Self::ProgressDeadlineExceeded
            | Self::DeletionDeadlineExceeded
            | Self::GitOpsWriteFailed => "warning",
        }
    }

    /// What it is about when only one kind of object can raise it: `cluster` or `app`. A
    /// deletion's or a GitOps record's alert is about its object, whichever kind it is.
    pub fn subject(self) -> &'static str {
        match self {
            Self::HeartbeatMissed => "cluster",
            Self::ProgressDeadlineExceeded
            | Self::DeletionDeadlineExceeded
            | Self::GitOpsWriteFailed
            | Self::VerificationFailed => "app",
        }
    }

    /// The reason of the Kubernetes Event raised on the subject when the alert opens.
    pub fn reason(self) -> &'static str {
        match self {
            Self::HeartbeatMissed => HEARTBEAT_MISSED,
            Self::ProgressDeadlineExceeded => PROGRESS_DEADLINE_EXCEEDED,
            Self::DeletionDeadlineExceeded => crate::deletion::DELETION_DEADLINE_EXCEEDED,
            Self::GitOpsWriteFailed => "GitOpsWriteFailed",
            Self::VerificationFailed => "VerificationAutomationStopped",
        }
    }

    /// The reason of the Kubernetes Event raised on the subject when the alert is resolved.
    pub fn resolved_reason(self) -> &'static str {
        match self {
            Self::HeartbeatMissed => "HeartbeatResumed",
            Self::ProgressDeadlineExceeded => "RunningAgain",
            Self::DeletionDeadlineExceeded => "Deleted",
            Self::GitOpsWriteFailed => "GitOpsWritten",
            Self::VerificationFailed => "VerifiedAgain",
        }
    }
}

/// What an object's status says of its alert.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Signal {
    /// The condition holds: open the alert (if none is), with this message.
    Raise(String),
    /// The condition ended: resolve the alert (if one is open), saying why.
    Clear(String),
    /// Neither: an open alert stays open, none is opened.
    Keep,
}

/// What a Cluster's status says of `heartbeat_missed`.
pub fn cluster_signal(status: Option<&ClusterStatus>) -> Signal {
    let missed = status.and_then(|s| {
        s.conditions
            .iter()
            .find(|c| c.type_ == HEARTBEAT_MISSED && c.status == "True")
    });
    match missed {
        Some(condition) => Signal::Raise(condition.message.clone()),
        None => Signal::Clear("the cluster reports again".into()),
    }
}

/// What an App's status says of `progress_deadline_exceeded`.
pub fn app_signal(status: Option<&AppStatus>) -> Signal {
    let Some(status) = status else {
        return Signal::Keep;
    };
    let ready = status.conditions.iter().find(|c| c.type_ == READY);
    // `blocked_sync` is a workload past a deadline: its own (observed
    // `ProgressDeadlineExceeded`) or, for kinds without one, the App's.
    let workload_deadline = status.sync.as_ref().is_some_and(|s| {
        s.drift_class.as_deref() == Some("blocked_sync")
            || s.drift_details
                .iter()
                .any(|d| d.observed == PROGRESS_DEADLINE_EXCEEDED)
    });
    match (status.phase.as_deref(), ready) {
        (Some("Failed"), Some(ready))
            if ready.reason == PROGRESS_DEADLINE_EXCEEDED || workload_deadline =>
        {
            Signal::Raise(ready.message.clone())
        }
        (Some("Running"), _) => Signal::Clear("the App runs again".into()),
        _ => Signal::Keep,
    }
}

/// What an object's conditions say of `deletion_deadline_exceeded`: raised while its deletion
/// is past its deadline. Nothing clears it but the object going (a deletion is never called
/// off), which resolves the alert as any subject's removal does.
pub fn deletion_signal(
    conditions: &[k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition],
) -> Signal {
    match crate::deletion::overdue(conditions) {
        Some(condition) => Signal::Raise(condition.message.clone()),
        None => Signal::Keep,
    }
}

/// What an App's or addon's `gitopsError` says of `gitops_write_failed`.
pub fn gitops_signal(error: Option<&str>) -> Signal {
    match error {
        Some(error) => Signal::Raise(format!("the GitOps repository was not written: {error}")),
        None => Signal::Clear("the GitOps repository is written again".into()),
    }
}

/// What an App's status says of `verification_failed`: raised while its verification's
/// automation is stopped; cleared once a revision passes its verification.
pub fn verification_signal(status: Option<&AppStatus>) -> Signal {
    let Some(verdict) = status.and_then(|s| s.verification.as_ref()) else {
        return Signal::Keep;
    };
    match verdict.action.as_deref() {
        Some(action) if action.starts_with("automation stopped") => Signal::Raise(format!(
            "revision {} failed its verification ({}); {action}",
            verdict.revision, verdict.reason
        )),
        _ if verdict.verdict == "Passed" => Signal::Clear(format!(
            "revision {} passed its verification",
            verdict.revision
        )),
        _ => Signal::Keep,
    }
}

/// Whether an alert is open after `signal`, given whether it was (pure): the hysteresis both
/// the controllers' rows and the stream's events follow.
pub fn open_after(was_open: bool, signal: &Signal) -> bool {
    match signal {
        Signal::Raise(_) => true,
        Signal::Clear(_) => false,
        Signal::Keep => was_open,
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};

    use super::*;

    fn condition(type_: &str, status: &str, reason: &str, message: &str) -> Condition {
        Condition {
            type_: type_.into(),
            status: status.into(),
            reason: reason.into(),
            message: message.into(),
            observed_generation: None,
            last_transition_time: Time(k8s_openapi::jiff::Timestamp::UNIX_EPOCH),
        }
    }

    fn app(phase: &str, reason: &str) -> AppStatus {
        AppStatus {
            phase: Some(phase.into()),
            conditions: vec![condition(
                READY,
                "False",
                reason,
                "revision r1 was not running",
            )],
            ..AppStatus::default()
        }
    }

    #[test]
    fn a_missed_heartbeat_raises_and_a_report_clears() {
        let silent = ClusterStatus {
            conditions: vec![condition(HEARTBEAT_MISSED, "True", "Critical", "no report")],
            ..ClusterStatus::default()
        };
        assert_eq!(
            cluster_signal(Some(&silent)),
            Signal::Raise("no report".into())
        );
        assert!(matches!(
            cluster_signal(Some(&ClusterStatus::default())),
            Signal::Clear(_)
        ));
        assert!(matches!(cluster_signal(None), Signal::Clear(_)));
    }

    #[test]
    fn a_failed_deadline_raises_until_the_app_runs_again_not_when_a_new_rollout_starts() {
        let failed = app_signal(Some(&app("Failed", PROGRESS_DEADLINE_EXCEEDED)));
        assert_eq!(failed, Signal::Raise("revision r1 was not running".into()));
        assert!(open_after(false, &failed));
        let rolling = app_signal(Some(&app("Deploying", "RollingOut")));
        assert_eq!(rolling, Signal::Keep);
        assert!(open_after(true, &rolling), "a new rollout has not run yet");
        assert!(!open_after(false, &rolling));
        assert_eq!(
            app_signal(Some(&app("Failed", "Rejected"))),
            Signal::Keep,
            "only the deadline raises this alert"
        );
        let mut stuck = app("Failed", "ComponentsFailed");
        stuck.sync = Some(kubenest_crds::app::Sync {
            drift_detected: true,
            drift_class: Some("blocked_sync".into()),
            drift_details: vec![kubenest_crds::app::DriftDetail {
                resource: "Deployment/shop-web".into(),
                field: "status.conditions[Progressing]".into(),
                desired: "NewReplicaSetAvailable".into(),
                observed: PROGRESS_DEADLINE_EXCEEDED.into(),
                manager: None,
            }],
        });
        assert!(
            matches!(app_signal(Some(&stuck)), Signal::Raise(_)),
            "a workload past its own deadline"
        );
        if let Some(sync) = stuck.sync.as_mut() {
            sync.drift_details[0] = kubenest_crds::app::DriftDetail {
                resource: "DaemonSet/shop-node".into(),
                field: "status".into(),
                desired: "ready".into(),
                observed: "0 of 1 daemon pods ready".into(),
                manager: None,
            };
        }
        assert!(
            matches!(app_signal(Some(&stuck)), Signal::Raise(_)),
            "a workload without a deadline of its own, past the App's"
        );
        let running = app_signal(Some(&app("Running", "Running")));
        assert!(!open_after(true, &running));
        assert_eq!(
            AlertKind::parse("progress_deadline_exceeded"),
            Some(AlertKind::ProgressDeadlineExceeded)
        );
        assert_eq!(AlertKind::parse("other"), None);
    }

    #[test]
    fn a_deletion_past_its_deadline_raises_and_nothing_else_does() {
        let overdue = condition(
            READY,
            "False",
            crate::deletion::DELETION_DEADLINE_EXCEEDED,
            "still on cluster east: Deployment/web",
        );
        assert_eq!(
            deletion_signal(&[overdue]),
            Signal::Raise("still on cluster east: Deployment/web".into())
        );
        let waiting = condition("DeletionBlocked", "True", "AwaitingAgent", "sent");
        assert_eq!(deletion_signal(&[waiting]), Signal::Keep);
        assert_eq!(deletion_signal(&[]), Signal::Keep);
    }

    #[test]
    fn a_gitops_write_that_failed_raises_until_one_succeeds() {
        assert_eq!(
            gitops_signal(Some("push refused")),
            Signal::Raise("the GitOps repository was not written: push refused".into())
        );
        assert!(matches!(gitops_signal(None), Signal::Clear(_)));
    }
}
