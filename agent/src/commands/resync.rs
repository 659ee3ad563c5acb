//! What the agent holds, told again: the `snapshot` with a checksum per StackDeploy, and the
//! current status of every project, App and standalone addon, for every new session and for
//! `resync.request`.

use kube::api::{Api, ListParams};
use kubenest_contracts::{self as wire, AppPhase, Message};

use crate::context::Context;
use crate::crd::{AddonRelease, StackDeploy};
use crate::memory::AppMemory;
use crate::report::phase_of;

/// The StackDeploys the agent holds.
pub async fn stack_deploys(ctx: &Context) -> Result<Vec<StackDeploy>, kube::Error> {
    Ok(
        Api::<StackDeploy>::namespaced(ctx.client.clone(), &ctx.namespace)
            .list(&ListParams::default())
            .await?
            .items,
    )
}

/// The snapshot of every StackDeploy.
pub async fn snapshot(ctx: &Context) -> wire::Snapshot {
    let held = stack_deploys(ctx).await.unwrap_or_default();
    wire::Snapshot {
        stack_deploys: held
            .iter()
            .map(|sd| wire::SnapshotEntry {
                app_id: sd.spec.deploy.app.app_id.clone(),
                revision: sd.spec.deploy.revision.clone(),
                checksum: sd.spec.deploy.checksum(),
                phase: if sd.metadata.deletion_timestamp.is_some() {
                    AppPhase::Deleting
                } else {
                    phase_of(sd.status.as_ref().and_then(|s| s.phase.as_deref()))
                },
            })
            .collect(),
        taken_at: chrono::Utc::now(),
    }
}

/// The current status of every project, App and standalone addon.
pub async fn resync(ctx: &Context, apps: &AppMemory) -> Vec<Message> {
    let mut events: Vec<Message> = crate::project::statuses(ctx)
        .await
        .into_iter()
        .map(Message::from)
        .collect();
    for held in stack_deploys(ctx).await.unwrap_or_default() {
        if let Some(status) = apps.reported.again(&ctx.reporter, &held) {
            events.push(status.into());
        }
    }
    let releases = Api::<AddonRelease>::namespaced(ctx.client.clone(), &ctx.namespace)
        .list(&ListParams::default())
        .await
        .map(|l| l.items)
        .unwrap_or_default();
    for release in releases {
        if let Some(status) = crate::addon::release_status(&release) {
            events.push(status.into());
        }
    }
    events
}
