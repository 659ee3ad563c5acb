//! What this agent process remembers between passes, kept by the controller it belongs to, not
//! by the shared [`Context`](crate::context::Context):
//!
//! - [`AppMemory`]: per App, the `app.deploy` last stored, the `app.status` last reported and
//!   the StackDeploy status last written. The StackDeploy controller holds it and shares it with
//!   the command handlers, which answer a re-sent `app.deploy` without writing it again and
//!   repeat the last report on a resync.
//! - [`FullPasses`]: per App or addon, when its objects were last all written whatever their
//!   stamps say; each controller keeps its own clock.
//! - [`LeftBehind`]: per App or addon being deleted, what it last reported as still on the
//!   cluster, so a deletion that looks again every second reports only what changed.
//!
//! Nothing here survives a restart, and nothing needs to: a new process writes once more, and
//! reports what its first pass finds.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use kube::ResourceExt;
use kubenest_contracts::{AppDeploy, AppPhase, AppStatus};

use crate::crd::{StackDeploy, StackDeployStatus};
use crate::report::{LastReports, Reporter};

/// How often every object of an App or addon is written again even when its stamp says it is
/// current, so changes by others to fields drift detection does not compare are healed too.
pub const FULL_PASS_EVERY: Duration = Duration::from_secs(300);

/// How long an `app.status` of a rollout still under way (`Deploying`) is held back for a newer
/// one ([`AppMemory::report`]). Most rollouts settle sooner (a Deployment of small images is
/// Ready in tens of milliseconds), and are then reported once instead of twice; every report
/// costs the management cluster two status writes (the observation, then what the controllers
/// make of it) and a reconcile. A rollout that takes longer is reported at most this often.
/// The controllers' acceptance of the command waits longer than this for a report to ride on
/// (`ACCEPTANCE_WAIT` there).
pub const PROGRESS_REPORT_WAIT: Duration = Duration::from_millis(200);

/// A lock whose poisoning only means a panic elsewhere; the map is still valid.
fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|e| e.into_inner())
}

/// When each object's last full pass ran, by App or addon id.
#[derive(Debug, Default)]
pub struct FullPasses(Mutex<HashMap<String, Instant>>);

impl FullPasses {
    /// Whether `id` is due a full pass (and marks it done): its first pass in this process, or
    /// [`FULL_PASS_EVERY`] after the last.
    pub fn due(&self, id: &str) -> bool {
        let mut passes = lock(&self.0);
        let now = Instant::now();
        let due = passes
            .get(id)
            .is_none_or(|last| now.duration_since(*last) >= FULL_PASS_EVERY);
        if due {
            passes.insert(id.to_owned(), now);
        }
        due
    }

    /// Forgets `id`'s clock (it is gone).
    pub fn forget(&self, id: &str) {
        lock(&self.0).remove(id);
    }
}

/// What each deletion last reported as still on the cluster, by App or addon id.
#[derive(Debug, Default)]
pub struct LeftBehind(Mutex<HashMap<String, String>>);

impl LeftBehind {
    /// Whether `left` differs from what `id`'s deletion last reported (and records it).
    pub fn changed(&self, id: &str, left: &str) -> bool {
        let mut reported = lock(&self.0);
        if reported.get(id).map(String::as_str) == Some(left) {
            return false;
        }
        reported.insert(id.to_owned(), left.to_owned());
        true
    }

    /// Forgets `id` (its deletion finished).
    pub fn forget(&self, id: &str) {
        lock(&self.0).remove(id);
    }
}

/// What this process last did for each App, by App id.
#[derive(Debug, Default)]
pub struct AppMemory {
    /// The `app.deploy` each App's StackDeploy was last written with, so a re-send of the same
    /// command (the management side re-sends until it hears the answer) is answered without
    /// writing it again.
    stored: Mutex<HashMap<String, Arc<AppDeploy>>>,
    /// The `app.status` last reported. A resync sends it again: the StackDeploy's status is
    /// written after the report, so it can be one step behind, and resending that would tell
    /// the management side an older state as the newest (and the next pass, finding nothing
    /// changed, would not correct it).
    pub reported: LastReports,
    /// The status last written to each App's StackDeploy: (StackDeploy uid, status). Only the
    /// agent writes that status, so this is never older than the controller's cached copy,
    /// which lags behind the write it just made (see [`AppMemory::last_written`]).
    written: Mutex<HashMap<String, (String, StackDeployStatus)>>,
    /// Reports of rollouts under way held back for a newer one, by App id.
    held_back: Arc<Mutex<HashMap<String, AppStatus>>>,
}

impl AppMemory {
    /// The StackDeploy's status as this process last wrote it, or as `held` (the controller's
    /// cached copy) has it when this process has not written it. A pass woken right after the
    /// previous one (by the Deployment that pass created) often runs before the cache has seen
    /// that pass's status write; judged on the cached copy, it would take the revision for a
    /// new one and apply everything again.
    pub fn last_written(&self, held: &StackDeploy) -> StackDeployStatus {
        let uid = held.uid().unwrap_or_default();
        lock(&self.written)
            .get(held.spec.deploy.app.app_id.as_str())
            .filter(|(u, _)| *u == uid)
            .map(|(_, s)| s.clone())
            .or_else(|| held.status.clone())
            .unwrap_or_default()
    }

    /// Notes the status just written to `held`.
    pub fn wrote(&self, held: &StackDeploy, status: StackDeployStatus) {
        let key = held.spec.deploy.app.app_id.to_string();
        lock(&self.written).insert(key, (held.uid().unwrap_or_default(), status));
    }

    /// Sends `status` and remembers it as the App's last report. A report of a rollout under
    /// way (`Deploying`) is held back for [`PROGRESS_REPORT_WAIT`]: a newer one in that time
    /// takes its place, and any other phase (the rollout settled, failed, was paused) is sent
    /// at once with nothing held back left behind it.
    pub fn report(&self, reporter: &Reporter, status: AppStatus) {
        self.reported.record(&status);
        let app_id = status.app_id.to_string();
        if status.phase != AppPhase::Deploying {
            lock(&self.held_back).remove(&app_id);
            reporter.report(status);
            return;
        }
        if lock(&self.held_back)
            .insert(app_id.clone(), status)
            .is_some()
        {
            return; // the wait already running sends this one
        }
        let (held_back, reporter) = (self.held_back.clone(), reporter.clone());
        tokio::spawn(async move {
            tokio::time::sleep(PROGRESS_REPORT_WAIT).await;
            let newest = lock(&held_back).remove(&app_id);
            if let Some(status) = newest {
                reporter.report(status);
            }
        });
    }

    /// Whether `deploy` is exactly what this process last stored for its App.
    pub fn already_stored(&self, deploy: &AppDeploy) -> bool {
        lock(&self.stored)
            .get(deploy.app.app_id.as_str())
            .is_some_and(|held| **held == *deploy)
    }

    /// Remembers that `deploy` is stored.
    pub fn remember_stored(&self, deploy: AppDeploy) {
        lock(&self.stored).insert(deploy.app.app_id.to_string(), Arc::new(deploy));
    }

    /// Forgets what was stored for `app_id` (its App is being deleted).
    pub fn forget_stored(&self, app_id: &str) {
        lock(&self.stored).remove(app_id);
    }

    /// Keeps the stored command of `deploy`'s App only if the StackDeploy holds exactly it:
    /// someone else changed it (or this is an older copy), so a re-send is written again.
    pub fn check_stored(&self, deploy: &AppDeploy) {
        let mut stored = lock(&self.stored);
        let app_id = deploy.app.app_id.as_str();
        if stored.get(app_id).is_some_and(|held| **held != *deploy) {
            stored.remove(app_id);
        }
    }

    /// Forgets everything about `app_id` (the App is gone).
    pub fn forget(&self, app_id: &str) {
        lock(&self.written).remove(app_id);
        lock(&self.held_back).remove(app_id);
        self.forget_stored(app_id);
        self.reported.forget(app_id);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::crd::StackDeploySpec;

    fn held(uid: &str, phase: &str, paused: bool) -> StackDeploy {
        let deploy = serde_json::from_value(serde_json::json!({
            "app": {"app_id": "a1", "name": "shop", "project_id": "p1", "namespace": "shop"},
            "revision": "r1", "progress_deadline_seconds": 60, "components": [],
            "paused": paused,
        }))
        .unwrap();
        let spec = StackDeploySpec {
            deploy,
            restart_id: None,
        };
        let mut held = StackDeploy::new("app-a1", spec);
        held.metadata.uid = Some(uid.into());
        held.status = Some(status(phase));
        held
    }

    fn status(phase: &str) -> StackDeployStatus {
        StackDeployStatus {
            phase: Some(phase.into()),
            ..StackDeployStatus::default()
        }
    }

    #[test]
    fn the_status_last_written_wins_over_a_cached_copy_of_the_same_object_only() {
        let apps = AppMemory::default();
        let cached = held("u1", "Deploying", false);
        assert_eq!(
            apps.last_written(&cached),
            status("Deploying"),
            "nothing written yet"
        );
        apps.wrote(&cached, status("Running"));
        assert_eq!(
            apps.last_written(&cached),
            status("Running"),
            "the cache lags behind this process's own write"
        );
        let recreated = held("u2", "Deploying", false);
        assert_eq!(
            apps.last_written(&recreated),
            status("Deploying"),
            "a new StackDeploy of the same App starts from its own status"
        );
        apps.forget("a1");
        assert_eq!(apps.last_written(&cached), status("Deploying"));
    }

    #[test]
    fn a_resent_command_is_known_until_the_stackdeploy_holds_something_else() {
        let apps = AppMemory::default();
        let deploy = held("u1", "Running", false).spec.deploy;
        assert!(!apps.already_stored(&deploy));
        apps.remember_stored(deploy.clone());
        assert!(apps.already_stored(&deploy));
        apps.check_stored(&deploy);
        assert!(apps.already_stored(&deploy), "the StackDeploy holds it");
        let changed = held("u1", "Running", true).spec.deploy;
        assert!(!apps.already_stored(&changed));
        apps.check_stored(&changed);
        assert!(
            !apps.already_stored(&deploy),
            "someone else wrote the StackDeploy: a re-send is written again"
        );
    }

    fn report(phase: AppPhase, sequence: u64) -> AppStatus {
        serde_json::from_value(serde_json::json!({
            "app_id": "a1", "observed_revision": "r1", "phase": phase, "components": [],
            "observed_at": "2026-12-07T00:00:00Z", "sequence": sequence,
        }))
        .unwrap()
    }

    #[tokio::test]
    async fn a_report_of_a_rollout_under_way_gives_way_to_a_newer_one_and_a_settled_one_goes_at_once()
     {
        let (reporter, mut sent, connected) = Reporter::new();
        connected.send(true).unwrap();
        let apps = AppMemory::default();
        let sequence = |m: Option<kubenest_contracts::Message>| match m {
            Some(kubenest_contracts::Message::AppStatus(s)) => Some(s.sequence),
            _ => None,
        };
        apps.report(&reporter, report(AppPhase::Deploying, 1));
        apps.report(&reporter, report(AppPhase::Deploying, 2));
        assert_eq!(sequence(sent.recv().await), Some(2), "only the newest goes");
        apps.report(&reporter, report(AppPhase::Deploying, 3));
        apps.report(&reporter, report(AppPhase::Running, 4));
        assert_eq!(sequence(sent.recv().await), Some(4), "settled: at once");
        let late = tokio::time::timeout(PROGRESS_REPORT_WAIT * 3, sent.recv()).await;
        assert!(late.is_err(), "the report it replaced never follows");
    }

    #[test]
    fn a_full_pass_is_due_first_then_not_until_the_period_or_a_forget() {
        let passes = FullPasses::default();
        assert!(
            passes.due("a1"),
            "the first pass of a process writes everything"
        );
        assert!(!passes.due("a1"), "then the stamps decide");
        assert!(passes.due("a2"), "each id has its own clock");
        passes.forget("a1");
        assert!(passes.due("a1"), "a forgotten id starts again");
    }

    #[test]
    fn what_a_deletion_left_behind_is_reported_only_when_it_changes() {
        let left = LeftBehind::default();
        assert!(left.changed("a1", "ConfigMap/x"));
        assert!(!left.changed("a1", "ConfigMap/x"), "the same list again");
        assert!(left.changed("a1", "ConfigMap/x (finalizers: f)"));
        assert!(left.changed("a2", "ConfigMap/x"), "each id on its own");
        left.forget("a1");
        assert!(left.changed("a1", "ConfigMap/x (finalizers: f)"));
    }
}
