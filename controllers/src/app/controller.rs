//! The App controller: durable intent.
//!
//! For every generation of an App it computes the revision (the spec's hash), writes the
//! deployment row to PostgreSQL **before** anything is sent, and re-sends the complete desired
//! state (`app.deploy`) with backoff until the agent reports that revision observed. While it
//! waits, a `Progressing` condition names why (`ClusterUnreachable`, `HubUnavailable`,
//! `AwaitingAgent`, `RollingOut`); a revision that is not running within the App's progress
//! deadline is `Failed` with `ProgressDeadlineExceeded`. The agent's reports (written into the
//! status by the status router) decide the phase and the deployment's outcome.
//!
//! Requests that are not spec changes travel as annotations, so kubectl and REST share one path:
//! `kubenest.io/redeploy: <token>` restarts the workloads at the same revision (once per token),
//! `kubenest.io/rollback-to: <deployment id>` restores that deployment's spec snapshot as a new
//! revision. Deletion holds a finalizer until the agent confirms everything is removed.

use kubenest_crds::names::{annotations, field_managers, finalizers};
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, Utc};

use futures::StreamExt;
use kube::ResourceExt;
use kube::api::{Api, Patch, PatchParams};
use kube::runtime::controller::{Action, Controller};
use kube::runtime::reflector::ObjectRef;
use kube::runtime::watcher;
use kubenest_contracts as wire;
use kubenest_crds::addon::AddonDefinition;
use kubenest_crds::app::{App, AppSpec, AppStatus};
use kubenest_crds::project::Project;
use serde_json::json;
use tokio::sync::mpsc;
use uuid::Uuid;

use super::{AppIdentity, ResolvedAddon, build_deploy};
use crate::conditions::{self, PROGRESSING, READY};
use crate::history::{DeploymentStatus, HistoryError, NewDeployment, Operation};
use crate::intents::{ObjectKey, Sent};
use crate::placement::{self, Placement, Unplaced};
use crate::plane::Plane;
pub use crate::reconcile::Error;
use crate::reconcile::{await_deletion, error_policy, key_of};
use crate::rfc3339;

/// How long after a send an accepted (durably stored) revision is sent again if still not
/// reported observed.
const ACCEPTED_RESEND: Duration = Duration::from_secs(20);
/// The longest a recorded App waits for the rest of a burst's rows before it is dispatched.
const BURST_WAIT: Duration = Duration::from_secs(1);

/// The outcome of weighing what the App wants against what is known of the cluster (pure).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Assessment {
    pub phase: &'static str,
    pub ready: bool,
    pub reason: String,
    pub message: String,
    /// The deployment's final outcome, once there is one.
    pub outcome: Option<DeploymentStatus>,
}

/// What [`assess`] weighs.
#[derive(Debug, Clone, Default)]
pub struct Facts<'a> {
    pub revision: &'a str,
    /// The agent reported this revision observed.
    pub observed: bool,
    /// The phase the agent reported.
    pub cluster_phase: Option<&'a str>,
    /// Why, when the agent said.
    pub cluster_message: Option<&'a str>,
    /// The agent accepted this revision (stored it durably).
    pub accepted: bool,
    /// The agent refused this revision: (reason, message).
    pub rejected: Option<String>,
    /// The progress deadline of this revision has passed.
    pub expired: bool,
    pub deadline_seconds: u32,
    /// Why a send did not get through, or that it is on its way: (reason, message).
    pub waiting: Option<(&'a str, String)>,
}

/// Decides phase, readiness and outcome (pure).
pub fn assess(facts: &Facts<'_>) -> Assessment {
    let revision = facts.revision;
    let done = |phase, ready, reason: &str, message: String, outcome| Assessment {
        phase,
        ready,
        reason: reason.into(),
        message,
        outcome,
    };
    if let Some(rejection) = &facts.rejected {
        return done(
            "Failed",
            false,
            "Rejected",
            format!("the agent refused revision {revision}: {rejection}"),
            Some(DeploymentStatus::Failed),
        );
    }
    let deadline = || {
        done(
            "Failed",
            false,
            "ProgressDeadlineExceeded",
            format!(
                "revision {revision} was not running within {}s{}",
                facts.deadline_seconds,
                facts
                    .waiting
                    .as_ref()
                    .map(|(reason, _)| format!(" (last: {reason})"))
                    .unwrap_or_default()
            ),
            Some(DeploymentStatus::Failed),
        )
    };
    if facts.observed {
        return match facts.cluster_phase {
            Some("Running") => done(
                "Running",
                true,
                "Running",
                format!("revision {revision} is running"),
                Some(DeploymentStatus::Succeeded),
            ),
            Some("Paused") => done(
                "Paused",
                false,
                "Paused",
                format!("revision {revision} is paused: workloads scaled to zero"),
                Some(DeploymentStatus::Succeeded),
            ),
            Some("Failed") => done(
                "Failed",
                false,
                "ComponentsFailed",
                match facts.cluster_message {
                    Some(why) => format!("revision {revision} failed on the cluster: {why}"),
                    None => format!("revision {revision} failed on the cluster; see components"),
                },
                Some(DeploymentStatus::Failed),
            ),
            _ if facts.expired => deadline(),
            _ => done(
                "Deploying",
                false,
                "RollingOut",
                format!(
                    "revision {revision} is applied; waiting for its components to become ready"
                ),
                None,
            ),
        };
    }
    if facts.expired {
        return deadline();
    }
    match &facts.waiting {
        Some((reason @ ("ClusterUnreachable" | "HubUnavailable" | "InvalidCommand"), message)) => {
            done("Pending", false, reason, message.clone(), None)
        }
        _ if facts.accepted => done(
            "Deploying",
            false,
            "AwaitingAgent",
            format!("revision {revision} was accepted by the agent; waiting for it to be applied"),
            None,
        ),
        Some((reason, message)) => done("Deploying", false, reason, message.clone(), None),
        None => done(
            "Pending",
            false,
            "AwaitingAgent",
            format!("revision {revision} is recorded; sending it to the cluster"),
            None,
        ),
    }
}

/// Who made the App's current spec: the REST facade's `kubenest.io/actor` when that field
/// manager wrote it, else the Kubernetes field manager that last changed the spec.
pub fn actor_of(app: &App) -> String {
    actor_of_fields(app.managed_fields(), app.annotations())
}

/// [`actor_of`] for any object, from its managed fields and annotations.
pub fn actor_of_fields(
    fields: &[k8s_openapi::apimachinery::pkg::apis::meta::v1::ManagedFieldsEntry],
    annotations: &BTreeMap<String, String>,
) -> String {
    let by_api = fields.iter().any(|f| {
        f.manager.as_deref() == Some(field_managers::API)
            && f.fields_v1.as_ref().is_some_and(|v| {
                v.0.pointer("/f:metadata/f:annotations")
                    .and_then(|a| a.get(format!("f:{}", annotations::ACTOR)))
                    .is_some()
            })
    });
    if by_api && let Some(actor) = annotations.get(annotations::ACTOR) {
        return actor.clone();
    }
    fields
        .iter()
        .filter(|f| f.manager.as_deref() != Some(field_managers::CONTROLLERS))
        .filter(|f| {
            f.fields_v1
                .as_ref()
                .is_some_and(|v| v.0.get("f:spec").is_some())
        })
        .max_by_key(|f| f.time.as_ref().map(|t| t.0))
        .and_then(|f| f.manager.clone())
        .map_or_else(|| "unknown".to_owned(), |m| format!("kubernetes:{m}"))
}

async fn write_status(
    plane: &Plane,
    key: &ObjectKey,
    old: &AppStatus,
    new: &AppStatus,
) -> Result<(), Error> {
    if old == new {
        return Ok(());
    }
    // Only the controller's fields: the status router writes what the agent reports.
    let patch = json!({ "status": {
        "phase": new.phase,
        "revision": new.revision,
        "deploymentId": new.deployment_id,
        "recordedGeneration": new.recorded_generation,
        "rolloutStartedAt": new.rollout_started_at,
        "rejection": new.rejection,
        "conditions": new.conditions,
    }});
    Api::<App>::namespaced(plane.client.clone(), &key.namespace)
        .patch_status(&key.name, &PatchParams::default(), &Patch::Merge(&patch))
        .await?;
    Ok(())
}

/// The AddonDefinitions the spec names, from the App's namespace or else the system namespace.
async fn resolve_addons(
    plane: &Plane,
    namespace: &str,
    spec: &AppSpec,
) -> Result<BTreeMap<String, ResolvedAddon>, Error> {
    let mut resolved = BTreeMap::new();
    for component in &spec.components {
        let Some(addon) = &component.addon else {
            continue;
        };
        if resolved.contains_key(&addon.definition) {
            continue;
        }
        if let Some(definition) = definition(plane, namespace, &addon.definition) {
            resolved.insert(addon.definition.clone(), resolved_addon(&definition));
        }
    }
    Ok(resolved)
}

/// AddonDefinition `name`, from `namespace` or else the system namespace.
pub fn definition(plane: &Plane, namespace: &str, name: &str) -> Option<Arc<AddonDefinition>> {
    [namespace, plane.system_namespace.as_str()]
        .into_iter()
        .find_map(|ns| {
            plane
                .caches
                .definitions
                .get(&ObjectRef::new(name).within(ns))
        })
}

/// An AddonDefinition as the wire needs it.
pub fn resolved_addon(definition: &AddonDefinition) -> ResolvedAddon {
    let chart = &definition.spec.chart;
    ResolvedAddon {
        chart: wire::ChartRef {
            repository: chart.repository.clone(),
            name: chart.name.clone(),
            version: chart.version.clone(),
        },
        exports: definition.spec.exports.clone(),
        default_values: definition.spec.default_values.clone(),
    }
}

#[tracing::instrument(skip(app, plane), fields(app = %app.name_any()))]
async fn reconcile(app: Arc<App>, plane: Arc<Plane>) -> Result<Action, Error> {
    let key = key_of(&*app)?;
    let held = app.finalizers().iter().any(|f| f == finalizers::APP);
    if app.metadata.deletion_timestamp.is_some() {
        if !held {
            return Ok(Action::await_change());
        }
        let action = cleanup(&app, &plane, &key).await?;
        release(&app, &plane, &key).await?;
        return Ok(action);
    }
    apply(&app, &plane, &key).await
}

/// Adds the cleanup finalizer, guarded so that a concurrent change of the list is not lost.
/// The App controller does this itself (not with kube-runtime's `finalizer` helper, which adds it
/// in a reconcile of its own) so that the deployment row of a new App is written in its first
/// reconcile, before any write to the API server: the row is the durable intent.
async fn hold(app: &App, plane: &Plane, key: &ObjectKey) -> Result<(), Error> {
    let patch = match app.metadata.finalizers.as_deref() {
        None | Some([]) => json!([
            {"op": "test", "path": "/metadata/finalizers", "value": app.metadata.finalizers},
            {"op": "add", "path": "/metadata/finalizers", "value": [finalizers::APP]},
        ]),
        Some(existing) => json!([
            {"op": "test", "path": "/metadata/finalizers", "value": existing},
            {"op": "add", "path": "/metadata/finalizers/-", "value": finalizers::APP},
        ]),
    };
    patch_finalizers(plane, key, patch).await
}

/// Removes the cleanup finalizer once the cluster side is gone.
async fn release(app: &App, plane: &Plane, key: &ObjectKey) -> Result<(), Error> {
    let Some(index) = app.finalizers().iter().position(|f| f == finalizers::APP) else {
        return Ok(());
    };
    let path = format!("/metadata/finalizers/{index}");
    let patch = json!([
        {"op": "test", "path": path, "value": finalizers::APP},
        {"op": "remove", "path": path},
    ]);
    match patch_finalizers(plane, key, patch).await {
        // Already gone with the App.
        Err(Error::Kube(kube::Error::Api(status))) if status.code == 404 => Ok(()),
        other => other,
    }
}

async fn patch_finalizers(
    plane: &Plane,
    key: &ObjectKey,
    patch: serde_json::Value,
) -> Result<(), Error> {
    let patch: json_patch::Patch =
        serde_json::from_value(patch).map_err(|e| Error::Invalid(e.to_string()))?;
    Api::<App>::namespaced(plane.client.clone(), &key.namespace)
        .patch(
            &key.name,
            &PatchParams::default(),
            &Patch::<()>::Json(patch),
        )
        .await?;
    Ok(())
}

async fn apply(app: &App, plane: &Plane, key: &ObjectKey) -> Result<Action, Error> {
    let generation = app.metadata.generation.unwrap_or(0);
    let old = app.status.clone().unwrap_or_default();
    let mut status = old.clone();

    if let Some(target) = app.annotations().get(annotations::ROLLBACK_TO) {
        return rollback(app, plane, key, target, &old).await;
    }

    let placement = match placement::place(&plane.caches, &key.namespace, &app.spec.project, true) {
        Ok(placement) => placement,
        Err(unplaced) => return unplaced_app(plane, key, &old, &unplaced, generation).await,
    };
    let addons = resolve_addons(plane, &key.namespace, &app.spec).await?;
    let identity = AppIdentity {
        app_id: key.uid.clone(),
        name: key.name.clone(),
        project_id: placement.project_id.clone(),
        namespace: placement.namespace.clone(),
    };
    let deploy = match build_deploy(&identity, &app.spec, &addons) {
        Ok(deploy) => deploy,
        Err(error) => {
            status.phase = Some("Failed".into());
            conditions::set(
                &mut status.conditions,
                READY,
                false,
                "InvalidSpec",
                error.to_string(),
                Some(generation),
            );
            conditions::remove(&mut status.conditions, PROGRESSING);
            write_status(plane, key, &old, &status).await?;
            // A missing AddonDefinition may appear; other errors need a spec change.
            return Ok(Action::requeue(Duration::from_secs(60)));
        }
    };
    let revision = deploy.revision.clone();

    // 1. The deployment row, before anything is sent.
    let recorded = status.recorded_generation == Some(generation)
        && status.revision.as_deref() == Some(revision.as_str())
        && status.deployment_id.is_some();
    let adopt = restored_rollback(app, plane, &placement, &revision, &status).await?;
    if !recorded || adopt.is_some() {
        let row = match adopt {
            Some(row) => row,
            None => record(app, plane, key, &placement, &revision, generation).await?,
        };
        status.revision = Some(revision.clone());
        status.deployment_id = Some(row.id.to_string());
        status.recorded_generation = Some(generation);
        status.rollout_started_at = Some(rfc3339(row.created_at));
        plane.intents.settled(&key.uid);
    }
    if status
        .rejection
        .as_ref()
        .is_some_and(|r| r.revision != revision)
    {
        status.rejection = None;
    }

    // 2. Send what the cluster does not have yet, once its deletion is sure to be cleaned up.
    if !app.finalizers().iter().any(|f| f == finalizers::APP) {
        hold(app, plane, key).await?;
    }
    let observed = status.observed_revision.as_deref() == Some(revision.as_str());
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
        .map_or_else(Utc::now, |t| t.with_timezone(&Utc));
    let deadline =
        started + chrono::Duration::seconds(i64::from(app.spec.progress_deadline_seconds));
    let now = Utc::now();
    let settled_phase = matches!(
        status.cluster_phase.as_deref(),
        Some("Running" | "Paused" | "Failed")
    );
    let expired = now > deadline && !(observed && settled_phase);
    let checksum = deploy.checksum();
    let differs = plane.intents.differs(&key.uid, &revision, &checksum);
    let previous_wait = conditions::get(&status.conditions, PROGRESSING)
        .map(|c| (c.reason.clone(), c.message.clone()));
    let mut waiting: Option<(String, String)> = None;
    let mut retry = None;
    if rejected.is_none() && !expired && (!observed || differs) {
        let accepted = status.accepted_revision.as_deref() == Some(revision.as_str());
        if accepted && !differs {
            // The agent stored this revision durably and converges on its own: re-sending is
            // only a safety net now, not a retry.
            plane.intents.hold_since_sent(&key.uid, ACCEPTED_RESEND);
        }
        if plane.intents.due(&key.uid) {
            // Forgotten before sending: a snapshot that arrives meanwhile is newer and stays.
            plane.intents.clear_held(&key.uid);
        }
        let sent = Sent::AppDeploy {
            app: key.clone(),
            revision: revision.clone(),
        };
        let routed = format!(
            "revision {revision} was sent to the cluster; waiting for the agent to report it"
        );
        let previous = conditions::get(&status.conditions, PROGRESSING);
        let attempt = plane
            .attempt(&key.uid, &placement, deploy, sent, routed, previous)
            .await;
        waiting = attempt.waiting;
        retry = Some(attempt.retry);
    } else if observed {
        plane.intents.settled(&key.uid);
    }
    redeploy(app, plane, key, &placement, &revision, &mut retry).await?;

    // 3. What it all means.
    let waiting = waiting.or(previous_wait);
    let assessment = assess(&Facts {
        revision: &revision,
        observed,
        cluster_phase: status.cluster_phase.as_deref(),
        cluster_message: status.cluster_message.as_deref(),
        accepted: status.accepted_revision.as_deref() == Some(revision.as_str()),
        rejected,
        expired,
        deadline_seconds: app.spec.progress_deadline_seconds,
        waiting: waiting.as_ref().map(|(r, m)| (r.as_str(), m.clone())),
    });
    if let (Some(outcome), Some(id)) = (assessment.outcome, status.deployment_id.as_deref()) {
        // Once per deployment, not on a change of phase: when the status router's write and
        // this controller's own race, a reconcile may never see the phase change (the App was
        // Running before a rollback and is Running again), and the row would stay pending.
        // A restarted controller records each outcome once more; a finished row keeps its own.
        let changed = old.phase.as_deref() != Some(assessment.phase)
            || conditions::get(&old.conditions, READY).map(|c| c.reason.as_str())
                != Some(assessment.reason.as_str());
        if changed || !plane.intents.outcome_recorded(&key.uid, id) {
            finish(plane, &placement.org_id, id, outcome, &assessment.message).await?;
            plane.intents.record_outcome(&key.uid, id);
        }
    }
    status.phase = Some(assessment.phase.into());
    conditions::set(
        &mut status.conditions,
        READY,
        assessment.ready,
        &assessment.reason,
        assessment.message.clone(),
        Some(generation),
    );
    match &waiting {
        Some((reason, message)) if assessment.outcome.is_none() => conditions::set(
            &mut status.conditions,
            PROGRESSING,
            true,
            reason,
            message.clone(),
            Some(generation),
        ),
        _ if assessment.outcome.is_none() => conditions::set(
            &mut status.conditions,
            PROGRESSING,
            true,
            &assessment.reason,
            assessment.message.clone(),
            Some(generation),
        ),
        // A failed rollout keeps what it last waited for, as Kubernetes Deployments do.
        Some((reason, message)) if assessment.outcome == Some(DeploymentStatus::Failed) => {
            conditions::set(
                &mut status.conditions,
                PROGRESSING,
                false,
                reason,
                message.clone(),
                Some(generation),
            )
        }
        _ => conditions::remove(&mut status.conditions, PROGRESSING),
    };
    sync_condition(&mut status, generation);
    write_status(plane, key, &old, &status).await?;

    let next = match (retry, assessment.outcome) {
        // A command still to be (re-)sent, even for an App that has settled: a snapshot said
        // the cluster lost it while the last send's backoff ran.
        (Some(retry), _) => retry.max(Duration::from_secs(1)),
        (None, None) => (deadline - now)
            .to_std()
            .unwrap_or(Duration::from_secs(1))
            .clamp(Duration::from_secs(1), Duration::from_secs(30)),
        _ => Duration::from_secs(300),
    };
    Ok(Action::requeue(next))
}

/// The `Synced` condition from the drift the agent reported.
fn sync_condition(status: &mut AppStatus, generation: i64) {
    let Some(sync) = status.sync.clone() else {
        return;
    };
    let (ok, reason, message) = match (sync.drift_detected, sync.drift_class.as_deref()) {
        (_, Some("blocked_sync")) => (
            false,
            "BlockedSync",
            format!(
                "the cluster cannot converge ({} field(s)); changes are refused until it clears",
                sync.drift_details.len()
            ),
        ),
        (true, _) => (
            false,
            "DriftDetected",
            format!(
                "{} field(s) changed on the cluster; the agent is re-applying them",
                sync.drift_details.len()
            ),
        ),
        (false, _) => (
            true,
            "InSync",
            "the cluster matches the desired state".to_owned(),
        ),
    };
    conditions::set(
        &mut status.conditions,
        conditions::SYNCED,
        ok,
        reason,
        message,
        Some(generation),
    );
}

async fn unplaced_app(
    plane: &Plane,
    key: &ObjectKey,
    old: &AppStatus,
    unplaced: &Unplaced,
    generation: i64,
) -> Result<Action, Error> {
    let mut status = old.clone();
    if status.phase.is_none() || status.observed_revision.is_none() {
        status.phase = Some("Pending".into());
    }
    conditions::set(
        &mut status.conditions,
        READY,
        false,
        unplaced.reason(),
        unplaced.message(),
        Some(generation),
    );
    write_status(plane, key, old, &status).await?;
    Ok(Action::requeue(Duration::from_secs(10)))
}

async fn finish(
    plane: &Plane,
    org: &str,
    id: &str,
    outcome: DeploymentStatus,
    message: &str,
) -> Result<(), Error> {
    let Ok(id) = Uuid::parse_str(id) else {
        return Ok(());
    };
    match plane
        .history
        .finish_deployment(org, id, outcome, message)
        .await
    {
        // A deployment already superseded or finished keeps its first outcome.
        Ok(_) | Err(HistoryError::InvalidTransition(_) | HistoryError::NotFound) => Ok(()),
        Err(other) => Err(other.into()),
    }
}

/// Records the deployment of the App's current generation (idempotent per generation).
async fn record(
    app: &App,
    plane: &Plane,
    key: &ObjectKey,
    placement: &Placement,
    revision: &str,
    generation: i64,
) -> Result<crate::history::Deployment, Error> {
    let spec_after = serde_json::to_value(&app.spec).map_err(|e| Error::Invalid(e.to_string()))?;
    // The spec before and the operation follow from the App's latest deployment, looked up in
    // the same transaction that writes this one.
    let new = NewDeployment {
        intent_key: format!("{}/g{generation}", key.uid),
        org_id: placement.org_id.clone(),
        project_id: placement.project_id.clone(),
        cluster_id: placement.cluster_id.clone(),
        app_id: key.uid.clone(),
        app_name: key.name.clone(),
        revision: revision.to_owned(),
        operation: Operation::Create,
        actor: actor_of(app),
        spec_before: None,
        spec_after,
        rollback_of: None,
    };
    let (row, inserted) = plane.history.record_change(new).await?;
    if inserted {
        tracing::info!(%revision, operation = row.operation.as_str(), "deployment recorded");
    }
    // When many Apps are taken on at once, their rows go first and their dispatches after:
    // this App's writes to the API server would otherwise slow the recording of the rest.
    plane.history.recorded_burst(BURST_WAIT).await;
    Ok(row)
}

/// The pending rollback deployment the `restored-from` annotation names, when the App's spec is
/// now that rollback's snapshot and the status does not point at it yet.
async fn restored_rollback(
    app: &App,
    plane: &Plane,
    placement: &Placement,
    revision: &str,
    status: &AppStatus,
) -> Result<Option<crate::history::Deployment>, Error> {
    let Some(id) = app
        .annotations()
        .get(annotations::RESTORED_FROM)
        .and_then(|id| Uuid::parse_str(id).ok())
    else {
        return Ok(None);
    };
    if status.deployment_id.as_deref() == Some(id.to_string().as_str()) {
        return Ok(None);
    }
    match plane.history.deployment(&placement.org_id, id).await {
        Ok(found)
            if found.deployment.revision == revision
                && found.deployment.status == DeploymentStatus::Pending
                && Some(found.deployment.app_id.as_str()) == app.uid().as_deref() =>
        {
            Ok(Some(found.deployment))
        }
        Ok(_) | Err(HistoryError::NotFound) => Ok(None),
        Err(other) => Err(other.into()),
    }
}

/// Carries out a rollback request: records the rollback deployment, then restores the snapshot
/// as the App's spec (a new generation that adopts that deployment) in one guarded write.
async fn rollback(
    app: &App,
    plane: &Plane,
    key: &ObjectKey,
    target: &str,
    old: &AppStatus,
) -> Result<Action, Error> {
    let generation = app.metadata.generation.unwrap_or(0);
    let refuse = async |reason: &str, message: String| -> Result<Action, Error> {
        let mut status = old.clone();
        conditions::set(
            &mut status.conditions,
            conditions::ROLLBACK_FAILED,
            true,
            reason,
            message,
            Some(generation),
        );
        write_status(plane, key, old, &status).await?;
        Ok(Action::await_change())
    };
    let Ok(target_id) = Uuid::parse_str(target) else {
        return refuse(
            "InvalidDeploymentId",
            format!(
                "annotation {}: {target:?} is not a deployment id",
                annotations::ROLLBACK_TO
            ),
        )
        .await;
    };
    let placement = match placement::place(&plane.caches, &key.namespace, &app.spec.project, false)
    {
        Ok(p) => p,
        Err(unplaced) => return refuse(unplaced.reason(), unplaced.message()).await,
    };
    let snapshot = match plane.history.deployment(&placement.org_id, target_id).await {
        Ok(found) if found.deployment.app_id == key.uid => found.deployment,
        Ok(_) | Err(HistoryError::NotFound) => {
            return refuse(
                "DeploymentNotFound",
                format!("this App has no deployment {target_id}"),
            )
            .await;
        }
        Err(other) => return Err(other.into()),
    };
    let spec: AppSpec = match serde_json::from_value(snapshot.spec_after.clone()) {
        Ok(spec) => spec,
        Err(error) => {
            return refuse(
                "SnapshotUnreadable",
                format!("deployment {target_id}'s snapshot is not a valid App spec: {error}"),
            )
            .await;
        }
    };
    let spec_before = serde_json::to_value(&app.spec).map_err(|e| Error::Invalid(e.to_string()))?;
    let version = app.resource_version().unwrap_or_default();
    let new = NewDeployment {
        intent_key: format!("{}/rollback/{target_id}/{version}", key.uid),
        org_id: placement.org_id.clone(),
        project_id: placement.project_id.clone(),
        cluster_id: placement.cluster_id.clone(),
        app_id: key.uid.clone(),
        app_name: key.name.clone(),
        revision: super::revision_of(&snapshot.spec_after),
        operation: Operation::Rollback,
        actor: actor_of(app),
        spec_before: Some(spec_before),
        spec_after: snapshot.spec_after.clone(),
        rollback_of: Some(target_id),
    };
    let (row, _) = plane.history.record_deployment(&new).await?;
    let patch = json!([
        {"op": "test", "path": "/metadata/resourceVersion", "value": version},
        {"op": "replace", "path": "/spec", "value": spec},
        {"op": "remove", "path": format!("/metadata/annotations/{}", annotations::ROLLBACK_TO.replace('/', "~1"))},
        {"op": "add", "path": format!("/metadata/annotations/{}", annotations::RESTORED_FROM.replace('/', "~1")), "value": row.id.to_string()},
    ]);
    let patch: json_patch::Patch =
        serde_json::from_value(patch).map_err(|e| Error::Invalid(e.to_string()))?;
    Api::<App>::namespaced(plane.client.clone(), &key.namespace)
        .patch(
            &key.name,
            &PatchParams::default(),
            &Patch::<()>::Json(patch),
        )
        .await?;
    let mut status = old.clone();
    if conditions::remove(&mut status.conditions, conditions::ROLLBACK_FAILED) {
        write_status(plane, key, old, &status).await?;
    }
    tracing::info!(to = %target_id, deployment = %row.id, "rollback restored a snapshot");
    Ok(Action::requeue(Duration::from_secs(1)))
}

/// Sends `app.redeploy` while a redeploy request is not yet carried out (the status router
/// marks it handled when the agent accepts it).
async fn redeploy(
    app: &App,
    plane: &Plane,
    key: &ObjectKey,
    placement: &Placement,
    revision: &str,
    retry: &mut Option<Duration>,
) -> Result<(), Error> {
    let Some(token) = app.annotations().get(annotations::REDEPLOY) else {
        return Ok(());
    };
    let status = app.status.clone().unwrap_or_default();
    if status.handled_redeploy.as_deref() == Some(token.as_str()) {
        return Ok(());
    }
    let due_key = format!("{}/redeploy", key.uid);
    if !plane.intents.due(&due_key) {
        *retry = Some(plane.intents.until_due(&due_key));
        return Ok(());
    }
    let spec = serde_json::to_value(&app.spec).map_err(|e| Error::Invalid(e.to_string()))?;
    let new = NewDeployment {
        intent_key: format!("{}/redeploy/{token}", key.uid),
        org_id: placement.org_id.clone(),
        project_id: placement.project_id.clone(),
        cluster_id: placement.cluster_id.clone(),
        app_id: key.uid.clone(),
        app_name: key.name.clone(),
        revision: revision.to_owned(),
        operation: Operation::Redeploy,
        actor: actor_of(app),
        spec_before: Some(spec.clone()),
        spec_after: spec,
        rollback_of: None,
    };
    let (row, _) = plane.history.record_deployment(&new).await?;
    let command = wire::AppRedeploy {
        app: wire::AppRef {
            app_id: wire::Id::new(&key.uid),
            name: wire::Name::new(&key.name),
            project_id: wire::Id::new(&placement.project_id),
            namespace: wire::Name::new(&placement.namespace),
        },
        revision: revision.to_owned(),
        restart_id: wire::Id::new(row.id.to_string()),
    };
    let sent = Sent::AppRedeploy {
        app: key.clone(),
        token: token.clone(),
        deployment: row.id,
        org: placement.org_id.clone(),
    };
    if let Err(error) = plane.send(placement, command, sent).await {
        tracing::debug!(%error, "app.redeploy not routed");
    }
    let delay = plane.intents.backoff(&due_key);
    *retry = Some(retry.map_or(delay, |r| r.min(delay)));
    Ok(())
}

async fn cleanup(app: &App, plane: &Plane, key: &ObjectKey) -> Result<Action, Error> {
    let old = app.status.clone().unwrap_or_default();
    let placement = match placement::place(&plane.caches, &key.namespace, &app.spec.project, false)
    {
        Ok(placement) => placement,
        // No project or cluster: nothing of the App can be left on a cluster we can reach.
        Err(_) => {
            plane.intents.forget(&key.uid);
            return Ok(Action::await_change());
        }
    };
    if old.revision.is_none() {
        plane.intents.forget(&key.uid);
        return Ok(Action::await_change()); // never recorded, so never sent
    }
    let spec = serde_json::to_value(&app.spec).map_err(|e| Error::Invalid(e.to_string()))?;
    let new = NewDeployment {
        intent_key: format!("{}/delete", key.uid),
        org_id: placement.org_id.clone(),
        project_id: placement.project_id.clone(),
        cluster_id: placement.cluster_id.clone(),
        app_id: key.uid.clone(),
        app_name: key.name.clone(),
        revision: old.revision.clone().unwrap_or_default(),
        operation: Operation::Delete,
        actor: actor_of(app),
        spec_before: Some(spec.clone()),
        spec_after: spec,
        rollback_of: None,
    };
    let (row, _) = plane.history.record_deployment(&new).await?;
    if old.cluster_phase.as_deref() == Some("Deleted") {
        finish(
            plane,
            &placement.org_id,
            &row.id.to_string(),
            DeploymentStatus::Succeeded,
            "the agent removed everything the App owned",
        )
        .await?;
        plane.intents.forget(&key.uid);
        return Ok(Action::await_change());
    }
    let mut status = old.clone();
    status.phase = Some("Deleting".into());
    let command = wire::AppDelete {
        app: wire::AppRef {
            app_id: wire::Id::new(&key.uid),
            name: wire::Name::new(&key.name),
            project_id: wire::Id::new(&placement.project_id),
            namespace: wire::Name::new(&placement.namespace),
        },
    };
    let sent = Sent::AppDelete { app: key.clone() };
    let routed = "app.delete was sent; waiting for the agent to confirm".to_owned();
    let waiting = await_deletion(
        plane,
        &key.uid,
        &placement,
        command,
        sent,
        routed,
        &mut status.conditions,
        app.metadata.generation,
    )
    .await;
    write_status(plane, key, &old, &status).await?;
    Err(waiting)
}

/// Runs the App controller until `shutdown` resolves, on the Apps cache's stream (`apps`, see
/// [`crate::status::Caches::start`]); `triggers` asks for extra reconciles.
pub async fn run(
    plane: Arc<Plane>,
    apps: mpsc::UnboundedReceiver<Arc<App>>,
    triggers: mpsc::Receiver<ObjectRef<App>>,
    shutdown: impl Future<Output = ()> + Send + Sync + 'static,
) {
    let triggers = tokio_stream::wrappers::ReceiverStream::new(triggers);
    let apps = tokio_stream::wrappers::UnboundedReceiverStream::new(apps);
    let caches = plane.caches.clone();
    Controller::for_shared_stream(apps, plane.caches.apps.clone())
        // A project turning Ready (or going away) moves its Apps on.
        .watches(
            Api::<Project>::all(plane.client.clone()),
            watcher::Config::default(),
            move |project| {
                let namespace = project.namespace().unwrap_or_default();
                caches.apps_of(&namespace, &project.name_any())
            },
        )
        .reconcile_on(triggers)
        .graceful_shutdown_on(shutdown)
        .run(reconcile, error_policy::<App>, plane)
        .for_each(|result| async move {
            if let Err(error) = result {
                tracing::debug!(%error, "app reconcile");
            }
        })
        .await;
}

#[cfg(test)]
mod tests {
    use super::*;

    fn facts(revision: &str) -> Facts<'_> {
        Facts {
            revision,
            deadline_seconds: 600,
            ..Facts::default()
        }
    }

    #[test]
    fn an_unreachable_cluster_is_pending_with_the_reason() {
        let mut f = facts("r1");
        f.waiting = Some(("ClusterUnreachable", "no session".into()));
        let a = assess(&f);
        assert_eq!(
            (a.phase, a.reason.as_str()),
            ("Pending", "ClusterUnreachable")
        );
        assert_eq!(a.outcome, None);
    }

    #[test]
    fn a_routed_command_is_deploying_until_the_agent_reports_running() {
        let mut f = facts("r1");
        f.waiting = Some(("AwaitingAgent", "sent".into()));
        assert_eq!(assess(&f).phase, "Deploying");
        f.accepted = true;
        f.waiting = None;
        assert_eq!(assess(&f).reason, "AwaitingAgent");
        f.observed = true;
        f.cluster_phase = Some("Deploying");
        assert_eq!(assess(&f).reason, "RollingOut");
        f.cluster_phase = Some("Running");
        let a = assess(&f);
        assert_eq!((a.phase, a.ready), ("Running", true));
        assert_eq!(a.outcome, Some(DeploymentStatus::Succeeded));
    }

    #[test]
    fn the_deadline_fails_a_stuck_rollout_but_not_a_settled_one() {
        let mut f = facts("r1");
        f.expired = true;
        f.waiting = Some(("ClusterUnreachable", "x".into()));
        let a = assess(&f);
        assert_eq!(
            (a.phase, a.reason.as_str()),
            ("Failed", "ProgressDeadlineExceeded")
        );
        assert!(a.message.contains("ClusterUnreachable"), "{}", a.message);
        f.observed = true;
        f.cluster_phase = Some("Running");
        assert_eq!(assess(&f).phase, "Running");
    }

    #[test]
    fn a_rejection_fails_the_revision_with_the_agents_reason() {
        let mut f = facts("r1");
        f.rejected = Some("namespace_violation: outside its project (field /namespace)".into());
        let a = assess(&f);
        assert_eq!((a.phase, a.reason.as_str()), ("Failed", "Rejected"));
        assert!(a.message.contains("field /namespace"));
        assert_eq!(a.outcome, Some(DeploymentStatus::Failed));
    }

    #[test]
    fn a_failure_the_agent_explains_carries_its_reason() {
        let mut f = facts("r1");
        f.observed = true;
        f.cluster_phase = Some("Failed");
        assert!(assess(&f).message.ends_with("see components"));
        f.cluster_message = Some("NamespaceViolation: namespace shop belongs to another project");
        let a = assess(&f);
        assert_eq!((a.phase, a.reason.as_str()), ("Failed", "ComponentsFailed"));
        assert!(
            a.message.contains("belongs to another project"),
            "{}",
            a.message
        );
    }

    #[test]
    fn pausing_and_resuming_are_told_apart_from_updates() {
        let base = json!({"project": "p", "components": [], "paused": false});
        let paused = json!({"project": "p", "components": [], "paused": true});
        let other = json!({"project": "q", "components": [], "paused": true});
        assert_eq!(Operation::between(None, &base), Operation::Create);
        assert_eq!(Operation::between(Some(&base), &paused), Operation::Pause);
        assert_eq!(Operation::between(Some(&paused), &base), Operation::Resume);
        assert_eq!(Operation::between(Some(&base), &other), Operation::Update);
    }
}
