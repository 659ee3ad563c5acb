//! The reconcile of a live AddonInstance: place it, record the spec's revision, send it until
//! the agent reports it, and show (and record) how it went.

use kube::ResourceExt;
use kube::runtime::controller::Action;
use kubenest_contracts as wire;
use kubenest_crds::addon::{AddonInstance, AddonInstanceStatus};
use kubenest_crds::names::annotations;

use super::decide::{self, Desired};
use super::{Error, addon_ref, rollback, write_status};
use crate::conditions::{self, PROGRESSING};
use crate::deadline;
use crate::intents::{ObjectKey, Sent};
use crate::placement::{self, Placement};
use crate::plane::Plane;
use kubenest_domain::actor::actor_of_fields;
use kubenest_domain::app::resolved_addon;
use kubenest_store::{NewAddonRevision, StoreError};

/// How long an addon that cannot be placed waits before it is looked at again.
const UNPLACED_RECHECK: std::time::Duration = std::time::Duration::from_secs(10);
/// How long an addon whose definition is missing waits before it is looked at again. A
/// definition added to the catalog also wakes its addons (the controller watches them); this
/// covers the definition cache catching up after that wake-up.
const NO_DEFINITION_RECHECK: std::time::Duration = std::time::Duration::from_secs(10);

pub(super) async fn apply(
    addon: &AddonInstance,
    plane: &Plane,
    key: &ObjectKey,
) -> Result<Action, Error> {
    let generation = addon.metadata.generation.unwrap_or(0);
    let old = addon.status.clone().unwrap_or_default();
    let placement = match placement::place(&plane.caches, &key.namespace, &addon.spec.project, true)
    {
        Ok(placement) => placement,
        Err(unplaced) => {
            let status = decide::unplaced(&old, &unplaced, generation);
            write_status(plane, key, &old, &status).await?;
            return Ok(Action::requeue(UNPLACED_RECHECK));
        }
    };
    let actor = actor_of_fields(addon.managed_fields(), addon.annotations());

    if let Some(target) = addon.annotations().get(annotations::ROLLBACK_TO)
        && old.handled_rollback.as_deref() != Some(target.as_str())
    {
        return rollback::rollback(addon, plane, key, &placement, target, &actor, &old).await;
    }

    let Some(found) = plane.addon_definition(&key.namespace, &addon.spec.definition) else {
        let status = decide::no_definition(&old, &addon.spec.definition, generation);
        write_status(plane, key, &old, &status).await?;
        return Ok(Action::requeue(NO_DEFINITION_RECHECK));
    };
    let desired = decide::desired(addon, &resolved_addon(&found))
        .map_err(|e| Error::Invalid(e.to_string()))?;

    let mut status = old.clone();
    if decide::needs_revision(&status, generation) {
        let revision = record_revision(addon, plane, key, &placement, &desired, &actor).await?;
        status.revision = u32::try_from(revision).ok();
        status.recorded_generation = Some(generation);
        plane.intents.settled(&key.uid);
    }
    let revision = status.revision.unwrap_or(1);
    let observed = old.observed_revision == Some(revision);
    let (retry, waiting) = if observed {
        plane.intents.settled(&key.uid);
        (None, None)
    } else {
        let attempt = send(addon, plane, key, &placement, revision, desired, &old).await;
        (Some(attempt.retry), attempt.waiting)
    };

    let seconds = addon.spec.progress_deadline_seconds;
    let deadline = deadline::judge(
        status.progress.as_ref(),
        i64::from(revision),
        observed,
        seconds,
        chrono::Utc::now(),
    );
    status.progress = Some(deadline.clock.clone());
    let progress = decide::progress(revision, &old, observed, waiting, &deadline, seconds);
    let revision_key = format!("revision {revision}");
    let recorded = plane.intents.outcome_recorded(&key.uid, &revision_key);
    if let Some(succeeded) = decide::outcome_due(&old, &progress, recorded) {
        match plane
            .history
            .finish_addon_revision(
                &placement.org_id,
                &key.uid,
                i32::try_from(revision).unwrap_or(i32::MAX),
                succeeded,
                &progress.message,
            )
            .await
        {
            Ok(()) | Err(StoreError::InvalidTransition(_) | StoreError::NotFound) => {
                plane.intents.record_outcome(&key.uid, &revision_key);
            }
            Err(other) => return Err(other.into()),
        }
    }
    let status = decide::show(status, &progress, generation);
    write_status(plane, key, &old, &status).await?;
    Ok(Action::requeue(decide::requeue(
        retry, &progress, &deadline,
    )))
}

/// The revision recording this spec: the latest row if it is this spec, still pending (a
/// repeated reconcile), else a new one.
async fn record_revision(
    addon: &AddonInstance,
    plane: &Plane,
    key: &ObjectKey,
    placement: &Placement,
    desired: &Desired,
    actor: &str,
) -> Result<i32, Error> {
    let latest = plane
        .history
        .addon_revisions(&placement.org_id, &key.uid)
        .await?
        .into_iter()
        .next();
    if let Some(latest) = decide::reusable(latest.as_ref(), desired) {
        return Ok(latest.revision);
    }
    let new = NewAddonRevision {
        addon_id: key.uid.clone(),
        org_id: placement.org_id.clone(),
        project_id: placement.project_id.clone(),
        definition: addon.spec.definition.clone(),
        chart: desired.chart_json.clone(),
        values: desired.values_json(),
        operation: decide::operation_of(latest.as_ref(), &desired.chart_json),
        actor: actor.to_owned(),
    };
    Ok(plane.history.record_addon_revision(&new).await?.revision)
}

/// Sends `addon.apply` for `revision` when its backoff has run out.
async fn send(
    addon: &AddonInstance,
    plane: &Plane,
    key: &ObjectKey,
    placement: &Placement,
    revision: u32,
    desired: Desired,
    old: &AddonInstanceStatus,
) -> crate::plane::Attempt {
    let command = wire::AddonApply {
        addon: addon_ref(key, placement),
        revision,
        definition: wire::Name::new(&addon.spec.definition),
        chart: desired.chart,
        values: desired.values,
        exports: desired.exports,
    };
    let sent = Sent::AddonApply {
        addon: key.clone(),
        revision,
    };
    let routed = format!("revision {revision} was sent; waiting for the agent to install it");
    let previous = conditions::get(&old.conditions, PROGRESSING);
    plane
        .attempt(&key.uid, placement, command, sent, routed, previous)
        .await
}
