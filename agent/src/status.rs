//! Status events from what the agent holds: the `snapshot` with a checksum per StackDeploy, and
//! the current status of every object for a resync.

use kube::api::{Api, ListParams};
use kubenest_contracts::{self as wire, AppPhase, Message};

use crate::context::Context;
use crate::crd::{AddonRelease, StackDeploy};
use crate::uplink::Reporter;

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
            type_: "Ready".into(),
            status: wire::ConditionStatus::False,
            reason: "NamespaceViolation".into(),
            message: rejection.chars().take(4096).collect(),
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

/// The snapshot of every StackDeploy.
pub async fn snapshot(ctx: &Context) -> wire::Snapshot {
    let held = crate::commands::stack_deploys(ctx)
        .await
        .unwrap_or_default();
    wire::Snapshot {
        stack_deploys: held
            .iter()
            .map(|sd| wire::SnapshotEntry {
                app_id: sd.spec.deploy.app.app_id.clone(),
                revision: sd.spec.deploy.revision.clone(),
                checksum: sd.spec.deploy.checksum(),
                phase: if sd.metadata.deletion_timestamp.is_some() {
                    AppPhase::Deleting
                } else {
                    phase_of(sd.status.as_ref().and_then(|s| s.phase.as_deref()))
                },
            })
            .collect(),
        taken_at: chrono::Utc::now(),
    }
}

/// The current status of every project, App and standalone addon.
pub async fn resync(ctx: &Context) -> Vec<Message> {
    let mut events: Vec<Message> = crate::project::statuses(ctx)
        .await
        .into_iter()
        .map(Message::from)
        .collect();
    for held in crate::commands::stack_deploys(ctx)
        .await
        .unwrap_or_default()
    {
        if let Some(status) = ctx.reported.again(&ctx.reporter, &held) {
            events.push(status.into());
        }
    }
    let releases = Api::<AddonRelease>::namespaced(ctx.client.clone(), &ctx.namespace)
        .list(&ListParams::default())
        .await
        .map(|l| l.items)
        .unwrap_or_default();
    for release in releases {
        if let Some(status) = crate::addon::release_status(&release) {
            events.push(status.into());
        }
    }
    events
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
}
