//! The AddonInstance controller: standalone addons with their own revision history.
//!
//! Each spec generation (chart version or values) becomes the next revision in PostgreSQL
//! (`install`, `upgrade` or `values`) before `addon.apply` is sent; the command is re-sent with
//! backoff until the agent reports that revision. A revision has the spec's progress deadline
//! ([`crate::deadline`]): to reach the cluster (past it, `DeliveryDelayed`, still sent), then to
//! be ready there (past it, `Failed` with `ProgressDeadlineExceeded`, recorded in its row). `kubenest.io/rollback-to: <revision>` records a
//! `rollback` revision with that revision's chart and values and writes them back into the spec,
//! so the object always shows what runs. Deletion holds a finalizer until the agent confirms.
//!
//! Each reconcile gathers what it needs (placement, definition, history), asks [`decide`]
//! (pure) what the addon needs, and applies that: [`apply`] for a live addon, [`rollback`] for
//! a rollback request, [`cleanup`] for a deletion.

mod apply;
mod cleanup;
mod decide;
mod rollback;

use std::sync::Arc;

use futures::StreamExt;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::ResourceExt;
use kube::api::Api;
use kube::runtime::controller::{Action, Controller};
use kube::runtime::watcher;
use kubenest_contracts as wire;
use kubenest_crds::addon::{AddonDefinition, AddonInstance, AddonInstanceStatus};
use kubenest_crds::common::ProgressClock;
use kubenest_crds::names::finalizers;
use kubenest_crds::project::Project;
use serde::Serialize;

use crate::intents::ObjectKey;
use crate::patch::merge_status;
use crate::placement::Placement;
use crate::plane::Plane;
pub use crate::reconcile::Error;
use crate::reconcile::{At, error_policy, key_of};
pub use decide::operation_of;
use kubenest_runtime::finalizer;

/// The fields of an AddonInstance's status this controller writes; the status router writes
/// what the agent observed (`observedRevision`, `clusterPhase`, `message`, exports, commit).
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
struct Owned<'a> {
    observed_generation: Option<i64>,
    phase: Option<&'a str>,
    revision: Option<u32>,
    recorded_generation: Option<i64>,
    handled_rollback: Option<&'a str>,
    progress: Option<&'a ProgressClock>,
    conditions: &'a [Condition],
}

/// `new` as the controller writes it after a pass over `generation`: stamped with it, so
/// readers of `observedGeneration` (kstatus, Flux, Argo CD) know the status speaks of that spec.
fn observed(new: &AddonInstanceStatus, generation: Option<i64>) -> AddonInstanceStatus {
    AddonInstanceStatus {
        observed_generation: generation,
        ..new.clone()
    }
}

/// Writes this controller's fields of `new` for `generation` when anything differs from `old`.
async fn write_status(
    plane: &Plane,
    key: &ObjectKey,
    generation: Option<i64>,
    old: &AddonInstanceStatus,
    new: &AddonInstanceStatus,
) -> Result<(), Error> {
    let new = &observed(new, generation);
    if old == new {
        return Ok(());
    }
    let owned = Owned {
        observed_generation: new.observed_generation,
        phase: new.phase.as_deref(),
        revision: new.revision,
        recorded_generation: new.recorded_generation,
        handled_rollback: new.handled_rollback.as_deref(),
        progress: new.progress.as_ref(),
        conditions: &new.conditions,
    };
    let api = Api::<AddonInstance>::namespaced(plane.client.clone(), &key.namespace);
    merge_status(&api, &key.name, &owned)
        .await
        .at("patching the status of AddonInstance", key)?;
    crate::events::conditions_turned::<AddonInstance>(plane, key, &old.conditions, &new.conditions);
    Ok(())
}

fn addon_ref(key: &ObjectKey, placement: &Placement) -> wire::AddonRef {
    wire::AddonRef {
        addon_id: wire::Id::new(&key.uid),
        name: wire::Name::new(&key.name),
        project_id: wire::Id::new(&placement.project_id),
        namespace: wire::Name::new(&placement.namespace),
    }
}

async fn reconcile(addon: Arc<AddonInstance>, plane: Arc<Plane>) -> Result<Action, Error> {
    let key = key_of(&*addon)?;
    let api: Api<AddonInstance> = Api::namespaced(plane.client.clone(), &key.namespace);
    finalizer::hold(
        &api,
        finalizers::ADDON,
        addon,
        async |addon| apply::apply(&addon, &plane, &key).await,
        async |addon| cleanup::cleanup(&addon, &plane, &key).await,
    )
    .await
    .map_err(|e| Error::Finalizer(Box::new(e)))
}

/// Runs the AddonInstance controller until `shutdown` resolves.
pub async fn run(plane: Arc<Plane>, shutdown: impl Future<Output = ()> + Send + Sync + 'static) {
    let addons: Api<AddonInstance> = Api::all(plane.client.clone());
    let caches = plane.caches.clone();
    let by_definition = plane.caches.clone();
    Controller::new(addons, watcher::Config::default())
        // A definition added to (or changed in) the catalog moves the addons that name it on.
        .watches(
            Api::<AddonDefinition>::all(plane.client.clone()),
            watcher::Config::default(),
            move |definition| by_definition.addons_using(&definition.name_any()),
        )
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
        .run(
            crate::metrics::metrics()
                .reconciles
                .measure("addon", reconcile),
            error_policy::<AddonInstance>,
            plane,
        )
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

    #[test]
    fn the_controller_writes_its_own_status_fields_and_clears_with_null() {
        let owned = Owned {
            observed_generation: Some(3),
            phase: Some("Pending"),
            revision: None,
            recorded_generation: Some(2),
            handled_rollback: None,
            progress: None,
            conditions: &[],
        };
        assert_eq!(
            serde_json::to_value(&owned).unwrap(),
            serde_json::json!({
                "observedGeneration": 3,
                "phase": "Pending",
                "revision": null,
                "recordedGeneration": 2,
                "handledRollback": null,
                "progress": null,
                "conditions": [],
            })
        );
    }

    #[test]
    fn a_pass_over_a_new_generation_stamps_it_so_the_status_is_written() {
        let old = AddonInstanceStatus {
            observed_generation: Some(1),
            phase: Some("Ready".into()),
            ..AddonInstanceStatus::default()
        };
        let new = observed(&old, Some(2));
        assert_eq!(new.observed_generation, Some(2));
        assert_ne!(new, old, "only the generation moved, and that is written");
        assert_eq!(
            observed(&new, Some(2)),
            new,
            "the same pass again writes nothing"
        );
    }
}
