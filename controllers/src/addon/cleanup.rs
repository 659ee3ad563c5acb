//! The deletion of an AddonInstance: the finalizer stays until the agent confirms the addon is
//! gone from its cluster (or it never got there). Past the addon's progress deadline the
//! addon is `Failed`, saying what the agent reports is still there and how to remove it by
//! force, and the alerts raise it; the deletion goes on being retried.

use kube::runtime::controller::Action;
use kubenest_contracts as wire;
use kubenest_crds::addon::{AddonInstance, AddonInstanceStatus};

use super::{Error, addon_ref, write_status};
use crate::intents::{ObjectKey, Sent};
use crate::placement;
use crate::plane::Plane;
use crate::reconcile::{attempt_deletion, judge_deletion};
use kubenest_runtime::finalizer::Cleanup;

/// Whether anything of the addon can be on its cluster (pure): a revision was recorded and the
/// agent has not confirmed its removal.
fn on_cluster(status: &AddonInstanceStatus) -> bool {
    status.revision.is_some() && status.cluster_phase.as_deref() != Some("Deleted")
}

pub(super) async fn cleanup(
    addon: &AddonInstance,
    plane: &Plane,
    key: &ObjectKey,
) -> Result<Cleanup, Error> {
    let old = addon.status.clone().unwrap_or_default();
    let placement = placement::place(&plane.caches, &key.namespace, &addon.spec.project, false);
    let placement = match placement {
        Ok(placement) if on_cluster(&old) => placement,
        _ => {
            plane.intents.forget(&key.uid);
            return Ok(Cleanup::Done(Action::await_change()));
        }
    };
    let mut status = old.clone();
    status.phase = Some("Deleting".into());
    let command = wire::AddonDelete {
        addon: addon_ref(key, &placement),
    };
    let sent = Sent::AddonDelete { addon: key.clone() };
    let routed = "addon.delete was sent; waiting for the agent to confirm".to_owned();
    let mut retry = attempt_deletion(
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
    let reported = (old.cluster_phase.as_deref() == Some("Deleting") && !old.message.is_empty())
        .then(|| {
            format!(
                "still on cluster {}: {}",
                placement.cluster_name, old.message
            )
        });
    let force = format!("DELETE /api/v1/addon-instances/{}?force=true", key.uid);
    let overdue = judge_deletion(
        &addon.metadata,
        addon.spec.progress_deadline_seconds,
        &mut status.conditions,
        reported.as_deref(),
        &force,
        &mut retry,
    );
    if overdue.is_some() {
        status.phase = Some("Failed".into());
    }
    write_status(plane, key, addon.metadata.generation, &old, &status).await?;
    Ok(Cleanup::Wait(retry))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_addon_is_deleted_on_its_cluster_only_when_it_may_be_there() {
        let mut status = AddonInstanceStatus::default();
        assert!(!on_cluster(&status), "no revision was ever sent");
        status.revision = Some(1);
        assert!(on_cluster(&status));
        status.cluster_phase = Some("Deleted".into());
        assert!(!on_cluster(&status), "the agent confirmed");
    }
}
