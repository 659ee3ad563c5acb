//! The AddonInstance controller's decisions (pure): the chart and values a spec asks for, the
//! operation a new revision records, and the phase and conditions of what the agent reported.

use std::collections::BTreeMap;
use std::time::Duration;

use kubenest_contracts as wire;
use kubenest_crds::addon::{AddonInstance, AddonInstanceStatus};
use serde_json::{Map, Value};

use crate::conditions::{self, PROGRESSING, READY};
use crate::deadline::Deadline;
use crate::placement::Unplaced;
use kubenest_domain::app::{ResolvedAddon, merge};
use kubenest_store::{AddonOperation, AddonRevision};

/// How long a settled addon waits before it is looked at again.
const SETTLED_RECHECK: Duration = Duration::from_secs(300);

/// The chart and values a spec asks for: its definition's, with the spec's version and values
/// over them.
#[derive(Debug, Clone, PartialEq)]
pub struct Desired {
    pub chart: wire::ChartRef,
    pub values: Map<String, Value>,
    pub exports: BTreeMap<String, String>,
    /// `chart` as the revision history records it.
    pub chart_json: Value,
}

impl Desired {
    /// `values` as the revision history records it.
    pub fn values_json(&self) -> Value {
        Value::Object(self.values.clone())
    }
}

/// What `addon` asks for of its definition `resolved`.
pub fn desired(
    addon: &AddonInstance,
    resolved: &ResolvedAddon,
) -> Result<Desired, serde_json::Error> {
    let mut chart = resolved.chart.clone();
    if let Some(version) = &addon.spec.version {
        chart.version = version.clone();
    }
    let mut values = resolved.default_values.clone();
    merge(&mut values, &addon.spec.values);
    Ok(Desired {
        chart_json: serde_json::to_value(&chart)?,
        chart,
        values,
        exports: resolved.exports.clone(),
    })
}

/// Which operation turns the latest revision's chart into `chart`.
pub fn operation_of(latest: Option<&AddonRevision>, chart: &Value) -> AddonOperation {
    match latest {
        None => AddonOperation::Install,
        Some(latest) if latest.chart.get("version") != chart.get("version") => {
            AddonOperation::Upgrade
        }
        Some(_) => AddonOperation::Values,
    }
}

/// Whether generation `generation` still needs its revision row.
pub fn needs_revision(status: &AddonInstanceStatus, generation: i64) -> bool {
    status.recorded_generation != Some(generation) || status.revision.is_none()
}

/// The latest revision row when it records this very spec and is still pending: a repeated
/// reconcile reuses it instead of recording another.
pub fn reusable<'a>(
    latest: Option<&'a AddonRevision>,
    desired: &Desired,
) -> Option<&'a AddonRevision> {
    let values = desired.values_json();
    latest.filter(|l| l.chart == desired.chart_json && l.values == values && l.status == "pending")
}

/// The status of an addon that cannot be placed (yet).
pub fn unplaced(
    old: &AddonInstanceStatus,
    unplaced: &Unplaced,
    generation: i64,
) -> AddonInstanceStatus {
    let mut status = old.clone();
    status.phase = Some("Pending".into());
    conditions::set(
        &mut status.conditions,
        READY,
        false,
        unplaced.reason(),
        unplaced.message(),
        Some(generation),
    );
    status
}

/// The status of an addon whose definition does not exist.
pub fn no_definition(
    old: &AddonInstanceStatus,
    definition: &str,
    generation: i64,
) -> AddonInstanceStatus {
    let mut status = old.clone();
    status.phase = Some("Failed".into());
    conditions::set(
        &mut status.conditions,
        READY,
        false,
        "InvalidSpec",
        format!("spec.definition: no addon definition named {definition:?}"),
        Some(generation),
    );
    status
}

/// Where a revision stands, from what the agent reported.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Progress {
    pub phase: &'static str,
    pub ready: bool,
    pub reason: String,
    pub message: String,
    /// Whether the revision succeeded, once it is over.
    pub outcome: Option<bool>,
}

/// Where `revision` stands: what the agent reported for it when it `observed` that revision,
/// else why it waits (`waiting`, the last send's outcome); `deadline` says whether the time it
/// had (to reach the cluster, then to be ready there) ran out.
pub fn progress(
    revision: u32,
    old: &AddonInstanceStatus,
    observed: bool,
    waiting: Option<(String, String)>,
    deadline: &Deadline,
    seconds: u32,
) -> Progress {
    let cluster_phase = if observed {
        old.cluster_phase.as_deref()
    } else {
        None
    };
    let what = format!("revision {revision}");
    let (phase, ready, reason, message, outcome) = match cluster_phase {
        Some("Ready") => (
            "Ready",
            true,
            "Installed".to_owned(),
            format!("revision {revision} is installed"),
            Some(true),
        ),
        Some("Failed") => (
            "Failed",
            false,
            "InstallFailed".to_owned(),
            format!("revision {revision} failed: {}", old.message),
            Some(false),
        ),
        Some(other) => {
            let last = if old.message.is_empty() {
                format!("it is {other} on the cluster")
            } else {
                old.message.clone()
            };
            match deadline.passed(&what, seconds, &last) {
                Some((reason, message)) => {
                    ("Failed", false, reason.to_owned(), message, Some(false))
                }
                None => (
                    "Installing",
                    false,
                    "Installing".to_owned(),
                    format!("revision {revision} is {other} on the cluster"),
                    None,
                ),
            }
        }
        None => {
            let (reason, message) =
                waiting.unwrap_or(("AwaitingAgent".into(), "waiting for the agent".into()));
            match deadline.passed(&what, seconds, &format!("{reason}: {message}")) {
                // Not delivered: named, never final; the command is still sent.
                Some((late, why)) => ("Pending", false, late.to_owned(), why, None),
                None if reason == "AwaitingAgent" => ("Installing", false, reason, message, None),
                None => ("Pending", false, reason, message, None),
            }
        }
    };
    Progress {
        phase,
        ready,
        reason,
        message,
        outcome,
    }
}

/// The outcome to record in the revision history, if one is due. Once per revision, not only
/// on a change of phase: a rollback from Ready to Ready may never show a reconcile the phase
/// change (as for Apps, see the App controller). `recorded`: this process recorded it already.
pub fn outcome_due(old: &AddonInstanceStatus, progress: &Progress, recorded: bool) -> Option<bool> {
    progress
        .outcome
        .filter(|_| old.phase.as_deref() != Some(progress.phase) || !recorded)
}

/// `status` showing `progress`.
pub fn show(
    mut status: AddonInstanceStatus,
    progress: &Progress,
    generation: i64,
) -> AddonInstanceStatus {
    status.phase = Some(progress.phase.into());
    conditions::set(
        &mut status.conditions,
        READY,
        progress.ready,
        &progress.reason,
        progress.message.clone(),
        Some(generation),
    );
    if progress.outcome.is_some() {
        conditions::remove(&mut status.conditions, PROGRESSING);
    } else {
        conditions::set(
            &mut status.conditions,
            PROGRESSING,
            true,
            &progress.reason,
            progress.message.clone(),
            Some(generation),
        );
    }
    status
}

/// When to look again: when the command is due again, when the deadline of a revision still
/// in progress passes, or a while after the addon settled.
pub fn requeue(retry: Option<Duration>, progress: &Progress, deadline: &Deadline) -> Duration {
    let until_deadline = (deadline.at - chrono::Utc::now())
        .to_std()
        .unwrap_or(Duration::ZERO)
        + Duration::from_secs(1);
    let next = match (retry, progress.outcome) {
        (Some(retry), None) => crate::deadline::sooner(retry, deadline.at, chrono::Utc::now()),
        (Some(retry), _) => retry,
        (None, None) if !deadline.expired => until_deadline.min(SETTLED_RECHECK),
        _ => SETTLED_RECHECK,
    };
    next.max(Duration::from_secs(1))
}

#[cfg(test)]
mod tests {
    use kubenest_crds::addon::AddonInstanceSpec;
    use serde_json::json;

    use super::*;

    fn revision(version: &str) -> AddonRevision {
        AddonRevision {
            addon_id: "a".into(),
            revision: 1,
            org_id: "o".into(),
            project_id: "p".into(),
            definition: "postgres".into(),
            chart: json!({"name": "postgres", "version": version}),
            values: json!({}),
            operation: AddonOperation::Install,
            rollback_to: None,
            actor: "x".into(),
            status: "succeeded".into(),
            message: String::new(),
            created_at: chrono::Utc::now(),
        }
    }

    #[test]
    fn chart_versions_tell_upgrades_from_value_changes() {
        let chart = json!({"name": "postgres", "version": "1.2.0"});
        assert_eq!(operation_of(None, &chart), AddonOperation::Install);
        assert_eq!(
            operation_of(Some(&revision("1.1.0")), &chart),
            AddonOperation::Upgrade
        );
        assert_eq!(
            operation_of(Some(&revision("1.2.0")), &chart),
            AddonOperation::Values
        );
    }

    fn resolved() -> ResolvedAddon {
        ResolvedAddon {
            chart: wire::ChartRef {
                repository: "https://charts.example".into(),
                name: "postgres".into(),
                version: "1.0.0".into(),
            },
            exports: BTreeMap::new(),
            default_values: json!({"a": {"b": 1, "c": 2}}).as_object().cloned().unwrap(),
            values_schema: None,
        }
    }

    fn addon(version: Option<&str>) -> AddonInstance {
        AddonInstance::new(
            "db",
            AddonInstanceSpec {
                project: "web".into(),
                definition: "postgres".into(),
                version: version.map(str::to_owned),
                values: json!({"a": {"c": 3}}).as_object().cloned().unwrap(),
                progress_deadline_seconds: 600,
            },
        )
    }

    #[test]
    fn the_spec_overrides_the_definitions_version_and_values_and_a_pending_row_is_reused() {
        let desired = desired(&addon(Some("1.1.0")), &resolved()).unwrap();
        assert_eq!(desired.chart.version, "1.1.0");
        assert_eq!(desired.values_json(), json!({"a": {"b": 1, "c": 3}}));
        let mut latest = revision("1.1.0");
        latest.chart = desired.chart_json.clone();
        latest.values = desired.values_json();
        assert!(reusable(Some(&latest), &desired).is_none(), "it succeeded");
        latest.status = "pending".into();
        assert!(reusable(Some(&latest), &desired).is_some());
        let unchanged = desired_default();
        assert!(
            reusable(Some(&latest), &unchanged).is_none(),
            "another spec"
        );
    }

    fn desired_default() -> Desired {
        desired(&addon(None), &resolved()).unwrap()
    }

    #[test]
    fn what_the_agent_reported_for_the_revision_decides_the_phase() {
        let old = AddonInstanceStatus {
            cluster_phase: Some("Failed".into()),
            message: "chart not found".into(),
            ..Default::default()
        };
        let on_time = crate::deadline::judge(None, 3, true, 600, chrono::Utc::now());
        let failed = progress(3, &old, true, None, &on_time, 600);
        assert_eq!(failed.phase, "Failed");
        assert_eq!(failed.message, "revision 3 failed: chart not found");
        assert_eq!(failed.outcome, Some(false));
        let sent = progress(
            3,
            &old,
            false,
            Some(("AwaitingAgent".into(), "revision 3 was sent".into())),
            &on_time,
            600,
        );
        assert_eq!((sent.phase, sent.outcome), ("Installing", None));
        let unreachable = progress(
            3,
            &old,
            false,
            Some(("ClusterUnreachable".into(), "x".into())),
            &on_time,
            600,
        );
        assert_eq!(unreachable.phase, "Pending");
        let ready = AddonInstanceStatus {
            cluster_phase: Some("Ready".into()),
            phase: Some("Ready".into()),
            ..Default::default()
        };
        let done = progress(3, &ready, true, None, &on_time, 600);
        assert_eq!(outcome_due(&ready, &done, true), None, "recorded already");
        assert_eq!(outcome_due(&ready, &done, false), Some(true));
        let shown = show(ready.clone(), &done, 4);
        assert!(conditions::get(&shown.conditions, PROGRESSING).is_none());
        let shown = show(ready, &sent, 4);
        assert_eq!(
            conditions::get(&shown.conditions, PROGRESSING).map(|c| c.reason.as_str()),
            Some("AwaitingAgent")
        );
        assert_eq!(requeue(None, &done, &on_time), Duration::from_secs(300));
        assert_eq!(
            requeue(Some(Duration::ZERO), &sent, &on_time),
            Duration::from_secs(1)
        );
    }

    #[test]
    fn a_chart_that_never_becomes_ready_fails_at_its_deadline_and_an_undelivered_one_waits() {
        let start = chrono::Utc::now() - chrono::Duration::seconds(60);
        let clock = crate::deadline::judge(None, 2, true, 10, start).clock;
        let installing = AddonInstanceStatus {
            cluster_phase: Some("Installing".into()),
            message: "0/1 replicas ready; StatefulSet db: 0/1 replicas ready".into(),
            ..Default::default()
        };
        let now = chrono::Utc::now();
        let late = crate::deadline::judge(Some(&clock), 2, true, 10, now);
        let failed = progress(2, &installing, true, None, &late, 10);
        assert_eq!(failed.phase, "Failed");
        assert_eq!(failed.reason, "ProgressDeadlineExceeded");
        assert!(
            failed.message.contains("StatefulSet db"),
            "{}",
            failed.message
        );
        assert_eq!(failed.outcome, Some(false));
        let fresh = crate::deadline::judge(None, 2, true, 10, now);
        let waiting = progress(2, &installing, true, None, &fresh, 10);
        assert_eq!((waiting.phase, waiting.outcome), ("Installing", None));
        let until = requeue(None, &waiting, &fresh);
        assert!(until > Duration::from_secs(1) && until <= Duration::from_secs(11));

        let undelivered = crate::deadline::judge(
            Some(&crate::deadline::judge(None, 2, false, 10, start).clock),
            2,
            false,
            10,
            now,
        );
        let unreachable = Some(("ClusterUnreachable".into(), "no session".into()));
        let delayed = progress(2, &installing, false, unreachable, &undelivered, 10);
        assert_eq!(
            (delayed.phase, delayed.reason.as_str(), delayed.outcome),
            ("Pending", "DeliveryDelayed", None)
        );
    }
}
