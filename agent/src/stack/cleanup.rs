//! A StackDeploy being deleted: everything its App owns goes first (rendered objects, addon
//! folders in the GitOps repository, builds), then what the agent remembers of it, then the
//! finalizer, and the App is reported gone. While objects stay (held by finalizers, or still
//! terminating) the App is reported `Deleting`, naming them, each time that list changes.

use std::collections::BTreeSet;
use std::time::Duration;

use kube::ResourceExt;
use kube::api::Api;
use kube::runtime::controller::Action;
use kubenest_contracts as wire;
use kubenest_crds::names::finalizers;

use super::{Error, Stack, selector};
use crate::addon;
use crate::apply::describe;
use crate::crd::StackDeploy;
use crate::render;
use crate::report;
use kubenest_runtime::finalizer;

/// Removes what `held`'s App owns; looks again in a second while objects are still going.
pub async fn cleanup(
    stack: &Stack,
    api: &Api<StackDeploy>,
    held: &StackDeploy,
) -> Result<Action, Error> {
    let ctx = &stack.ctx;
    let deploy = &held.spec.deploy;
    let app = &deploy.app;
    let namespace = app.namespace.as_str();
    let refused = held
        .status
        .as_ref()
        .and_then(|s| s.rejection.as_ref())
        .is_some();
    let remaining = if refused {
        vec![] // refused StackDeploys never created anything
    } else {
        ctx.applier
            .prune(namespace, &selector(app), &BTreeSet::new())
            .await?
    };
    if !remaining.is_empty() {
        // Said once per change of what is left: the management side judges the deletion's
        // deadline and names these when it fails.
        let left = describe(&remaining);
        if stack.left.changed(app.app_id.as_str(), &left) {
            let report = report::deleting(
                &ctx.reporter,
                app.app_id.clone(),
                deploy.revision.clone(),
                &left,
            );
            stack.apps.reported.record(&report);
            ctx.reporter.report(report);
        }
        return Ok(Action::requeue(Duration::from_secs(1)));
    }
    for component in &deploy.components {
        if let wire::Component::Addon(a) = component {
            let release = render::component_object(app, a.name.as_str());
            addon::forget(ctx, namespace, &release, a.name.as_str()).await?;
        }
    }
    crate::build::forget_app(ctx, app).await?;
    stack.forget(app.app_id.as_str());
    ctx.reporter.report(report::deleted(
        &ctx.reporter,
        app.app_id.clone(),
        Some(deploy.revision.clone()),
    ));
    finalizer::release(
        api,
        &held.name_any(),
        held.finalizers(),
        finalizers::STACK_DEPLOY,
    )
    .await?;
    tracing::info!(
        app = app.name.as_str(),
        "everything the App owned is removed"
    );
    Ok(Action::await_change())
}
