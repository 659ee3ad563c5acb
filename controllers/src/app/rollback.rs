//! Rollback: `kubenest.io/rollback-to: <deployment id>` restores that deployment's spec snapshot
//! as a new revision. The rollback's row is recorded first; the next generation adopts it
//! through `kubenest.io/restored-from`.

use std::time::Duration;

use kube::ResourceExt;
use kube::runtime::controller::Action;
use kubenest_crds::app::{App, AppSpec};
use kubenest_crds::names::annotations;
use kubenest_domain::app::revision_of;
use serde_json::json;
use uuid::Uuid;

use super::holding::patch_json;
use super::record::{new_deployment, write_status};
use crate::conditions;
use crate::intents::ObjectKey;
use crate::placement;
use crate::plane::Plane;
use crate::reconcile::{At, Error};
use kubenest_store::{NewDeployment, Operation, StoreError};

/// Carries out a rollback request: records the rollback deployment, then restores the snapshot
/// as the App's spec (a new generation that adopts that deployment) in one guarded write.
pub(super) async fn rollback(
    app: &App,
    plane: &Plane,
    key: &ObjectKey,
    target: &str,
) -> Result<Action, Error> {
    let old = &app.status.clone().unwrap_or_default();
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
        write_status(plane, key, Some(generation), old, &status).await?;
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
        Ok(_) | Err(StoreError::NotFound) => {
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
    // One request, one row: keyed by the generation it rolls back from, which a status write
    // between the request and this pass leaves as it is (a resourceVersion would not: the
    // guarded write below then fails, and the retry must find the row it recorded).
    let intent_key = format!("{}/rollback/{target_id}/g{generation}", key.uid);
    let revision = revision_of(&snapshot.spec_after);
    let new = NewDeployment {
        spec_after: snapshot.spec_after.clone(),
        rollback_of: Some(target_id),
        ..new_deployment(
            app,
            key,
            &placement,
            intent_key,
            &revision,
            Operation::Rollback,
            spec_before,
        )
    };
    let (row, _) = plane
        .history
        .record_deployment(&new)
        .await
        .at("recording the rollback of App", key)?;
    // Made by kubenest after a failed verification: the row says why.
    let reason = app.annotations().get(annotations::ROLLBACK_REASON);
    if let Some(reason) = reason {
        plane
            .history
            .record_reason(&placement.org_id, row.id, reason)
            .await
            .at("recording why kubenest rolled back App", key)?;
    }
    let mut patch = vec![
        json!({"op": "test", "path": "/metadata/resourceVersion", "value": version}),
        json!({"op": "replace", "path": "/spec", "value": spec}),
        json!({"op": "remove", "path": format!("/metadata/annotations/{}", annotations::ROLLBACK_TO.replace('/', "~1"))}),
        json!({"op": "add", "path": format!("/metadata/annotations/{}", annotations::RESTORED_FROM.replace('/', "~1")), "value": row.id.to_string()}),
    ];
    if reason.is_some() {
        patch.push(json!({"op": "remove", "path": format!("/metadata/annotations/{}", annotations::ROLLBACK_REASON.replace('/', "~1"))}));
    }
    let patch = serde_json::Value::Array(patch);
    patch_json(plane, key, patch)
        .await
        .at("restoring the snapshot into App", key)?;
    let mut status = old.clone();
    if conditions::remove(&mut status.conditions, conditions::ROLLBACK_FAILED) {
        write_status(plane, key, Some(generation), old, &status).await?;
    }
    tracing::info!(to = %target_id, deployment = %row.id, "rollback restored a snapshot");
    Ok(Action::requeue(Duration::from_secs(1)))
}
