//! App commands: `app.deploy` (and pause and resume, which store the same command with
//! `paused` set) becomes a StackDeploy; `app.redeploy` a restart request on it; `app.delete`
//! its deletion; `build.request` a BuildRequest.

use std::collections::BTreeMap;
use std::sync::Arc;

use kube::api::{Api, DeleteParams, Patch, PatchParams};
use kube::{Resource, ResourceExt};
use kubenest_contracts::{self as wire, RejectReason};
use kubenest_crds::names::{field_managers, finalizers, labels};
use serde_json::json;

use crate::boundary::{Refusal, check_namespace};
use crate::context::Context;
use crate::crd::{StackDeploy, StackDeploySpec, stack_deploy_name};
use crate::memory::AppMemory;
use crate::report;

/// The labels of an App's StackDeploy.
fn labels(app: &wire::AppRef) -> BTreeMap<String, String> {
    BTreeMap::from([
        (labels::APP_ID.to_owned(), app.app_id.to_string()),
        (labels::PROJECT_ID.to_owned(), app.project_id.to_string()),
        (
            labels::MANAGED_BY.to_owned(),
            labels::MANAGED_BY_AGENT.to_owned(),
        ),
    ])
}

pub(super) async fn deploy(
    ctx: &Arc<Context>,
    apps: &AppMemory,
    deploy: wire::AppDeploy,
) -> Result<(), Refusal> {
    check_namespace(
        &ctx.applier,
        deploy.app.namespace.as_str(),
        deploy.app.project_id.as_str(),
        "/app/namespace",
    )
    .await?;
    crate::validate::validate(&deploy)
        .map_err(|(field, message)| Refusal::new(RejectReason::Invalid, message, Some(&field)))?;
    if apps.already_stored(&deploy) {
        return Ok(()); // a re-send: the StackDeploy holds it
    }
    let name = stack_deploy_name(deploy.app.app_id.as_str());
    let mut object = StackDeploy::new(
        &name,
        StackDeploySpec {
            deploy: deploy.clone(),
            restart_id: None,
        },
    );
    object.metadata.labels = Some(labels(&deploy.app));
    // Stored holding the finalizer the StackDeploy controller would otherwise add in a write
    // of its own before applying anything.
    object.metadata.finalizers = Some(vec![finalizers::STACK_DEPLOY.to_owned()]);
    let mut value = serde_json::to_value(&object).map_err(Refusal::internal)?;
    // Only the fields this manager owns: a redeploy request is another manager's.
    if let Some(spec) = value.get_mut("spec").and_then(|s| s.as_object_mut()) {
        spec.remove("restartId");
    }
    Api::<StackDeploy>::namespaced(ctx.client.clone(), &ctx.namespace)
        .patch(
            &name,
            &PatchParams::apply(field_managers::AGENT_COMMANDS).force(),
            &Patch::Apply(&value),
        )
        .await
        .map_err(Refusal::internal)?;
    apps.remember_stored(deploy);
    Ok(())
}

pub(super) async fn delete_app(
    ctx: &Arc<Context>,
    apps: &AppMemory,
    app: &wire::AppRef,
) -> Result<(), Refusal> {
    apps.forget_stored(app.app_id.as_str());
    let name = stack_deploy_name(app.app_id.as_str());
    let api = Api::<StackDeploy>::namespaced(ctx.client.clone(), &ctx.namespace);
    match api.delete(&name, &DeleteParams::default()).await {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(status)) if status.code == 404 => {
            // Nothing held (or already cleaned up): say so, so the App's deletion can finish.
            ctx.reporter
                .report(report::deleted(&ctx.reporter, app.app_id.clone(), None));
            Ok(())
        }
        Err(error) => Err(Refusal::internal(error)),
    }
}

async fn stack_deploy(ctx: &Context, app: &wire::AppRef) -> Result<StackDeploy, Refusal> {
    let name = stack_deploy_name(app.app_id.as_str());
    Api::<StackDeploy>::namespaced(ctx.client.clone(), &ctx.namespace)
        .get_opt(&name)
        .await
        .map_err(Refusal::internal)?
        .ok_or_else(|| {
            Refusal::new(
                RejectReason::Invalid,
                format!("no StackDeploy for app {} on this cluster", app.app_id),
                Some("/app/app_id"),
            )
        })
}

pub(super) async fn redeploy(
    ctx: &Arc<Context>,
    command: &wire::AppRedeploy,
) -> Result<(), Refusal> {
    let held = stack_deploy(ctx, &command.app).await?;
    if held.spec.deploy.revision != command.revision {
        return Err(Refusal::new(
            RejectReason::Stale,
            format!(
                "the cluster holds revision {}, not {}",
                held.spec.deploy.revision, command.revision
            ),
            Some("/revision"),
        ));
    }
    let patch = json!({
        "apiVersion": StackDeploy::api_version(&()),
        "kind": StackDeploy::kind(&()),
        "spec": {"restartId": command.restart_id.as_str()},
    });
    Api::<StackDeploy>::namespaced(ctx.client.clone(), &ctx.namespace)
        .patch(
            &held.name_any(),
            &PatchParams::apply(field_managers::AGENT_REDEPLOY).force(),
            &Patch::Apply(&patch),
        )
        .await
        .map_err(Refusal::internal)?;
    Ok(())
}

pub(super) async fn set_paused(
    ctx: &Arc<Context>,
    apps: &AppMemory,
    app: &wire::AppRef,
    paused: bool,
) -> Result<(), Refusal> {
    let held = stack_deploy(ctx, app).await?;
    let mut deploy = held.spec.deploy.clone();
    deploy.paused = paused;
    Box::pin(self::deploy(ctx, apps, deploy)).await
}

pub(super) async fn build(ctx: &Arc<Context>, request: wire::BuildRequest) -> Result<(), Refusal> {
    check_namespace(
        &ctx.applier,
        request.app.namespace.as_str(),
        request.app.project_id.as_str(),
        "/app/namespace",
    )
    .await?;
    crate::build::store(ctx, request)
        .await
        .map_err(Refusal::internal)
}
