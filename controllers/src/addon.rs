//! The AddonInstance controller: standalone addons with their own revision history.
//!
//! Each spec generation (chart version or values) becomes the next revision in PostgreSQL
//! (`install`, `upgrade` or `values`) before `addon.apply` is sent; the command is re-sent with
//! backoff until the agent reports that revision. `kubenest.io/rollback-to: <revision>` records a
//! `rollback` revision with that revision's chart and values and writes them back into the spec,
//! so the object always shows what runs. Deletion holds a finalizer until the agent confirms.

use kubenest_crds::names::{annotations, finalizers};
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use kube::ResourceExt;
use kube::api::{Api, Patch, PatchParams};
use kube::runtime::controller::{Action, Controller};
use kube::runtime::finalizer::{Event, finalizer};
use kube::runtime::watcher;
use kubenest_contracts as wire;
use kubenest_crds::addon::{AddonInstance, AddonInstanceStatus};
use kubenest_crds::project::Project;
use serde_json::{Value, json};

use crate::app::controller::{actor_of_fields, definition, resolved_addon};
use crate::app::merge;
use crate::conditions::{self, PROGRESSING, READY};
use crate::history::{AddonOperation, AddonRevision, HistoryError, NewAddonRevision};
use crate::intents::{ObjectKey, Sent};
use crate::placement::{self, Placement};
use crate::plane::Plane;
pub use crate::reconcile::Error;
use crate::reconcile::{await_deletion, error_policy, key_of};

fn addon_ref(key: &ObjectKey, placement: &Placement) -> wire::AddonRef {
    wire::AddonRef {
        addon_id: wire::Id::new(&key.uid),
        name: wire::Name::new(&key.name),
        project_id: wire::Id::new(&placement.project_id),
        namespace: wire::Name::new(&placement.namespace),
    }
}

/// Which operation turns the latest revision's chart into `chart` (pure).
pub fn operation_of(latest: Option<&AddonRevision>, chart: &Value) -> AddonOperation {
    match latest {
        None => AddonOperation::Install,
        Some(latest) if latest.chart.get("version") != chart.get("version") => {
            AddonOperation::Upgrade
        }
        Some(_) => AddonOperation::Values,
    }
}

async fn write_status(
    plane: &Plane,
    key: &ObjectKey,
    old: &AddonInstanceStatus,
    new: &AddonInstanceStatus,
) -> Result<(), Error> {
    if old == new {
        return Ok(());
    }
    let patch = json!({ "status": {
        "phase": new.phase,
        "revision": new.revision,
        "recordedGeneration": new.recorded_generation,
        "handledRollback": new.handled_rollback,
        "conditions": new.conditions,
    }});
    Api::<AddonInstance>::namespaced(plane.client.clone(), &key.namespace)
        .patch_status(&key.name, &PatchParams::default(), &Patch::Merge(&patch))
        .await?;
    Ok(())
}

async fn reconcile(addon: Arc<AddonInstance>, plane: Arc<Plane>) -> Result<Action, Error> {
    let key = key_of(&*addon)?;
    let api: Api<AddonInstance> = Api::namespaced(plane.client.clone(), &key.namespace);
    finalizer(&api, finalizers::ADDON, addon, |event| async {
        match event {
            Event::Apply(addon) => apply(&addon, &plane, &key).await,
            Event::Cleanup(addon) => cleanup(&addon, &plane, &key).await,
        }
    })
    .await
    .map_err(|e| Error::Finalizer(Box::new(e)))
}

async fn apply(addon: &AddonInstance, plane: &Plane, key: &ObjectKey) -> Result<Action, Error> {
    let generation = addon.metadata.generation.unwrap_or(0);
    let old = addon.status.clone().unwrap_or_default();
    let mut status = old.clone();
    let placement = match placement::place(&plane.caches, &key.namespace, &addon.spec.project, true)
    {
        Ok(placement) => placement,
        Err(unplaced) => {
            status.phase = Some("Pending".into());
            conditions::set(
                &mut status.conditions,
                READY,
                false,
                unplaced.reason(),
                unplaced.message(),
                Some(generation),
            );
            write_status(plane, key, &old, &status).await?;
            return Ok(Action::requeue(Duration::from_secs(10)));
        }
    };
    let actor = actor_of_fields(addon.managed_fields(), addon.annotations());

    if let Some(target) = addon.annotations().get(annotations::ROLLBACK_TO)
        && old.handled_rollback.as_deref() != Some(target.as_str())
    {
        return rollback(addon, plane, key, &placement, target, &actor, &old).await;
    }

    let Some(found) = definition(plane, &key.namespace, &addon.spec.definition) else {
        status.phase = Some("Failed".into());
        conditions::set(
            &mut status.conditions,
            READY,
            false,
            "InvalidSpec",
            format!(
                "spec.definition: no addon definition named {:?}",
                addon.spec.definition
            ),
            Some(generation),
        );
        write_status(plane, key, &old, &status).await?;
        return Ok(Action::requeue(Duration::from_secs(60)));
    };
    let resolved = resolved_addon(&found);
    let mut chart = resolved.chart.clone();
    if let Some(version) = &addon.spec.version {
        chart.version = version.clone();
    }
    let mut values = resolved.default_values.clone();
    merge(&mut values, &addon.spec.values);
    let chart_json = serde_json::to_value(&chart).map_err(|e| Error::Invalid(e.to_string()))?;
    let values_json = Value::Object(values.clone());

    // The revision row first; a repeated reconcile reuses the latest row if it is this spec.
    if status.recorded_generation != Some(generation) || status.revision.is_none() {
        let latest = plane
            .history
            .addon_revisions(&placement.org_id, &key.uid)
            .await?
            .into_iter()
            .next();
        let reusable = latest
            .as_ref()
            .filter(|l| l.chart == chart_json && l.values == values_json && l.status == "pending");
        let revision = match reusable {
            Some(latest) => latest.revision,
            None => {
                let new = NewAddonRevision {
                    addon_id: key.uid.clone(),
                    org_id: placement.org_id.clone(),
                    project_id: placement.project_id.clone(),
                    definition: addon.spec.definition.clone(),
                    chart: chart_json.clone(),
                    values: values_json.clone(),
                    operation: operation_of(latest.as_ref(), &chart_json),
                    actor: actor.clone(),
                };
                plane.history.record_addon_revision(&new).await?.revision
            }
        };
        status.revision = u32::try_from(revision).ok();
        status.recorded_generation = Some(generation);
        plane.intents.settled(&key.uid);
    }
    let revision = status.revision.unwrap_or(1);
    let observed = old.observed_revision == Some(revision);
    let mut retry = None;
    let mut waiting = None;
    if !observed {
        let command = wire::AddonApply {
            addon: addon_ref(key, &placement),
            revision,
            definition: wire::Name::new(&addon.spec.definition),
            chart,
            values,
            exports: resolved.exports.clone(),
        };
        let sent = Sent::AddonApply {
            addon: key.clone(),
            revision,
        };
        let routed = format!("revision {revision} was sent; waiting for the agent to install it");
        let previous = conditions::get(&old.conditions, PROGRESSING);
        let attempt = plane
            .attempt(&key.uid, &placement, command, sent, routed, previous)
            .await;
        retry = Some(attempt.retry);
        waiting = attempt.waiting;
    } else {
        plane.intents.settled(&key.uid);
    }

    let cluster_phase = if observed {
        old.cluster_phase.as_deref()
    } else {
        None
    };
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
        Some(other) => (
            "Installing",
            false,
            "Installing".to_owned(),
            format!("revision {revision} is {other} on the cluster"),
            None,
        ),
        None => {
            let (reason, message) = waiting
                .clone()
                .unwrap_or(("AwaitingAgent".into(), "waiting for the agent".into()));
            let phase = if reason == "AwaitingAgent" {
                "Installing"
            } else {
                "Pending"
            };
            (phase, false, reason, message, None)
        }
    };
    // Once per revision, not only on a change of phase: a rollback from Ready to Ready may
    // never show a reconcile the phase change (as for Apps, see the App controller).
    let revision_key = format!("revision {revision}");
    if let Some(succeeded) = outcome
        && (old.phase.as_deref() != Some(phase)
            || !plane.intents.outcome_recorded(&key.uid, &revision_key))
    {
        match plane
            .history
            .finish_addon_revision(
                &placement.org_id,
                &key.uid,
                i32::try_from(revision).unwrap_or(i32::MAX),
                succeeded,
                &message,
            )
            .await
        {
            Ok(()) | Err(HistoryError::InvalidTransition(_) | HistoryError::NotFound) => {
                plane.intents.record_outcome(&key.uid, &revision_key);
            }
            Err(other) => return Err(other.into()),
        }
    }
    status.phase = Some(phase.into());
    conditions::set(
        &mut status.conditions,
        READY,
        ready,
        &reason,
        message.clone(),
        Some(generation),
    );
    if outcome.is_some() {
        conditions::remove(&mut status.conditions, PROGRESSING);
    } else {
        conditions::set(
            &mut status.conditions,
            PROGRESSING,
            true,
            &reason,
            message,
            Some(generation),
        );
    }
    write_status(plane, key, &old, &status).await?;
    Ok(Action::requeue(
        retry
            .unwrap_or(Duration::from_secs(300))
            .max(Duration::from_secs(1)),
    ))
}

async fn rollback(
    addon: &AddonInstance,
    plane: &Plane,
    key: &ObjectKey,
    placement: &Placement,
    target: &str,
    actor: &str,
    old: &AddonInstanceStatus,
) -> Result<Action, Error> {
    let generation = addon.metadata.generation;
    let mut status = old.clone();
    let refuse =
        async |status: &mut AddonInstanceStatus, message: String| -> Result<Action, Error> {
            conditions::set(
                &mut status.conditions,
                "RollbackFailed",
                true,
                "RevisionNotFound",
                message,
                generation,
            );
            write_status(plane, key, old, status).await?;
            Ok(Action::await_change())
        };
    // `N` or `N@nonce`: the nonce lets the same revision be asked for again later.
    let number = target.split_once('@').map_or(target, |(n, _)| n);
    let Ok(to) = number.parse::<i32>() else {
        return refuse(
            &mut status,
            format!(
                "annotation {}: {target:?} is not a revision number",
                annotations::ROLLBACK_TO
            ),
        )
        .await;
    };
    let latest = plane
        .history
        .addon_revisions(&placement.org_id, &key.uid)
        .await?;
    // A rollback recorded by an earlier attempt that did not get to write the status is reused.
    let recorded = latest
        .first()
        .filter(|l| l.operation == AddonOperation::Rollback && l.rollback_to == Some(to))
        .cloned();
    let revision = match recorded {
        Some(revision) => revision,
        None => match plane
            .history
            .record_addon_rollback(&placement.org_id, &key.uid, to, actor)
            .await
        {
            Ok(revision) => revision,
            Err(HistoryError::NotFound) => {
                return refuse(&mut status, format!("this addon has no revision {to}")).await;
            }
            Err(other) => return Err(other.into()),
        },
    };
    let patch = json!({ "spec": {
        "version": revision.chart.get("version"),
        "values": revision.values,
    }});
    let api: Api<AddonInstance> = Api::namespaced(plane.client.clone(), &key.namespace);
    let updated = api
        .patch(&key.name, &PatchParams::default(), &Patch::Merge(&patch))
        .await?;
    status.revision = u32::try_from(revision.revision).ok();
    status.recorded_generation = updated.metadata.generation;
    status.handled_rollback = Some(target.to_owned());
    conditions::remove(&mut status.conditions, "RollbackFailed");
    plane.intents.settled(&key.uid);
    write_status(plane, key, old, &status).await?;
    Ok(Action::requeue(Duration::from_secs(1)))
}

async fn cleanup(addon: &AddonInstance, plane: &Plane, key: &ObjectKey) -> Result<Action, Error> {
    let old = addon.status.clone().unwrap_or_default();
    let placement =
        match placement::place(&plane.caches, &key.namespace, &addon.spec.project, false) {
            Ok(placement) => placement,
            Err(_) => {
                plane.intents.forget(&key.uid);
                return Ok(Action::await_change());
            }
        };
    if old.revision.is_none() || old.cluster_phase.as_deref() == Some("Deleted") {
        plane.intents.forget(&key.uid);
        return Ok(Action::await_change());
    }
    let mut status = old.clone();
    status.phase = Some("Deleting".into());
    let command = wire::AddonDelete {
        addon: addon_ref(key, &placement),
    };
    let sent = Sent::AddonDelete { addon: key.clone() };
    let routed = "addon.delete was sent; waiting for the agent to confirm".to_owned();
    let waiting = await_deletion(
        plane,
        &key.uid,
        &placement,
        command,
        sent,
        routed,
        &mut status.conditions,
        addon.metadata.generation,
    )
    .await;
    write_status(plane, key, &old, &status).await?;
    Err(waiting)
}

/// Runs the AddonInstance controller until `shutdown` resolves.
pub async fn run(plane: Arc<Plane>, shutdown: impl Future<Output = ()> + Send + Sync + 'static) {
    let addons: Api<AddonInstance> = Api::all(plane.client.clone());
    let caches = plane.caches.clone();
    Controller::new(addons, watcher::Config::default())
        // A project turning Ready (or going away) moves its addons on.
        .watches(
            Api::<Project>::all(plane.client.clone()),
            watcher::Config::default(),
            move |project| {
                let namespace = project.namespace().unwrap_or_default();
                caches.addons_of(&namespace, &project.name_any())
            },
        )
        .graceful_shutdown_on(shutdown)
        .run(reconcile, error_policy::<AddonInstance>, plane)
        .for_each(|result| async move {
            if let Err(error) = result {
                tracing::debug!(%error, "addon reconcile");
            }
        })
        .await;
}

#[cfg(test)]
mod tests {
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
}
