//! What is done with a verdict (`status.verification`, written by the status router from the
//! agent's `verification.result`), once per revision:
//!
//! - `Passed` or `Inconclusive`: nothing (an inconclusive revision is held as it is, and says
//!   why: silence is never taken for a success, nor for a failure);
//! - `Failed` with `onFailure: rollback` (the default): a rollback to the last deployment that
//!   passed ([`kubenest_store::History::last_good`]), made by `kubenest` with the verdict as its
//!   reason, through the same `kubenest.io/rollback-to` request a person makes; it is verified
//!   in turn. One automatic action only: when the revision that failed is itself an automatic
//!   rollback, or nothing earlier passed, the automation stops, the App says why and a
//!   `verification_failed` alert opens;
//! - `Failed` with `hold` or `none`: nothing changes; the App says so.
//!
//! A person's change during a window makes a new revision: the verdict on the old one no longer
//! matches `status.revision` and is never acted on.

use std::time::Duration;

use kube::api::{Api, Patch, PatchParams};
use kube::runtime::controller::Action;
use kubenest_crds::app::App;
use kubenest_crds::names::annotations;
use kubenest_crds::verification::OnFailure;
use kubenest_runtime::events::{EventType, event};
use serde_json::json;
use uuid::Uuid;

use crate::intents::ObjectKey;
use crate::placement;
use crate::plane::Plane;
use crate::reconcile::{At, Error};

/// The actor of what kubenest does by itself.
pub const KUBENEST: &str = "kubenest";

/// Acts on the current revision's failed verdict, if it has one not yet acted on; `None` when
/// there is nothing to do and the rollout pass goes on.
pub(super) async fn act(
    app: &App,
    plane: &Plane,
    key: &ObjectKey,
) -> Result<Option<Action>, Error> {
    let Some(status) = &app.status else {
        return Ok(None);
    };
    let Some(verdict) = &status.verification else {
        return Ok(None);
    };
    let current = status.revision.as_deref() == Some(verdict.revision.as_str());
    if !current || verdict.verdict != "Failed" || verdict.action.is_some() {
        return Ok(None);
    }
    let Some(org_id) = placement::org_in(&plane.caches, &key.namespace) else {
        return Ok(None);
    };
    let policy = app.spec.verification.clone().or_else(|| {
        plane
            .caches
            .organization(&org_id)
            .and_then(|o| o.spec.verification.clone())
    });
    let on_failure = policy.map(|p| p.on_failure).unwrap_or(OnFailure::None);
    let action = match on_failure {
        OnFailure::Hold => "held: nothing was changed; roll back or change the App".to_owned(),
        OnFailure::None => "none: the App's verification takes no action".to_owned(),
        OnFailure::Rollback => {
            return rollback(app, plane, key, &org_id, &verdict.reason)
                .await
                .map(Some);
        }
    };
    say(plane, key, &action).await?;
    Ok(Some(Action::requeue(Duration::from_secs(1))))
}

/// Rolls back to the last good deployment, or stops the automation saying why.
async fn rollback(
    app: &App,
    plane: &Plane,
    key: &ObjectKey,
    org_id: &str,
    reason: &str,
) -> Result<Action, Error> {
    let status = app.status.clone().unwrap_or_default();
    let current = status
        .deployment_id
        .as_deref()
        .and_then(|id| Uuid::parse_str(id).ok());
    let Some(current) = current else {
        return Ok(Action::requeue(Duration::from_secs(5)));
    };
    let failed = plane
        .history
        .deployment(org_id, current)
        .await
        .at("reading the deployment of App", key)?
        .deployment;
    if failed.actor == KUBENEST && failed.rollback_of.is_some() {
        let why = format!(
            "automation stopped: the automatic rollback (deployment {current}) failed its \
             verification too; a person decides now"
        );
        say(plane, key, &why).await?;
        return Ok(Action::requeue(Duration::from_secs(1)));
    }
    let Some(target) = plane
        .history
        .last_good(org_id, &key.uid, current)
        .await
        .at("finding the last good deployment of App", key)?
    else {
        let why = "automation stopped: no earlier deployment passed its verification".to_owned();
        say(plane, key, &why).await?;
        return Ok(Action::requeue(Duration::from_secs(1)));
    };
    // The same request a person makes, by kubenest, with the verdict as its reason. Asked
    // before it is said: a failed request is tried again by the next pass (the verdict has no
    // action yet), and once asked, the rollback request is carried out before any verdict is
    // looked at again, so it is never taken twice.
    let reason = format!("verification failed: {reason}");
    let patch = json!({"metadata": {"annotations": {
        annotations::ROLLBACK_TO: target.id.to_string(),
        annotations::ACTOR: KUBENEST,
        annotations::ROLLBACK_REASON: reason.chars().take(1024).collect::<String>(),
    }}});
    Api::<App>::namespaced(plane.client.clone(), &key.namespace)
        .patch(&key.name, &PatchParams::default(), &Patch::Merge(&patch))
        .await?;
    say(
        plane,
        key,
        &format!("rolling back to deployment {}", target.id),
    )
    .await?;
    crate::metrics::metrics().automatic_rollbacks.inc();
    tracing::info!(to = %target.id, "verification failed: rolling back");
    Ok(Action::requeue(Duration::from_secs(1)))
}

/// Writes what was done with the verdict, and tells it as an Event on the App.
async fn say(plane: &Plane, key: &ObjectKey, action: &str) -> Result<(), Error> {
    let patch = json!({"status": {"verification": {"action": action}}});
    Api::<App>::namespaced(plane.client.clone(), &key.namespace)
        .patch_status(&key.name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .at("writing the verification's action of App", key)?;
    let reason = match action.split(':').next().unwrap_or_default() {
        "automation stopped" => "AutomationStopped",
        "held" => "VerificationHeld",
        "none" => "VerificationIgnored",
        _ => "AutomaticRollback",
    };
    let told = event(EventType::Warning, reason, action.to_owned(), "Verify");
    plane
        .events
        .emit_to(&crate::events::reference::<App>(key), [told]);
    Ok(())
}
