//! The StackDeploy controller: brings an App's components to the stored desired state and
//! reports where they stand.
//!
//! Per reconcile: the namespace boundary (a StackDeploy outside its project's namespace is
//! refused, and the refusal travels back as the App's status), then addons (their export Secrets
//! exist before a consumer starts), then workloads (drift measured against the live object before
//! applying, so a change behind the agent's back is reported with its manager and then healed),
//! then pruning of whatever the revision no longer renders, then the phase: `Running` when every
//! component is ready, `Paused` when workloads are at zero, `Failed` when a component fails, a
//! rollout misses its progress deadline, or the StackDeploy is refused; `Deploying` otherwise.

use kubenest_crds::names::{finalizers, labels};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use chrono::Utc;
use futures::StreamExt;
use kube::ResourceExt;
use kube::api::{Api, DynamicObject, Patch, PatchParams};
use kube::runtime::controller::{Action, Controller};
use kube::runtime::reflector::ObjectRef;
use kube::runtime::watcher;
use kubenest_contracts::{self as wire, AppPhase};
use serde_json::{Value, json};

use crate::addon::{self, AddonTarget, workload_ready};
use crate::apply::{ObjectId, id_of};
use crate::context::Context;
use crate::crd::{BuildRequest, StackDeploy, StackDeployStatus, stack_deploy_name};
use crate::drift;
use crate::finalizer;
use crate::render::{self, RenderError, WorkloadInputs};
use crate::status::{self, phase_name};

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

/// Checks what the schema cannot: unique component names, and export references that name an
/// addon component of the same App publishing that export. Returns (JSON pointer, message).
pub fn validate(deploy: &wire::AppDeploy) -> Result<(), (String, String)> {
    let mut names = BTreeSet::new();
    let mut published: BTreeMap<&str, &wire::ExportMapping> = BTreeMap::new();
    for (i, component) in deploy.components.iter().enumerate() {
        if !names.insert(component.name().as_str()) {
            return Err((
                format!("/components/{i}/name"),
                format!("component name {} is used twice", component.name().as_str()),
            ));
        }
        if let wire::Component::Addon(a) = component {
            published.insert(a.name.as_str(), &a.exports);
        }
    }
    for (i, component) in deploy.components.iter().enumerate() {
        let wire::Component::Workload(w) = component else {
            continue;
        };
        for (j, var) in w.env.iter().enumerate() {
            let wire::EnvFrom::ExportRef(export) = &var.from else {
                continue;
            };
            let field = format!("/components/{i}/env/{j}/export_ref");
            match published.get(export.component.as_str()) {
                None => {
                    return Err((
                        format!("{field}/component"),
                        format!(
                            "no addon component {} in this App",
                            export.component.as_str()
                        ),
                    ));
                }
                Some(exports) if !exports.contains_key(&export.export) => {
                    return Err((
                        format!("{field}/export"),
                        format!(
                            "addon {} publishes no export {}",
                            export.component.as_str(),
                            export.export
                        ),
                    ));
                }
                Some(_) => {}
            }
        }
    }
    Ok(())
}

/// What the components add up to (pure).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Tally {
    pub rejected: bool,
    pub failed: bool,
    pub blocked: bool,
    pub all_ready: bool,
    pub workloads_at_zero: bool,
    pub paused: bool,
    pub expired: bool,
}

/// The App's phase from its components (pure).
pub fn phase(t: &Tally) -> AppPhase {
    if t.rejected || t.failed || t.blocked {
        AppPhase::Failed
    } else if t.paused && t.workloads_at_zero {
        AppPhase::Paused
    } else if t.all_ready && !t.paused {
        AppPhase::Running
    } else if t.expired {
        AppPhase::Failed
    } else {
        AppPhase::Deploying
    }
}

/// Everything one pass over the components found.
#[derive(Debug, Default)]
struct Pass {
    keep: BTreeSet<ObjectId>,
    components: Vec<wire::ComponentStatus>,
    exports: Vec<wire::PublishedExport>,
    drift: Vec<wire::DriftDetail>,
    blocked: Vec<wire::DriftDetail>,
    ingress: Option<String>,
    failed: bool,
    all_ready: bool,
    workloads_at_zero: bool,
}

fn component(
    name: &wire::Name,
    kind: &str,
    (ready, have, want): (bool, u32, u32),
    message: String,
) -> wire::ComponentStatus {
    wire::ComponentStatus {
        name: name.clone(),
        kind: kind.into(),
        ready_replicas: have,
        desired_replicas: want,
        ready,
        message: message.chars().take(4096).collect(),
    }
}

async fn addons(ctx: &Context, deploy: &wire::AppDeploy, force: bool, pass: &mut Pass) {
    let app = &deploy.app;
    for c in &deploy.components {
        let wire::Component::Addon(a) = c else {
            continue;
        };
        let target = AddonTarget {
            release: render::component_object(app, a.name.as_str()),
            namespace: app.namespace.as_str(),
            labels: render::labels(app, a.name.as_str()),
            export_secret: render::export_secret(app, a.name.as_str()),
            name: a.name.as_str(),
            definition: a.definition.as_str(),
            chart: &a.chart,
            values: &a.values,
            exports: &a.exports,
            force,
        };
        match addon::apply(ctx, &target).await {
            Ok(outcome) => {
                pass.all_ready &= outcome.ready;
                pass.keep.extend(outcome.objects);
                pass.exports.push(outcome.export);
                pass.components.push(component(
                    &a.name,
                    "addon",
                    (
                        outcome.ready,
                        outcome.ready_replicas,
                        outcome.desired_replicas,
                    ),
                    outcome.message,
                ));
            }
            Err(error) => {
                tracing::warn!(addon = a.name.as_str(), %error, "addon failed");
                pass.failed = true;
                pass.all_ready = false;
                pass.components.push(component(
                    &a.name,
                    "addon",
                    (false, 0, 1),
                    error.to_string(),
                ));
            }
        }
    }
}

async fn workloads(
    ctx: &Context,
    held: &StackDeploy,
    fresh_revision: bool,
    force: bool,
    pass: &mut Pass,
) -> Result<(), Error> {
    let deploy = &held.spec.deploy;
    let app = &deploy.app;
    for c in &deploy.components {
        let wire::Component::Workload(w) = c else {
            continue;
        };
        let built = match &w.source {
            wire::WorkloadSource::Git(git) => {
                match crate::build::image_for(ctx, deploy, w, git).await? {
                    crate::build::Image::Ready(image) => Some(image),
                    crate::build::Image::Building(message) => {
                        pass.all_ready = false;
                        pass.workloads_at_zero &= deploy.paused;
                        pass.components.push(component(
                            &w.name,
                            "workload",
                            (false, 0, w.replicas),
                            message,
                        ));
                        continue;
                    }
                    crate::build::Image::Failed(message) => {
                        pass.failed = true;
                        pass.components.push(component(
                            &w.name,
                            "workload",
                            (false, 0, w.replicas),
                            message,
                        ));
                        continue;
                    }
                }
            }
            _ => None,
        };
        let inputs = WorkloadInputs {
            built_image: built.as_deref(),
            paused: deploy.paused,
            restart_id: held.spec.restart_id.as_deref(),
            progress_deadline_seconds: deploy.progress_deadline_seconds,
        };
        let objects = match render::workload(app, w, &inputs) {
            Ok(objects) => objects,
            Err(RenderError::Helm) => {
                helm_workload(ctx, deploy, w, force, pass).await;
                continue;
            }
            Err(RenderError::AwaitingBuild) => continue,
        };
        // Keep everything the revision renders, applied or not: a failed write must not
        // make pruning delete the object's last good version.
        pass.keep.extend(objects.iter().filter_map(id_of));
        let mut status = (false, 0, w.replicas);
        let mut message = String::new();
        for object in &objects {
            let Some(id) = id_of(object) else { continue };
            let is_deployment = id.1 == "Deployment";
            let mut drifted = false;
            if is_deployment && !fresh_revision {
                let before = ctx
                    .applier
                    .get(&id.0, &id.1, app.namespace.as_str(), &id.2)
                    .await?;
                if let Some(before) = before {
                    // Only fields another manager changed: a field that differs because the
                    // desired state changed is still the agent's.
                    let found: Vec<_> = drift::deployment_drift(object, &before)
                        .into_iter()
                        .filter(|d| d.manager.is_some())
                        .collect();
                    drifted = !found.is_empty();
                    pass.drift.extend(found);
                }
            }
            let live = match ctx.applier.apply(object, force || drifted).await {
                Ok(live) => live,
                Err(error) => {
                    // Not a reason to stop the others: the component waits (and fails at the
                    // deadline) with the cluster's answer as its message.
                    tracing::warn!(%error, "cannot apply");
                    status.0 = false;
                    message = format!("cannot apply {}/{}: {error}", id.1, id.2);
                    break;
                }
            };
            if is_deployment {
                // The cache is at least as new as the change that woke this pass.
                status = workload_ready(&live);
                pass.workloads_at_zero &= status.1 == 0 && live_replicas(&live) == 0;
                let blocked = drift::blocked(&live);
                message = match &blocked {
                    Some(_) => "the rollout exceeded its progress deadline".to_owned(),
                    None if status.0 => String::new(),
                    None => format!("{}/{} replicas ready", status.1, status.2),
                };
                pass.blocked.extend(blocked);
            }
            if id.1 == "Ingress" {
                pass.ingress = live
                    .pointer("/status/loadBalancer/ingress/0")
                    .and_then(|i| i.get("hostname").or_else(|| i.get("ip")))
                    .and_then(Value::as_str)
                    .map(str::to_owned);
            }
        }
        pass.all_ready &= status.0;
        pass.components
            .push(component(&w.name, "workload", status, message));
    }
    Ok(())
}

fn live_replicas(live: &Value) -> u64 {
    live.pointer("/status/replicas")
        .and_then(Value::as_u64)
        .unwrap_or(0)
}

/// A workload that is a Helm chart: rendered and applied like an addon without exports.
async fn helm_workload(
    ctx: &Context,
    deploy: &wire::AppDeploy,
    w: &wire::Workload,
    force: bool,
    pass: &mut Pass,
) {
    let wire::WorkloadSource::Helm { chart, values } = &w.source else {
        return;
    };
    let app = &deploy.app;
    let no_exports = wire::ExportMapping::new();
    let target = AddonTarget {
        release: render::component_object(app, w.name.as_str()),
        namespace: app.namespace.as_str(),
        labels: render::labels(app, w.name.as_str()),
        export_secret: render::export_secret(app, w.name.as_str()),
        name: w.name.as_str(),
        definition: "helm",
        chart,
        values,
        exports: &no_exports,
        force,
    };
    match addon::apply(ctx, &target).await {
        Ok(outcome) => {
            pass.all_ready &= outcome.ready;
            pass.keep.extend(outcome.objects);
            pass.components.push(component(
                &w.name,
                "workload",
                (
                    outcome.ready,
                    outcome.ready_replicas,
                    outcome.desired_replicas,
                ),
                outcome.message,
            ));
        }
        Err(error) => {
            pass.failed = true;
            pass.components.push(component(
                &w.name,
                "workload",
                (false, 0, w.replicas),
                error.to_string(),
            ));
        }
    }
}

async fn reconcile(held: Arc<StackDeploy>, ctx: Arc<Context>) -> Result<Action, Error> {
    let deploy = &held.spec.deploy;
    let app = &deploy.app;
    let namespace = app.namespace.as_str();
    let selector = format!("{}={}", labels::APP_ID, app.app_id);
    let api = Api::<StackDeploy>::namespaced(ctx.client.clone(), &ctx.namespace);
    let name = held.name_any();

    if held.metadata.deletion_timestamp.is_some() {
        let remaining = if held
            .status
            .as_ref()
            .and_then(|s| s.rejection.as_ref())
            .is_some()
        {
            0 // refused StackDeploys never created anything
        } else {
            ctx.applier
                .prune(namespace, &selector, &BTreeSet::new())
                .await?
        };
        if remaining > 0 {
            return Ok(Action::requeue(Duration::from_secs(1)));
        }
        for c in &deploy.components {
            if let wire::Component::Addon(a) = c {
                let release = render::component_object(app, a.name.as_str());
                addon::forget(&ctx, namespace, &release, a.name.as_str()).await?;
            }
        }
        crate::build::forget_app(&ctx, app).await?;
        ctx.forget_app(app.app_id.as_str());
        ctx.reporter.report(status::deleted(
            &ctx.reporter,
            app.app_id.clone(),
            Some(deploy.revision.clone()),
        ));
        finalizer::release(&api, &name, held.finalizers(), finalizers::STACK_DEPLOY).await?;
        tracing::info!(
            app = app.name.as_str(),
            "everything the App owned is removed"
        );
        return Ok(Action::await_change());
    }
    finalizer::hold(&api, &name, held.finalizers(), finalizers::STACK_DEPLOY).await?;
    ctx.check_stored(deploy);

    let old = ctx.last_written(app.app_id.as_str(), &held);
    let mut new = old.clone();
    let now = Utc::now();
    let fresh_revision = old.observed_revision.as_deref() != Some(deploy.revision.as_str());
    if fresh_revision || old.rollout_started_at.is_none() {
        new.observed_revision = Some(deploy.revision.clone());
        new.rollout_started_at = Some(now);
    }

    let boundary = crate::commands::check_namespace(
        &ctx,
        namespace,
        app.project_id.as_str(),
        "/app/namespace",
    )
    .await;
    let mut pass = Pass {
        all_ready: true,
        workloads_at_zero: true,
        ..Pass::default()
    };
    if let Err(refusal) = &boundary {
        new.rejection = Some(refusal.message.clone());
    } else {
        new.rejection = None;
        // The full-pass clock starts with a fresh revision's own pass too, or the pass right
        // after it (woken by its own status write) would apply everything a second time.
        let full_pass_due = ctx.full_pass_due(app.app_id.as_str());
        let force = fresh_revision || full_pass_due;
        addons(&ctx, deploy, force, &mut pass).await;
        workloads(&ctx, &held, fresh_revision, force, &mut pass).await?;
        ctx.applier.prune(namespace, &selector, &pass.keep).await?;
    }

    let deadline = new.rollout_started_at.unwrap_or(now)
        + chrono::Duration::seconds(i64::from(deploy.progress_deadline_seconds));
    let tally = Tally {
        rejected: boundary.is_err(),
        failed: pass.failed,
        blocked: !pass.blocked.is_empty(),
        all_ready: pass.all_ready,
        workloads_at_zero: pass.workloads_at_zero,
        paused: deploy.paused,
        expired: now > deadline,
    };
    let phase = phase(&tally);
    new.phase = Some(phase_name(phase).into());
    new.components = pass.components;
    new.exports = pass.exports;
    new.ingress_address = pass.ingress;

    // Drift: blocked_sync wins; recoverable drift was healed by the apply above.
    let (class, details) = if !pass.blocked.is_empty() {
        (Some("blocked_sync"), pass.blocked)
    } else if !pass.drift.is_empty() {
        (Some("recoverable"), pass.drift)
    } else {
        (None, vec![])
    };
    let drift_changed = old.drift_class.as_deref() != class || old.drift != details;
    // A healed drift is reported and then cleared on the next pass.
    new.drift_class = class.map(str::to_owned);
    new.drift = details.clone();
    if let Some(restart) = &held.spec.restart_id {
        new.handled_restart = Some(restart.clone());
    }

    if new != old {
        // Reported first: what the cluster shows is true whether or not the StackDeploy's
        // record of it is written yet, and the management side need not wait for that write.
        // A failed write is retried, and the report sent again with a newer sequence.
        if reportable(&old) != reportable(&new) {
            let mut observed = (*held).clone();
            observed.status = Some(new.clone());
            ctx.report_app(status::app_status(&ctx.reporter, &observed));
        }
        let patch = status_patch(&old, &new);
        api.patch_status(&name, &PatchParams::default(), &Patch::Merge(&patch))
            .await?;
        ctx.wrote(app.app_id.as_str(), &held, new);
    }
    if drift_changed {
        ctx.reporter.report(wire::DriftReport {
            app_id: app.app_id.clone(),
            revision: deploy.revision.clone(),
            class: if class == Some("blocked_sync") {
                wire::DriftClass::BlockedSync
            } else {
                wire::DriftClass::Recoverable
            },
            details,
            observed_at: now,
        });
    }
    let next = match phase {
        AppPhase::Running | AppPhase::Paused => Duration::from_secs(60),
        AppPhase::Failed if tally.rejected => Duration::from_secs(10),
        AppPhase::Failed => Duration::from_secs(30),
        _ => (deadline - now)
            .to_std()
            .unwrap_or(Duration::from_secs(1))
            .clamp(Duration::from_secs(1), Duration::from_secs(5)),
    };
    // Drift just healed: look again soon, to report it cleared.
    Ok(Action::requeue(if class == Some("recoverable") {
        Duration::from_millis(500)
    } else {
        next
    }))
}

/// The merge patch that turns the status `old` into `new`. A merge patch keeps what it does not
/// mention, so a field `new` no longer has (a drift healed, a rejection lifted) is sent as null.
fn status_patch(old: &StackDeployStatus, new: &StackDeployStatus) -> Value {
    let mut status = serde_json::to_value(new).unwrap_or_default();
    if let (Value::Object(status), Ok(Value::Object(old))) =
        (&mut status, serde_json::to_value(old))
    {
        for key in old.keys() {
            status.entry(key.clone()).or_insert(Value::Null);
        }
    }
    json!({ "status": status })
}

/// The part of a status that an `app.status` event carries.
fn reportable(status: &StackDeployStatus) -> impl PartialEq + '_ {
    (
        &status.phase,
        &status.observed_revision,
        &status.components,
        &status.exports,
        &status.ingress_address,
        &status.rejection,
    )
}

fn error_policy(_held: Arc<StackDeploy>, error: &Error, _ctx: Arc<Context>) -> Action {
    tracing::warn!(%error, "stack deploy reconcile failed; retrying");
    Action::requeue(Duration::from_secs(3))
}

/// The StackDeploy of an object labelled with an App id.
fn owner(namespace: &str, labels: &BTreeMap<String, String>) -> Option<ObjectRef<StackDeploy>> {
    let app = labels.get(labels::APP_ID)?;
    Some(ObjectRef::new(&stack_deploy_name(app)).within(namespace))
}

/// Runs the StackDeploy controller until `shutdown`. It is woken by its StackDeploys, by their
/// BuildRequests, and by the Deployments and StatefulSets of their Apps as the applier's caches
/// see them change (one watch of each kind serves both).
pub async fn run(ctx: Arc<Context>, shutdown: impl Future<Output = ()> + Send + Sync + 'static) {
    let held = Api::<StackDeploy>::namespaced(ctx.client.clone(), &ctx.namespace);
    let (Some(deployments), Some(stateful_sets)) = (
        ctx.applier.changes("apps/v1", "Deployment"),
        ctx.applier.changes("apps/v1", "StatefulSet"),
    ) else {
        tracing::error!("the applier caches no Deployments or StatefulSets; not reconciling");
        return;
    };
    let (ns1, ns2, ns3) = (
        ctx.namespace.clone(),
        ctx.namespace.clone(),
        ctx.namespace.clone(),
    );
    Controller::new(held, watcher::Config::default())
        .watches_stream_with(
            deployments.1.map(Ok),
            move |d: DynamicObject| owner(&ns1, d.labels()),
            deployments.0,
        )
        .watches_stream_with(
            stateful_sets.1.map(Ok),
            move |s: DynamicObject| owner(&ns2, s.labels()),
            stateful_sets.0,
        )
        .watches(
            Api::<BuildRequest>::namespaced(ctx.client.clone(), &ctx.namespace),
            watcher::Config::default().labels(labels::APP_ID),
            move |b| owner(&ns3, b.labels()),
        )
        .graceful_shutdown_on(shutdown)
        .run(reconcile, error_policy, ctx)
        .for_each(|result| async move {
            if let Err(error) = result {
                tracing::debug!(%error, "stack deploy reconcile");
            }
        })
        .await;
}

#[cfg(test)]
mod tests {
    use super::*;

    fn deploy(components: serde_json::Value) -> wire::AppDeploy {
        serde_json::from_value(json!({
            "app": {"app_id": "a1", "name": "shop", "project_id": "p1", "namespace": "shop"},
            "revision": "r1", "progress_deadline_seconds": 60, "components": components,
        }))
        .unwrap()
    }

    #[test]
    fn a_status_patch_clears_what_the_new_status_no_longer_has() {
        let old = StackDeployStatus {
            phase: Some("Running".into()),
            drift_class: Some("recoverable".into()),
            rejection: Some("outside the project".into()),
            ..StackDeployStatus::default()
        };
        let new = StackDeployStatus {
            phase: Some("Running".into()),
            ..StackDeployStatus::default()
        };
        let patch = status_patch(&old, &new);
        assert_eq!(patch["status"]["phase"], "Running");
        assert!(patch["status"]["driftClass"].is_null());
        assert!(patch["status"]["rejection"].is_null());
        assert!(
            patch["status"]
                .as_object()
                .unwrap()
                .contains_key("driftClass"),
            "sent as null, not left out: {patch}"
        );
        assert!(
            !patch["status"]
                .as_object()
                .unwrap()
                .contains_key("handledRestart")
        );
    }

    #[test]
    fn export_references_must_name_a_published_export_of_the_app() {
        let ok = deploy(json!([
            {"kind": "addon", "name": "db", "definition": "postgres",
             "chart": {"repository": "charts/addons", "name": "postgres", "version": "1.0.0"},
             "exports": {"dsn": "x"}},
            {"kind": "workload", "name": "web", "source": {"type": "image", "image": "nginx"}, "replicas": 1,
             "env": [{"name": "DATABASE_URL", "export_ref": {"component": "db", "export": "dsn"}}]}
        ]));
        assert_eq!(validate(&ok), Ok(()));
        let mut bad = ok.clone();
        if let wire::Component::Workload(w) = &mut bad.components[1] {
            w.env[0].from = wire::EnvFrom::ExportRef(wire::ExportRef {
                component: "db".into(),
                export: "uri".into(),
            });
        }
        assert_eq!(
            validate(&bad).unwrap_err().0,
            "/components/1/env/0/export_ref/export"
        );
        let twice = deploy(json!([
            {"kind": "workload", "name": "web", "source": {"type": "image", "image": "nginx"}, "replicas": 1},
            {"kind": "workload", "name": "web", "source": {"type": "image", "image": "nginx"}, "replicas": 1}
        ]));
        assert_eq!(validate(&twice).unwrap_err().0, "/components/1/name");
    }

    #[test]
    fn the_phase_follows_the_components() {
        let ready = Tally {
            all_ready: true,
            ..Tally::default()
        };
        assert_eq!(phase(&ready), AppPhase::Running);
        assert_eq!(phase(&Tally::default()), AppPhase::Deploying);
        let expired = Tally {
            expired: true,
            ..Tally::default()
        };
        assert_eq!(phase(&expired), AppPhase::Failed);
        let paused = Tally {
            paused: true,
            workloads_at_zero: true,
            all_ready: true,
            ..Tally::default()
        };
        assert_eq!(phase(&paused), AppPhase::Paused);
        let pausing = Tally {
            paused: true,
            ..Tally::default()
        };
        assert_eq!(phase(&pausing), AppPhase::Deploying);
        let blocked = Tally {
            blocked: true,
            all_ready: true,
            ..Tally::default()
        };
        assert_eq!(phase(&blocked), AppPhase::Failed);
    }
}
