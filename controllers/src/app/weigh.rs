//! Weigh (pure): what an App's status says and when to look again, from what a rollout pass's
//! steps came to ([`super::conclude`] writes it), and the status of an App that waits before any
//! step ([`super::plan`]).

use std::time::Duration;

use chrono::{DateTime, Utc};
use kubenest_crds::app::AppStatus;
use kubenest_domain::app::{Assessment, Facts, Outcome, assess};

use crate::conditions::{self, PROGRESSING, READY};

/// How long a settled App waits before it is looked at again.
const SETTLED_RETRY: Duration = Duration::from_secs(300);

/// Where the rollout of the current revision stands, by the status and the clock.
#[derive(Debug, Clone, PartialEq)]
pub struct Timing {
    /// The agent reported this revision observed.
    pub observed: bool,
    /// The agent refused this revision: `reason: message (field f)`.
    pub rejected: Option<String>,
    /// When the revision must be running.
    pub deadline: DateTime<Utc>,
    /// The deadline passed before the revision settled.
    pub expired: bool,
    /// The time all of this was judged at.
    pub now: DateTime<Utc>,
}

/// Forgets a rejection of another revision.
fn drop_stale_rejection(status: &mut AppStatus, revision: &str) {
    if status
        .rejection
        .as_ref()
        .is_some_and(|r| r.revision != revision)
    {
        status.rejection = None;
    }
}

/// Judges the rollout of `revision` at `now`; its deadline counts from `rolloutStartedAt`.
pub fn timing(
    status: &AppStatus,
    revision: &str,
    deadline_seconds: u32,
    now: DateTime<Utc>,
) -> Timing {
    let observed = status.observed_revision.as_deref() == Some(revision);
    let rejected = status
        .rejection
        .as_ref()
        .filter(|r| r.revision == revision)
        .map(|r| {
            let field = r
                .field
                .as_ref()
                .map(|f| format!(" (field {f})"))
                .unwrap_or_default();
            format!("{}: {}{field}", r.reason, r.message)
        });
    let started = status
        .rollout_started_at
        .as_deref()
        .and_then(|t| DateTime::parse_from_rfc3339(t).ok())
        .map_or(now, |t| t.with_timezone(&Utc));
    let deadline = started + chrono::Duration::seconds(i64::from(deadline_seconds));
    let settled_phase = matches!(
        status.cluster_phase.as_deref(),
        Some("Running" | "Paused" | "Failed")
    );
    Timing {
        observed,
        rejected,
        deadline,
        expired: now > deadline && !(observed && settled_phase),
        now,
    }
}

/// What a rollout pass ends with.
#[derive(Debug, Clone, PartialEq)]
pub struct Conclusion {
    /// The status to write.
    pub status: AppStatus,
    /// Phase, readiness and the deployment's outcome.
    pub assessment: Assessment,
    /// The phase or the `Ready` reason changed since the status was read.
    pub changed: bool,
    /// When to reconcile again.
    pub requeue: Duration,
}

/// Everything [`conclude`] weighs besides the status.
#[derive(Debug, Clone)]
pub struct Pass<'a> {
    /// The revision being rolled out.
    pub revision: &'a str,
    /// The App's generation.
    pub generation: i64,
    /// The App's progress deadline.
    pub deadline_seconds: u32,
    /// See [`timing`].
    pub timing: &'a Timing,
    /// Why the App waits, from this pass's send or the last one's.
    pub waiting: Option<(String, String)>,
    /// When a command is due again, if one is still to be (re-)sent.
    pub retry: Option<Duration>,
}

/// Weighs the pass into the status: phase, `Ready`, `Progressing` and `Synced`, and the requeue.
pub fn conclude(old: &AppStatus, mut status: AppStatus, pass: &Pass<'_>) -> Conclusion {
    drop_stale_rejection(&mut status, pass.revision);
    let generation = Some(pass.generation);
    let assessment = assess(&Facts {
        revision: pass.revision,
        observed: pass.timing.observed,
        cluster_phase: status.cluster_phase.as_deref(),
        cluster_message: status.cluster_message.as_deref(),
        accepted: status.accepted_revision.as_deref() == Some(pass.revision),
        rejected: pass.timing.rejected.clone(),
        expired: pass.timing.expired,
        deadline_seconds: pass.deadline_seconds,
        waiting: pass.waiting.as_ref().map(|(r, m)| (r.as_str(), m.clone())),
    });
    let changed = old.phase.as_deref() != Some(assessment.phase)
        || conditions::get(&old.conditions, READY).map(|c| c.reason.as_str())
            != Some(assessment.reason.as_str());
    status.phase = Some(assessment.phase.into());
    conditions::set(
        &mut status.conditions,
        READY,
        assessment.ready,
        &assessment.reason,
        assessment.message.clone(),
        generation,
    );
    match &pass.waiting {
        Some((reason, message)) if assessment.outcome.is_none() => conditions::set(
            &mut status.conditions,
            PROGRESSING,
            true,
            reason,
            message.clone(),
            generation,
        ),
        _ if assessment.outcome.is_none() => conditions::set(
            &mut status.conditions,
            PROGRESSING,
            true,
            &assessment.reason,
            assessment.message.clone(),
            generation,
        ),
        // A failed rollout keeps what it last waited for, as Kubernetes Deployments do.
        Some((reason, message)) if assessment.outcome == Some(Outcome::Failed) => conditions::set(
            &mut status.conditions,
            PROGRESSING,
            false,
            reason,
            message.clone(),
            generation,
        ),
        _ => conditions::remove(&mut status.conditions, PROGRESSING),
    };
    if let Some(sync) = &status.sync {
        conditions::synced(&mut status.conditions, sync, pass.generation);
    }
    let requeue = match (pass.retry, assessment.outcome) {
        // A command still to be (re-)sent, even for an App that has settled: a snapshot said
        // the cluster lost it while the last send's backoff ran.
        (Some(retry), None) => {
            crate::deadline::sooner(retry, pass.timing.deadline, pass.timing.now)
                .max(Duration::from_secs(1))
        }
        (Some(retry), _) => retry.max(Duration::from_secs(1)),
        // Past the deadline, the agent's own reports say when the rollout moves.
        (None, None) if pass.timing.now >= pass.timing.deadline => Duration::from_secs(30),
        (None, None) => (pass.timing.deadline - pass.timing.now)
            .to_std()
            .unwrap_or(Duration::from_secs(1))
            .clamp(Duration::from_secs(1), Duration::from_secs(30)),
        _ => SETTLED_RETRY,
    };
    Conclusion {
        status,
        assessment,
        changed,
        requeue,
    }
}

/// The status of an App whose spec cannot be built: `Failed`, not ready, nothing in progress.
pub fn invalid_spec(old: &AppStatus, why: String, generation: i64) -> AppStatus {
    let mut status = old.clone();
    status.phase = Some("Failed".into());
    conditions::set(
        &mut status.conditions,
        READY,
        false,
        "InvalidSpec",
        why,
        Some(generation),
    );
    conditions::remove(&mut status.conditions, PROGRESSING);
    status
}

/// The status of an App whose project or cluster is not there or not ready.
pub fn unplaced(old: &AppStatus, reason: &str, message: String, generation: i64) -> AppStatus {
    let mut status = old.clone();
    if status.phase.is_none() || status.observed_revision.is_none() {
        status.phase = Some("Pending".into());
    }
    conditions::set(
        &mut status.conditions,
        READY,
        false,
        reason,
        message,
        Some(generation),
    );
    status
}

#[cfg(test)]
mod tests {
    use kubenest_crds::app::Rejection;

    use super::*;

    fn at(seconds: i64) -> DateTime<Utc> {
        DateTime::from_timestamp(1_800_000_000 + seconds, 0).unwrap()
    }

    fn started(status: &mut AppStatus) {
        status.rollout_started_at = Some(crate::rfc3339(at(0)));
    }

    #[test]
    fn the_deadline_counts_from_the_rollouts_start_and_spares_a_settled_revision() {
        let mut status = AppStatus::default();
        started(&mut status);
        assert!(!timing(&status, "r1", 600, at(599)).expired);
        assert!(timing(&status, "r1", 600, at(601)).expired);
        status.observed_revision = Some("r1".into());
        status.cluster_phase = Some("Running".into());
        let settled = timing(&status, "r1", 600, at(601));
        assert!(settled.observed && !settled.expired);
    }

    #[test]
    fn a_revision_past_its_deadline_has_no_outcome_until_the_cluster_has_it() {
        let mut status = AppStatus::default();
        started(&mut status);
        let late = timing(&status, "r1", 10, at(60));
        assert!(late.expired);
        let pass = Pass {
            revision: "r1",
            generation: 2,
            deadline_seconds: 10,
            timing: &late,
            waiting: Some(("ClusterUnreachable".into(), "no session".into())),
            retry: Some(Duration::from_secs(7)),
        };
        let c = conclude(&AppStatus::default(), status.clone(), &pass);
        assert_eq!(c.status.phase.as_deref(), Some("Pending"));
        assert_eq!(
            c.assessment.outcome, None,
            "no final outcome while undelivered"
        );
        let ready = conditions::get(&c.status.conditions, READY).unwrap();
        assert_eq!(ready.reason, "DeliveryDelayed");
        let progressing = conditions::get(&c.status.conditions, PROGRESSING).unwrap();
        assert_eq!(
            (progressing.status.as_str(), progressing.reason.as_str()),
            ("True", "ClusterUnreachable")
        );
        assert_eq!(c.requeue, Duration::from_secs(7));

        // Delivered late and rolling out: the agent's deadline runs now; the App waits for it.
        status.observed_revision = Some("r1".into());
        status.cluster_phase = Some("Deploying".into());
        let observed = timing(&status, "r1", 10, at(61));
        let pass = Pass {
            timing: &observed,
            waiting: None,
            retry: None,
            ..pass
        };
        let c = conclude(&AppStatus::default(), status, &pass);
        assert_eq!(c.status.phase.as_deref(), Some("Deploying"));
        assert_eq!(c.requeue, Duration::from_secs(30));
    }

    #[test]
    fn a_rejection_names_its_field_and_one_of_another_revision_is_dropped() {
        let mut status = AppStatus {
            rejection: Some(Rejection {
                revision: "r1".into(),
                reason: "invalid".into(),
                message: "no".into(),
                field: Some("/components/0/name".into()),
            }),
            ..AppStatus::default()
        };
        let t = timing(&status, "r1", 600, at(0));
        assert_eq!(
            t.rejected.as_deref(),
            Some("invalid: no (field /components/0/name)")
        );
        drop_stale_rejection(&mut status, "r1");
        assert!(status.rejection.is_some());
        drop_stale_rejection(&mut status, "r2");
        assert!(status.rejection.is_none());
    }

    #[test]
    fn a_waiting_rollout_says_why_and_looks_again_before_its_deadline() {
        let mut status = AppStatus::default();
        started(&mut status);
        let t = timing(&status, "r1", 600, at(590));
        let pass = Pass {
            revision: "r1",
            generation: 3,
            deadline_seconds: 600,
            timing: &t,
            waiting: Some(("ClusterUnreachable".into(), "no session".into())),
            retry: None,
        };
        let c = conclude(&AppStatus::default(), status.clone(), &pass);
        assert_eq!(c.status.phase.as_deref(), Some("Pending"));
        let progressing = conditions::get(&c.status.conditions, PROGRESSING).unwrap();
        assert_eq!(progressing.reason, "ClusterUnreachable");
        assert_eq!(c.requeue, Duration::from_secs(10));
        assert!(c.changed);

        let retry = Pass {
            retry: Some(Duration::from_millis(200)),
            ..pass
        };
        assert_eq!(
            conclude(&AppStatus::default(), status, &retry).requeue,
            Duration::from_secs(1)
        );
    }

    #[test]
    fn a_running_revision_drops_progressing_and_settles() {
        let mut status = AppStatus {
            observed_revision: Some("r1".into()),
            cluster_phase: Some("Running".into()),
            ..AppStatus::default()
        };
        started(&mut status);
        conditions::set(
            &mut status.conditions,
            PROGRESSING,
            true,
            "RollingOut",
            "",
            None,
        );
        let t = timing(&status, "r1", 600, at(5));
        let pass = Pass {
            revision: "r1",
            generation: 1,
            deadline_seconds: 600,
            timing: &t,
            waiting: None,
            retry: None,
        };
        let c = conclude(&status, status.clone(), &pass);
        assert_eq!(c.assessment.outcome, Some(Outcome::Succeeded));
        assert!(conditions::get(&c.status.conditions, PROGRESSING).is_none());
        assert_eq!(c.requeue, SETTLED_RETRY);
    }

    #[test]
    fn an_invalid_spec_fails_and_an_unplaced_app_is_pending() {
        let failed = invalid_spec(&AppStatus::default(), "spec.components: no".into(), 2);
        assert_eq!(failed.phase.as_deref(), Some("Failed"));
        assert_eq!(
            conditions::get(&failed.conditions, READY).unwrap().reason,
            "InvalidSpec"
        );
        let pending = unplaced(&AppStatus::default(), "ProjectNotReady", "wait".into(), 2);
        assert_eq!(pending.phase.as_deref(), Some("Pending"));
    }
}
