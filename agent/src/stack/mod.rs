//! The StackDeploy controller: brings an App's components to the stored desired state and
//! reports where they stand.
//!
//! Per reconcile: the namespace boundary (a StackDeploy outside its project's namespace is
//! refused, and the refusal travels back as the App's status), then addons (their export Secrets
//! exist before a consumer starts), then workloads (drift measured against the live object before
//! applying, so a change behind the agent's back is reported with its manager and then healed),
//! then pruning of whatever the revision no longer renders, then the phase: `Running` when every
//! component is ready, `Paused` when workloads are at zero, `Failed` when a component fails, a
//! rollout misses its progress deadline (`blocked_sync`: a Deployment's own, or the App's for
//! a StatefulSet, DaemonSet or Job still not ready then), or the StackDeploy is refused;
//! `Deploying` otherwise.
//!
//! A pass is fetch → plan → roll out → decide → write:
//! - `facts`: what the pass knows before it writes anything (the status this process last
//!   wrote, the namespace boundary, whether a full pass is due, the Git workloads' builds, the
//!   live Deployments);
//! - `plan` (pure): what to apply, in order and with which force, and the drift found;
//! - `rollout`: applies the plan and returns what the cluster answered;
//! - `assess` (pure): what the answers add up to, component by component;
//! - `decide` (pure): the phase, the status to write, the reports and when to look again;
//! - `events` (pure): the Kubernetes Events the written status and the drift tell.
//!
//! Readiness is judged on the objects as the apply answered them (a changed Deployment is not
//! ready until its new generation is observed), so the two pure steps follow the rollout
//! instead of preceding it; the driver below then writes the status and sends the reports.
//!
//! A StackDeploy being deleted takes the `cleanup` path instead.

mod assess;
mod cleanup;
mod decide;
mod events;
mod facts;
mod plan;
mod ready;
mod rollout;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use kube::api::{Api, DynamicObject, Patch, PatchParams};
use kube::runtime::controller::{Action, Controller};
use kube::runtime::reflector::ObjectRef;
use kube::runtime::watcher;
use kube::{Resource, ResourceExt};
use kubenest_contracts as wire;
use kubenest_crds::names::{finalizers, labels};

use crate::context::Context;
use crate::crd::{BuildRequest, StackDeploy, StackDeployStatus, stack_deploy_name};
use crate::memory::{AppMemory, FullPasses, LeftBehind};
use crate::report;
use decide::{Decision, status_patch};
use facts::Facts;
use kubenest_runtime::finalizer;

/// What stops a reconcile.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("kubernetes: {0}")]
    Kube(#[from] kube::Error),
    #[error(transparent)]
    Apply(#[from] crate::apply::ApplyError),
    #[error(transparent)]
    Addon(#[from] crate::addon::AddonError),
}

/// The error's category in the reconcile metrics.
impl kubenest_runtime::reconciles::Category for Error {
    fn category(&self) -> &'static str {
        match self {
            Error::Kube(_) => "kubernetes",
            Error::Apply(e) => e.category(),
            Error::Addon(e) => e.category(),
        }
    }
}

/// The StackDeploy controller's state: the agent's shared context, what this process remembers
/// of each App (shared with the command handlers), each App's full-pass clock, and what each
/// App's deletion last reported as left on the cluster.
#[derive(Debug)]
pub struct Stack {
    pub ctx: Arc<Context>,
    pub apps: Arc<AppMemory>,
    pub passes: FullPasses,
    pub left: LeftBehind,
}

impl Stack {
    /// Forgets everything this process keeps about App `app_id` (it is gone).
    fn forget(&self, app_id: &str) {
        self.apps.forget(app_id);
        self.passes.forget(app_id);
        self.left.forget(app_id);
    }
}

/// The label selector of everything an App owns.
fn selector(app: &wire::AppRef) -> String {
    format!("{}={}", labels::APP_ID, app.app_id)
}

async fn reconcile(held: Arc<StackDeploy>, stack: Arc<Stack>) -> Result<Action, Error> {
    let ctx = &stack.ctx;
    let api = Api::<StackDeploy>::namespaced(ctx.client.clone(), &ctx.namespace);
    if held.metadata.deletion_timestamp.is_some() {
        return cleanup::cleanup(&stack, &api, &held).await;
    }
    let deploy = &held.spec.deploy;
    tracing::Span::current().record("revision", deploy.revision.as_str());
    finalizer::add(
        &api,
        &held.name_any(),
        held.finalizers(),
        finalizers::STACK_DEPLOY,
    )
    .await?;
    stack.apps.check_stored(deploy);

    let facts = Facts::gather(&stack, &held).await?;
    let plan = plan::plan(&facts);
    let applying = std::time::Instant::now();
    let answers = rollout::apply(ctx, &plan).await?;
    let metrics = crate::metrics::metrics();
    metrics
        .apply_duration
        .observe(applying.elapsed().as_secs_f64());
    let pass = assess::assess(&plan, &answers, deploy.paused);
    if facts.rejection.is_none() {
        let app = &deploy.app;
        ctx.applier
            .prune(app.namespace.as_str(), &selector(app), &pass.keep)
            .await?;
        forget_dropped_addons(ctx, deploy, &facts.old).await?;
    }
    let decision = decide::decide(&facts, pass);
    if let Some(drift) = &decision.drift
        && drift.class == wire::DriftClass::Recoverable
    {
        // Found before the apply and applied back by it.
        metrics.drift_heals.inc_by(drift.details.len() as u64);
    }
    write(&stack, &api, &held, &facts.old, decision).await
}

/// Removes from the GitOps repository the folders of addon components the App had at its last
/// pass (their exports, in the StackDeploy's status) and no longer has. Once the status is
/// written without them this finds nothing; a failed removal is tried again next pass.
async fn forget_dropped_addons(
    ctx: &Context,
    deploy: &wire::AppDeploy,
    old: &StackDeployStatus,
) -> Result<(), Error> {
    let kept: BTreeSet<&str> = deploy
        .components
        .iter()
        .filter_map(|c| match c {
            wire::Component::Addon(a) => Some(a.name.as_str()),
            _ => None,
        })
        .collect();
    let app = &deploy.app;
    for export in &old.exports {
        let component = export.component.as_str();
        if !kept.contains(component) {
            let release = crate::render::component_object(app, component);
            crate::addon::forget(ctx, app.namespace.as_str(), &release, component).await?;
        }
    }
    Ok(())
}

/// Writes the decided status and sends the reports.
async fn write(
    stack: &Stack,
    api: &Api<StackDeploy>,
    held: &StackDeploy,
    old: &StackDeployStatus,
    decision: Decision,
) -> Result<Action, Error> {
    let ctx = &stack.ctx;
    if decision.changed {
        // Reported first: what the cluster shows is true whether or not the StackDeploy's
        // record of it is written yet, and the management side need not wait for that write.
        // A failed write is retried, and the report sent again with a newer sequence.
        if decision.report {
            let mut observed = held.clone();
            observed.status = Some(decision.status.clone());
            let status = report::app_status(&ctx.reporter, &observed);
            stack.apps.report(&ctx.reporter, status);
        }
        let patch = status_patch(old, &decision.status);
        api.patch_status(
            &held.name_any(),
            &PatchParams::default(),
            &Patch::Merge(&patch),
        )
        .await?;
        ctx.events
            .emit(held, events::stack_events(old, &decision.status));
        stack.apps.wrote(held, decision.status);
    }
    if let Some(drift) = decision.drift {
        let on = held.object_ref(&());
        for (reference, event) in crate::drift_events::drift_events(
            held.spec.deploy.app.namespace.as_str(),
            &on,
            drift.class,
            &drift.details,
        ) {
            ctx.events.emit_to(&reference, [event]);
        }
        ctx.reporter.report(drift);
    }
    Ok(Action::requeue(decision.requeue))
}

fn error_policy(_held: Arc<StackDeploy>, error: &Error, _stack: Arc<Stack>) -> Action {
    tracing::warn!(%error, "stack deploy reconcile failed; retrying");
    Action::requeue(Duration::from_secs(3))
}

/// The StackDeploy of an object labelled with an App id.
fn owner(namespace: &str, labels: &BTreeMap<String, String>) -> Option<ObjectRef<StackDeploy>> {
    let app = labels.get(labels::APP_ID)?;
    Some(ObjectRef::new(&stack_deploy_name(app)).within(namespace))
}

/// Runs the StackDeploy controller until `shutdown`. It is woken by its StackDeploys, by their
/// BuildRequests, by the [`WAKING`](crate::apply::WAKING) objects of their Apps as the
/// applier's caches see them change (one watch of each kind serves both), so a field changed
/// by hand is seen at once, and by their project's ingress CA.
/// `apps` is shared with the command handlers.
pub async fn run(
    ctx: Arc<Context>,
    apps: Arc<AppMemory>,
    shutdown: impl Future<Output = ()> + Send + Sync + 'static,
) {
    let held = Api::<StackDeploy>::namespaced(ctx.client.clone(), &ctx.namespace);
    let mut controller = Controller::new(held, watcher::Config::default());
    for (api_version, kind) in crate::apply::WAKING {
        let Some((resource, changes)) = ctx.applier.changes(api_version, kind) else {
            tracing::error!(
                kind,
                "the applier caches no {kind}s; Apps are not woken by them"
            );
            continue;
        };
        let namespace = ctx.namespace.clone();
        controller = controller.watches_stream_with(
            changes.map(Ok),
            move |o: DynamicObject| owner(&namespace, o.labels()),
            resource,
        );
    }
    // The project's ingress CA is no App's object: a new one wakes every App of its namespace,
    // so their certificates are issued from it now, not at their next full pass.
    if let Some((resource, changes)) = ctx.applier.changes("v1", "Secret") {
        let held = controller.store();
        let ca_changes = changes.filter(|secret| {
            std::future::ready(secret.metadata.name.as_deref() == Some(wire::INGRESS_CA_SECRET))
        });
        controller = controller.watches_stream_with(
            ca_changes.map(Ok),
            move |secret: DynamicObject| {
                let namespace = secret.metadata.namespace.unwrap_or_default();
                held.state()
                    .iter()
                    .filter(|s| s.spec.deploy.app.namespace.as_str() == namespace)
                    .map(|s| ObjectRef::from_obj(&**s))
                    .collect::<Vec<_>>()
            },
            resource,
        );
    }
    let namespace = ctx.namespace.clone();
    controller
        .watches(
            Api::<BuildRequest>::namespaced(ctx.client.clone(), &ctx.namespace),
            watcher::Config::default().labels(labels::APP_ID),
            move |b| owner(&namespace, b.labels()),
        )
        .graceful_shutdown_on(shutdown)
        .run(
            crate::metrics::metrics()
                .reconciles
                .measure("stack", reconcile),
            error_policy,
            Arc::new(Stack {
                ctx,
                apps,
                passes: FullPasses::default(),
                left: LeftBehind::default(),
            }),
        )
        .for_each(|result| async move {
            if let Err(error) = result {
                tracing::debug!(%error, "stack deploy reconcile");
            }
        })
        .await;
}
