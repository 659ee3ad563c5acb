//! What the App controller writes: its own fields of the App's status, and the deployment rows
//! of history (a generation's row before anything is sent, each deployment's outcome).

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::api::{Api, Patch, PatchParams};
use kubenest_crds::app::{App, AppStatus, Rejection};
use kubenest_domain::actor::actor_of;
use kubenest_domain::app::Outcome;
use serde::Serialize;
use uuid::Uuid;

use super::BURST_WAIT;
use crate::intents::ObjectKey;
use crate::placement::Placement;
use crate::plane::Plane;
use crate::reconcile::{At, Error};
use kubenest_store::{Deployment, DeploymentStatus, NewDeployment, Operation, StoreError};

/// The status fields the App controller owns, each written even when empty (`null` clears it in
/// a merge patch); the status router writes the rest, what the agent reports.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
struct ControllerFields<'a> {
    observed_generation: Option<i64>,
    phase: Option<&'a str>,
    revision: Option<&'a str>,
    deployment_id: Option<&'a str>,
    recorded_generation: Option<i64>,
    rollout_started_at: Option<&'a str>,
    rejection: Option<&'a Rejection>,
    last_observation: Option<&'a str>,
    conditions: &'a [Condition],
}

/// A merge patch of the status subresource.
#[derive(Debug, Serialize)]
struct StatusPatch<'a> {
    status: ControllerFields<'a>,
}

impl<'a> From<&'a AppStatus> for StatusPatch<'a> {
    fn from(status: &'a AppStatus) -> Self {
        StatusPatch {
            status: ControllerFields {
                observed_generation: status.observed_generation,
                phase: status.phase.as_deref(),
                revision: status.revision.as_deref(),
                deployment_id: status.deployment_id.as_deref(),
                recorded_generation: status.recorded_generation,
                rollout_started_at: status.rollout_started_at.as_deref(),
                rejection: status.rejection.as_ref(),
                last_observation: status.last_observation.as_deref(),
                conditions: &status.conditions,
            },
        }
    }
}

/// `new` as the controller writes it after a pass over `generation`: stamped with it, so
/// readers of `observedGeneration` (kstatus, Flux, Argo CD) know the status speaks of that spec.
pub(super) fn observed(new: &AppStatus, generation: Option<i64>) -> AppStatus {
    AppStatus {
        observed_generation: generation,
        ..new.clone()
    }
}

/// Writes the controller's fields of `new` for `generation` when anything differs from `old`.
pub(super) async fn write_status(
    plane: &Plane,
    key: &ObjectKey,
    generation: Option<i64>,
    old: &AppStatus,
    new: &AppStatus,
) -> Result<(), Error> {
    let new = &observed(new, generation);
    if old == new {
        return Ok(());
    }
    let written = Api::<App>::namespaced(plane.client.clone(), &key.namespace)
        .patch_status(
            &key.name,
            &PatchParams::default(),
            &Patch::Merge(&StatusPatch::from(new)),
        )
        .await
        .at("patching the status of App", key)?;
    plane.apps_written.wrote(written);
    plane.events.emit_to(
        &crate::events::reference::<App>(key),
        crate::events::app_events(old, new),
    );
    Ok(())
}

/// Records a deployment's outcome; a deployment already superseded or finished keeps its first.
pub(super) async fn finish(
    plane: &Plane,
    org: &str,
    id: &str,
    outcome: Outcome,
    message: &str,
) -> Result<(), Error> {
    let Ok(id) = Uuid::parse_str(id) else {
        return Ok(());
    };
    let outcome = match outcome {
        Outcome::Succeeded => DeploymentStatus::Succeeded,
        Outcome::Failed => DeploymentStatus::Failed,
    };
    match plane
        .history
        .finish_deployment(org, id, outcome, message)
        .await
    {
        Ok(_) | Err(StoreError::InvalidTransition(_) | StoreError::NotFound) => Ok(()),
        Err(other) => Err(other.into()),
    }
}

/// Records the deployment of the App's current generation (idempotent per generation).
pub(super) async fn record(
    app: &App,
    plane: &Plane,
    key: &ObjectKey,
    placement: &Placement,
    revision: &str,
    generation: i64,
) -> Result<Deployment, Error> {
    let spec_after = serde_json::to_value(&app.spec).map_err(|e| Error::Invalid(e.to_string()))?;
    // The spec before and the operation follow from the App's latest deployment, looked up in
    // the same transaction that writes this one.
    let intent_key = format!("{}/g{generation}", key.uid);
    let new = NewDeployment {
        spec_before: None,
        ..new_deployment(
            app,
            key,
            placement,
            intent_key,
            revision,
            Operation::Create,
            spec_after,
        )
    };
    let (row, inserted) = plane
        .history
        .record_change(new)
        .await
        .at("recording the deployment of App", key)?;
    if inserted {
        tracing::info!(%revision, operation = row.operation.as_str(), "deployment recorded");
    }
    // When many Apps are taken on at once, their rows go first and their dispatches after:
    // this App's writes to the API server would otherwise slow the recording of the rest.
    plane.history.recorded_burst(BURST_WAIT).await;
    Ok(row)
}

/// A deployment row of this App at `revision` whose spec stays `spec` (a redeploy, a deletion).
pub(super) fn new_deployment(
    app: &App,
    key: &ObjectKey,
    placement: &Placement,
    intent_key: String,
    revision: &str,
    operation: Operation,
    spec: serde_json::Value,
) -> NewDeployment {
    NewDeployment {
        intent_key,
        org_id: placement.org_id.clone(),
        project_id: placement.project_id.clone(),
        cluster_id: placement.cluster_id.clone(),
        app_id: key.uid.clone(),
        app_name: key.name.clone(),
        revision: revision.to_owned(),
        operation,
        actor: actor_of(app),
        spec_before: Some(spec.clone()),
        spec_after: spec,
        rollback_of: None,
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

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

    #[test]
    fn a_pass_over_a_new_generation_stamps_it_so_the_status_is_written() {
        let old = AppStatus {
            observed_generation: Some(1),
            phase: Some("Running".into()),
            ..AppStatus::default()
        };
        let new = observed(&old, Some(2));
        assert_ne!(new, old, "only the generation moved, and that is written");
        assert_eq!(
            observed(&new, Some(2)),
            new,
            "the same pass again writes nothing"
        );
        let patch = serde_json::to_value(StatusPatch::from(&new)).unwrap();
        assert_eq!(patch["status"]["observedGeneration"], 2);
    }

    #[test]
    fn the_status_patch_writes_only_the_controllers_fields_and_clears_empty_ones() {
        let status = AppStatus {
            phase: Some("Running".into()),
            observed_revision: Some("r1".into()),
            cluster_phase: Some("Running".into()),
            ..AppStatus::default()
        };
        let patch = serde_json::to_value(StatusPatch::from(&status)).unwrap();
        assert_eq!(
            patch,
            json!({"status": {
                "observedGeneration": null,
                "phase": "Running",
                "revision": null,
                "deploymentId": null,
                "recordedGeneration": null,
                "rolloutStartedAt": null,
                "rejection": null,
                "lastObservation": null,
                "conditions": [],
            }})
        );
    }
}
