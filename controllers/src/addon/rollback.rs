//! A rollback request (`kubenest.io/rollback-to: N` or `N@nonce`): record a `rollback`
//! revision with revision N's chart and values and write them back into the spec, so the
//! object always shows what runs.

use std::time::Duration;

use kube::api::{Api, Patch, PatchParams};
use kube::runtime::controller::Action;
use kubenest_crds::addon::{AddonInstance, AddonInstanceStatus};
use kubenest_crds::names::annotations;
use serde::Serialize;
use serde_json::Value;

use super::{Error, write_status};
use crate::conditions;
use crate::intents::ObjectKey;
use crate::placement::Placement;
use crate::plane::Plane;
use kubenest_store::{AddonOperation, AddonRevision, StoreError};

/// The condition a refused rollback sets.
const ROLLBACK_FAILED: &str = "RollbackFailed";

/// The spec fields a rollback writes back.
#[derive(Debug, Serialize)]
struct SpecPatch<'a> {
    spec: RolledBack<'a>,
}

/// The chart version and values of the revision rolled back to.
#[derive(Debug, Serialize)]
struct RolledBack<'a> {
    version: Option<&'a Value>,
    values: &'a Value,
}

/// The revision a rollback request names (pure): `N`, or `N@nonce` so that the same revision
/// can be asked for again later. The error is the refusal's message.
pub fn target_revision(target: &str) -> Result<i32, String> {
    let number = target.split_once('@').map_or(target, |(n, _)| n);
    number.parse::<i32>().map_err(|_| {
        format!(
            "annotation {}: {target:?} is not a revision number",
            annotations::ROLLBACK_TO
        )
    })
}

/// A rollback recorded by an earlier attempt that did not get to write the status (pure):
/// the latest revision, if it is a rollback to `to`.
fn recorded(latest: &[AddonRevision], to: i32) -> Option<AddonRevision> {
    latest
        .first()
        .filter(|l| l.operation == AddonOperation::Rollback && l.rollback_to == Some(to))
        .cloned()
}

/// `old` with a refused rollback recorded (pure).
fn refused(
    old: &AddonInstanceStatus,
    message: String,
    generation: Option<i64>,
) -> AddonInstanceStatus {
    let mut status = old.clone();
    conditions::set(
        &mut status.conditions,
        ROLLBACK_FAILED,
        true,
        "RevisionNotFound",
        message,
        generation,
    );
    status
}

async fn refuse(
    plane: &Plane,
    key: &ObjectKey,
    old: &AddonInstanceStatus,
    message: String,
    generation: Option<i64>,
) -> Result<Action, Error> {
    write_status(
        plane,
        key,
        generation,
        old,
        &refused(old, message, generation),
    )
    .await?;
    Ok(Action::await_change())
}

pub(super) async fn rollback(
    addon: &AddonInstance,
    plane: &Plane,
    key: &ObjectKey,
    placement: &Placement,
    target: &str,
    actor: &str,
    old: &AddonInstanceStatus,
) -> Result<Action, Error> {
    let generation = addon.metadata.generation;
    let to = match target_revision(target) {
        Ok(to) => to,
        Err(message) => return refuse(plane, key, old, message, generation).await,
    };
    let latest = plane
        .history
        .addon_revisions(&placement.org_id, &key.uid)
        .await?;
    let revision = match recorded(&latest, to) {
        Some(revision) => revision,
        None => match plane
            .history
            .record_addon_rollback(&placement.org_id, &key.uid, to, actor)
            .await
        {
            Ok(revision) => revision,
            Err(StoreError::NotFound) => {
                let message = format!("this addon has no revision {to}");
                return refuse(plane, key, old, message, generation).await;
            }
            Err(other) => return Err(other.into()),
        },
    };
    let patch = SpecPatch {
        spec: RolledBack {
            version: revision.chart.get("version"),
            values: &revision.values,
        },
    };
    let api: Api<AddonInstance> = Api::namespaced(plane.client.clone(), &key.namespace);
    let updated = api
        .patch(&key.name, &PatchParams::default(), &Patch::Merge(&patch))
        .await?;
    let mut status = old.clone();
    status.revision = u32::try_from(revision.revision).ok();
    status.recorded_generation = updated.metadata.generation;
    status.handled_rollback = Some(target.to_owned());
    conditions::remove(&mut status.conditions, ROLLBACK_FAILED);
    plane.intents.settled(&key.uid);
    write_status(plane, key, generation, old, &status).await?;
    Ok(Action::requeue(Duration::from_secs(1)))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn a_rollback_names_a_revision_with_an_optional_nonce() {
        assert_eq!(target_revision("3"), Ok(3));
        assert_eq!(target_revision("3@again"), Ok(3));
        assert_eq!(
            target_revision("three"),
            Err("annotation kubenest.io/rollback-to: \"three\" is not a revision number".into())
        );
        let status = refused(&AddonInstanceStatus::default(), "no".into(), Some(2));
        let condition = conditions::get(&status.conditions, ROLLBACK_FAILED).unwrap();
        assert_eq!(
            (condition.reason.as_str(), condition.status.as_str()),
            ("RevisionNotFound", "True")
        );
    }

    #[test]
    fn the_spec_patch_writes_the_revisions_version_and_values() {
        let chart = json!({"name": "postgres", "version": "1.0.0"});
        let values = json!({"a": 1});
        let patch = SpecPatch {
            spec: RolledBack {
                version: chart.get("version"),
                values: &values,
            },
        };
        assert_eq!(
            serde_json::to_value(&patch).unwrap(),
            json!({"spec": {"version": "1.0.0", "values": {"a": 1}}})
        );
    }
}
