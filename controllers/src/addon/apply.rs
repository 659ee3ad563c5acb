//! The reconcile of a live AddonInstance: place it, record the spec's revision, send it until
//! the agent reports it, and show (and record) how it went.

use std::time::Duration;

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
const UNPLACED_RECHECK: Duration = Duration::from_secs(10);
/// How long an addon whose definition is missing waits before it is looked at again. A
/// definition added to the catalog also wakes its addons (the controller watches them); this
/// covers the definition cache catching up after that wake-up.
const NO_DEFINITION_RECHECK: Duration = Duration::from_secs(10);

/// The addon pass: gather → act → conclude, the App rollout's shape
/// ([`crate::app`]) without its planning step, since an addon's only steps are recording a
/// revision and sending it until the agent reports it.
pub(super) async fn apply(
    addon: &AddonInstance,
    plane: &Plane,
    key: &ObjectKey,
) -> Result<Action, Error> {
    let old = addon.status.clone().unwrap_or_default();
    let facts = match gather(addon, plane, key, &old)? {
        Gathered::Wait { status, requeue } => {
            write_status(plane, key, addon.metadata.generation, &old, &status).await?;
            return Ok(Action::requeue(requeue));
        }
        Gathered::Rollback { placement, target } => {
            let actor = actor_of_fields(addon.managed_fields(), addon.annotations());
            return rollback::rollback(addon, plane, key, &placement, &target, &actor, &old).await;
        }
        Gathered::Ready(facts) => facts,
    };
    let acted = act(addon, plane, key, &old, facts).await?;
    conclude(addon, plane, key, &old, acted).await
}

/// What the pass found: a status to wait in, a rollback to carry out, or a spec to roll out.
enum Gathered {
    Wait {
        status: Box<AddonInstanceStatus>,
        requeue: Duration,
    },
    Rollback {
        placement: Box<Placement>,
        target: String,
    },
    Ready(Box<Facts>),
}

/// A placed addon with its definition, and what it wants on the cluster.
struct Facts {
    placement: Placement,
    desired: Desired,
}

/// Places the addon and builds what it wants from its definition (reads only).
fn gather(
    addon: &AddonInstance,
    plane: &Plane,
    key: &ObjectKey,
    old: &AddonInstanceStatus,
) -> Result<Gathered, Error> {
    let generation = addon.metadata.generation.unwrap_or(0);
    let placement = match placement::place(&plane.caches, &key.namespace, &addon.spec.project, true)
    {
        Ok(placement) => placement,
        Err(unplaced) => {
            return Ok(Gathered::Wait {
                status: Box::new(decide::unplaced(old, &unplaced, generation)),
                requeue: UNPLACED_RECHECK,
            });
        }
    };
    if let Some(target) = addon.annotations().get(annotations::ROLLBACK_TO)
        && old.handled_rollback.as_deref() != Some(target.as_str())
    {
        return Ok(Gathered::Rollback {
            placement: Box::new(placement),
            target: target.clone(),
        });
    }
    let Some(found) = plane.addon_definition(&key.namespace, &addon.spec.definition) else {
        return Ok(Gathered::Wait {
            status: Box::new(decide::no_definition(
                old,
                &addon.spec.definition,
                generation,
            )),
            requeue: NO_DEFINITION_RECHECK,
        });
    };
    let desired = decide::desired(addon, &resolved_addon(&found))
        .map_err(|e| Error::Invalid(e.to_string()))?;
    Ok(Gathered::Ready(Box::new(Facts { placement, desired })))
}

/// What recording and sending came to.
struct Acted {
    status: AddonInstanceStatus,
    placement: Placement,
    revision: u32,
    observed: bool,
    retry: Option<Duration>,
    waiting: Option<(String, String)>,
}

/// Records the spec's revision when the generation has none (before anything is sent), then
/// sends it until the agent reports it observed.
async fn act(
    addon: &AddonInstance,
    plane: &Plane,
    key: &ObjectKey,
    old: &AddonInstanceStatus,
    facts: Box<Facts>,
) -> Result<Acted, Error> {
    let Facts { placement, desired } = *facts;
    let generation = addon.metadata.generation.unwrap_or(0);
    let mut status = old.clone();
    if decide::needs_revision(&status, generation) {
        let actor = actor_of_fields(addon.managed_fields(), addon.annotations());
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
        let attempt = send(addon, plane, key, &placement, revision, desired, old).await;
        (Some(attempt.retry), attempt.waiting)
    };
    Ok(Acted {
        status,
        placement,
        revision,
        observed,
        retry,
        waiting,
    })
}

/// Judges the deadline, records the revision's outcome once it is final, and writes the status.
async fn conclude(
    addon: &AddonInstance,
    plane: &Plane,
    key: &ObjectKey,
    old: &AddonInstanceStatus,
    acted: Acted,
) -> Result<Action, Error> {
    let Acted {
        mut status,
        placement,
        revision,
        observed,
        retry,
        waiting,
    } = acted;
    let seconds = addon.spec.progress_deadline_seconds;
    let deadline = deadline::judge(
        status.progress.as_ref(),
        i64::from(revision),
        observed,
        seconds,
        chrono::Utc::now(),
    );
    status.progress = Some(deadline.clock.clone());
    let progress = decide::progress(revision, old, observed, waiting, &deadline, seconds);
    let revision_key = format!("revision {revision}");
    let recorded = plane.intents.outcome_recorded(&key.uid, &revision_key);
    if let Some(succeeded) = decide::outcome_due(old, &progress, recorded) {
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
    let generation = addon.metadata.generation.unwrap_or(0);
    let status = decide::show(status, &progress, generation);
    write_status(plane, key, addon.metadata.generation, old, &status).await?;
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
