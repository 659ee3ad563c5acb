//! Standalone addon commands: `addon.apply` and `addon.rollback` store an AddonRelease with its
//! revision history, `addon.delete` deletes it.

use std::collections::BTreeMap;
use std::sync::Arc;

use kube::api::{Api, DeleteParams, Patch, PatchParams};
use kubenest_contracts::{self as wire, RejectReason};
use kubenest_crds::names::{field_managers, labels};

use crate::boundary::{Refusal, check_namespace};
use crate::context::Context;
use crate::crd::{AddonRelease, AddonReleaseSpec, addon_release_name};

pub(super) async fn addon_apply(
    ctx: &Arc<Context>,
    apply: wire::AddonApply,
) -> Result<(), Refusal> {
    check_namespace(
        &ctx.applier,
        apply.addon.namespace.as_str(),
        apply.addon.project_id.as_str(),
        "/addon/namespace",
    )
    .await?;
    let name = addon_release_name(apply.addon.addon_id.as_str());
    let api = Api::<AddonRelease>::namespaced(ctx.client.clone(), &ctx.namespace);
    let existing = api.get_opt(&name).await.map_err(Refusal::internal)?;
    let mut history = existing.map(|r| r.spec.history).unwrap_or_default();
    if let Some(newest) = history.last()
        && newest.revision > apply.revision
    {
        return Err(Refusal::new(
            RejectReason::Stale,
            format!("revision {} is already applied", newest.revision),
            Some("/revision"),
        ));
    }
    history.retain(|h| h.revision != apply.revision);
    history.push(apply.clone());
    store_release(ctx, &name, apply, history).await
}

async fn store_release(
    ctx: &Context,
    name: &str,
    apply: wire::AddonApply,
    history: Vec<wire::AddonApply>,
) -> Result<(), Refusal> {
    let mut object = AddonRelease::new(name, AddonReleaseSpec { apply, history });
    object.metadata.labels = Some(BTreeMap::from([(
        labels::MANAGED_BY.to_owned(),
        labels::MANAGED_BY_AGENT.to_owned(),
    )]));
    Api::<AddonRelease>::namespaced(ctx.client.clone(), &ctx.namespace)
        .patch(
            name,
            &PatchParams::apply(field_managers::AGENT_COMMANDS).force(),
            &Patch::Apply(&object),
        )
        .await
        .map_err(Refusal::internal)?;
    Ok(())
}

pub(super) async fn addon_rollback(
    ctx: &Arc<Context>,
    rollback: &wire::AddonRollback,
) -> Result<(), Refusal> {
    let name = addon_release_name(rollback.addon.addon_id.as_str());
    let api = Api::<AddonRelease>::namespaced(ctx.client.clone(), &ctx.namespace);
    let Some(existing) = api.get_opt(&name).await.map_err(Refusal::internal)? else {
        return Err(Refusal::new(
            RejectReason::Invalid,
            format!("addon {} is not installed here", rollback.addon.addon_id),
            Some("/addon/addon_id"),
        ));
    };
    let Some(target) = existing
        .spec
        .history
        .iter()
        .find(|h| h.revision == rollback.to_revision)
    else {
        return Err(Refusal::new(
            RejectReason::Invalid,
            format!(
                "this cluster never applied revision {}",
                rollback.to_revision
            ),
            Some("/to_revision"),
        ));
    };
    let mut restored = target.clone();
    restored.revision = rollback.revision;
    let mut history = existing.spec.history.clone();
    history.retain(|h| h.revision != restored.revision);
    history.push(restored.clone());
    store_release(ctx, &name, restored, history).await
}

pub(super) async fn addon_delete(
    ctx: &Arc<Context>,
    delete: &wire::AddonDelete,
) -> Result<(), Refusal> {
    let name = addon_release_name(delete.addon.addon_id.as_str());
    let api = Api::<AddonRelease>::namespaced(ctx.client.clone(), &ctx.namespace);
    match api.delete(&name, &DeleteParams::default()).await {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(status)) if status.code == 404 => {
            ctx.reporter.report(wire::AddonStatus {
                addon_id: delete.addon.addon_id.clone(),
                observed_revision: 1,
                phase: wire::AddonPhase::Deleted,
                message: "not installed".into(),
                export: None,
                git_commit: None,
                gitops_error: None,
                drift: Vec::new(),
                observed_at: chrono::Utc::now(),
            });
            Ok(())
        }
        Err(error) => Err(Refusal::internal(error)),
    }
}
