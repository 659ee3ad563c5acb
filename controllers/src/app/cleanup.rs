//! Deletion: the App's `Delete` deployment is recorded, `app.delete` is re-sent with backoff
//! until the agent confirms everything the App owned is removed, and only then may the
//! finalizer go. A deletion that has not finished within the App's progress deadline fails it:
//! the App is `Failed` saying what the cluster reports is still there (the agent's `Deleting`
//! report) and how to remove it by force, its delete deployment is `failed` (and `succeeded`
//! after all when the agent confirms later), and the alerts raise it; it goes on being retried.

use std::time::Duration;

use kubenest_contracts as wire;
use kubenest_crds::app::App;
use kubenest_domain::app::Outcome;
use kubenest_domain::deletion;

use super::record::{finish, new_deployment, write_status};
use crate::intents::{ObjectKey, Sent};
use crate::placement;
use crate::plane::Plane;
use crate::reconcile::{Error, attempt_deletion, judge_deletion};
use kubenest_store::Operation;

/// Where a deletion stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Cleanup {
    /// Nothing of the App is left on a cluster: the finalizer may go.
    Done,
    /// The agent has not confirmed yet; look again after this long.
    Waiting(Duration),
}

/// Removes what the App owns on its cluster.
pub(super) async fn cleanup(app: &App, plane: &Plane, key: &ObjectKey) -> Result<Cleanup, Error> {
    let old = app.status.clone().unwrap_or_default();
    let placement = match placement::place(&plane.caches, &key.namespace, &app.spec.project, false)
    {
        Ok(placement) => placement,
        // No project or cluster: nothing of the App can be left on a cluster we can reach.
        Err(_) => {
            plane.intents.forget(&key.uid);
            return Ok(Cleanup::Done);
        }
    };
    let Some(revision) = old.revision.as_deref() else {
        plane.intents.forget(&key.uid);
        return Ok(Cleanup::Done); // never recorded, so never sent
    };
    let spec = serde_json::to_value(&app.spec).map_err(|e| Error::Invalid(e.to_string()))?;
    let intent_key = format!("{}/delete", key.uid);
    let mut new = new_deployment(
        app,
        key,
        &placement,
        intent_key,
        revision,
        Operation::Delete,
        spec,
    );
    // A kubectl or GitOps delete leaves no stamp on the App; the admission webhook recorded
    // who asked (a REST delete stamped the App just before, and has no such entry).
    let asked = app
        .metadata
        .deletion_timestamp
        .as_ref()
        .and_then(|at| chrono::DateTime::from_timestamp(at.0.as_second(), 0));
    if let Some(at) = asked {
        let since = at - chrono::Duration::seconds(30);
        if let Some(deleter) = plane
            .history
            .deleter(&placement.org_id, "apps", &key.name, since)
            .await?
        {
            new.actor = deleter;
        }
    }
    let (row, _) = plane.history.record_deployment(&new).await?;
    if old.cluster_phase.as_deref() == Some("Deleted") {
        finish(
            plane,
            &placement.org_id,
            &row.id.to_string(),
            Outcome::Succeeded,
            "the agent removed everything the App owned",
        )
        .await?;
        plane.intents.forget(&key.uid);
        return Ok(Cleanup::Done);
    }
    let mut status = old.clone();
    status.phase = Some("Deleting".into());
    let command = wire::AppDelete {
        app: super::app_ref(key, &placement),
    };
    let sent = Sent::AppDelete { app: key.clone() };
    let routed = "app.delete was sent; waiting for the agent to confirm".to_owned();
    let mut retry = attempt_deletion(
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
    let reported = old
        .cluster_message
        .as_deref()
        .filter(|_| old.cluster_phase.as_deref() == Some("Deleting"))
        .map(|left| format!("still on cluster {}: {left}", placement.cluster_name));
    let force = format!("kubenest apps delete {} --force", key.name);
    let overdue = judge_deletion(
        &app.metadata,
        app.spec.progress_deadline_seconds,
        &mut status.conditions,
        reported.as_deref(),
        &force,
        &mut retry,
    );
    if let Some(message) = overdue {
        status.phase = Some("Failed".into());
        if deletion::overdue(&old.conditions).is_none() {
            let id = row.id.to_string();
            finish(plane, &placement.org_id, &id, Outcome::Failed, &message).await?;
        }
    }
    write_status(plane, key, app.metadata.generation, &old, &status).await?;
    Ok(Cleanup::Waiting(retry))
}
