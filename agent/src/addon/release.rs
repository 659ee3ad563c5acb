//! The AddonRelease controller: a standalone addon, stored by `addon.apply`, brought to its
//! desired state with [`super::apply`] and reported as `addon.status`; its deletion prunes what
//! it owns and removes its GitOps folder before the finalizer goes.

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

use super::{AddonError, AddonTarget, forget};
use crate::apply::{Remaining, describe};
use crate::context::Context;
use crate::crd::{AddonRelease, AddonReleaseObserved, StatusPatch, addon_release_name};
use crate::memory::{FullPasses, LeftBehind};
use crate::ready::{Readiness, with_ready};
use crate::render::object_name;

/// The `addon.status` of a standalone addon as its status stands.
pub fn release_status(release: &AddonRelease) -> Option<wire::AddonStatus> {
    let status = release.status.as_ref()?;
    let phase = match status.phase.as_deref()? {
        "Ready" => wire::AddonPhase::Ready,
        "Failed" => wire::AddonPhase::Failed,
        "Deleting" => wire::AddonPhase::Deleting,
        "Installing" => wire::AddonPhase::Installing,
        _ => wire::AddonPhase::Pending,
    };
    let apply = &release.spec.apply;
    Some(wire::AddonStatus {
        addon_id: apply.addon.addon_id.clone(),
        observed_revision: status.observed_revision.unwrap_or(apply.revision),
        phase,
        message: status.message.clone(),
        export: Some(wire::PublishedExport {
            component: apply.addon.name.clone(),
            secret: wire::Name::new(release_export_secret(&apply.addon)),
            keys: apply.exports.keys().cloned().collect(),
        }),
        git_commit: status.git_commit.clone(),
        gitops_error: status.gitops_error.clone(),
        drift: status.drift.clone(),
        observed_at: chrono::Utc::now(),
    })
}

fn release_export_secret(addon: &wire::AddonRef) -> String {
    object_name(&[addon.name.as_str(), "exports"])
}

/// The AddonRelease controller's state: the agent's shared context, each addon's full-pass
/// clock, and what each deletion last reported as left on the cluster.
struct Releases {
    ctx: Arc<Context>,
    passes: FullPasses,
    left: LeftBehind,
}

impl Releases {
    /// Reports addon `addon_id` `Deleting`, naming what is still on the cluster, when that
    /// changed since the last report.
    fn report_remaining(&self, addon_id: &wire::Id, revision: u32, remaining: &[Remaining]) {
        let left = describe(remaining);
        if !self.left.changed(addon_id.as_str(), &left) {
            return;
        }
        self.ctx.reporter.report(wire::AddonStatus {
            addon_id: addon_id.clone(),
            observed_revision: revision,
            phase: wire::AddonPhase::Deleting,
            message: format!("being removed; still there: {left}"),
            export: None,
            git_commit: None,
            gitops_error: None,
            drift: Vec::new(),
            observed_at: chrono::Utc::now(),
        });
    }
}

async fn reconcile(
    release: Arc<AddonRelease>,
    releases: Arc<Releases>,
) -> Result<Action, AddonError> {
    let ctx = &releases.ctx;
    let apply = &release.spec.apply;
    let namespace = apply.addon.namespace.as_str();
    let selector = format!("{}={}", labels::ADDON_ID, apply.addon.addon_id);
    let api = Api::<AddonRelease>::namespaced(ctx.client.clone(), &ctx.namespace);
    let name = release.name_any();
    if release.metadata.deletion_timestamp.is_some() {
        let remaining = ctx
            .applier
            .prune(namespace, &selector, &BTreeSet::new())
            .await?;
        if !remaining.is_empty() {
            releases.report_remaining(&apply.addon.addon_id, apply.revision, &remaining);
            return Ok(Action::requeue(Duration::from_secs(1)));
        }
        forget(
            ctx,
            namespace,
            apply.addon.name.as_str(),
            apply.addon.name.as_str(),
        )
        .await?;
        releases.passes.forget(apply.addon.addon_id.as_str());
        releases.left.forget(apply.addon.addon_id.as_str());
        ctx.reporter.report(wire::AddonStatus {
            addon_id: apply.addon.addon_id.clone(),
            observed_revision: apply.revision,
            phase: wire::AddonPhase::Deleted,
            message: String::new(),
            export: None,
            git_commit: None,
            gitops_error: None,
            drift: Vec::new(),
            observed_at: chrono::Utc::now(),
        });
        kubenest_runtime::finalizer::release(
            &api,
            &name,
            release.finalizers(),
            finalizers::ADDON_RELEASE,
        )
        .await?;
        return Ok(Action::await_change());
    }
    kubenest_runtime::finalizer::add(&api, &name, release.finalizers(), finalizers::ADDON_RELEASE)
        .await?;
    let labels = BTreeMap::from([
        (
            labels::ADDON_ID.to_owned(),
            apply.addon.addon_id.to_string(),
        ),
        (
            labels::MANAGED_BY.to_owned(),
            labels::MANAGED_BY_AGENT.to_owned(),
        ),
        (
            labels::INSTANCE.to_owned(),
            apply.addon.name.as_str().to_owned(),
        ),
    ]);
    let target = AddonTarget {
        release: apply.addon.name.as_str().to_owned(),
        namespace,
        labels,
        export_secret: release_export_secret(&apply.addon),
        name: apply.addon.name.as_str(),
        definition: apply.definition.as_str(),
        chart: &apply.chart,
        values: &apply.values,
        exports: &apply.exports,
        third_party: false,
        force: releases.passes.due(apply.addon.addon_id.as_str()),
        paused: false,
    };
    let (phase, message, commit, git_error, keep, drift) = match super::apply(ctx, &target).await {
        Ok(outcome) => {
            // Told on each drifted object, as for an App's: found by whom, and applied back.
            let on = release.object_ref(&());
            let told = crate::drift_events::drift_events(
                namespace,
                &on,
                wire::DriftClass::Recoverable,
                &outcome.drift,
            );
            for (reference, event) in told {
                ctx.events.emit_to(&reference, [event]);
            }
            (
                if outcome.ready { "Ready" } else { "Installing" },
                outcome.message,
                outcome.git_commit,
                outcome.git_error,
                Some(outcome.objects),
                outcome.drift,
            )
        }
        Err(error) => ("Failed", error.to_string(), None, None, None, Vec::new()),
    };
    if let Some(keep) = &keep {
        ctx.applier.prune(namespace, &selector, keep).await?;
    }
    let old = release.status.clone().unwrap_or_default();
    let generation = release.metadata.generation;
    let said = ready_message(phase, &message, apply.revision);
    let ready = readiness(phase, &said);
    let conditions = with_ready(&old.conditions, ready, generation, chrono::Utc::now());
    let status = StatusPatch {
        status: AddonReleaseObserved {
            observed_generation: generation,
            phase,
            observed_revision: apply.revision,
            message: &message,
            git_commit: commit.as_deref(),
            gitops_error: git_error.as_deref(),
            drift: &drift,
            conditions: &conditions,
        },
    };
    let changed = old.phase.as_deref() != Some(phase)
        || old.observed_revision != Some(apply.revision)
        || old.message != message
        || old.git_commit != commit
        || old.gitops_error != git_error
        || old.drift != drift
        || old.observed_generation != generation
        || old.conditions != conditions;
    if changed {
        let updated = api
            .patch_status(&name, &PatchParams::default(), &Patch::Merge(&status))
            .await?;
        if let Some(event) = release_status(&updated) {
            ctx.reporter.report(event);
        }
    }
    Ok(match phase {
        // Drift just healed: look again soon, to report it cleared.
        _ if !drift.is_empty() => Action::requeue(Duration::from_millis(500)),
        // A record not written is tried again soon, though the addon runs.
        "Ready" if git_error.is_some() => Action::requeue(Duration::from_secs(10)),
        "Ready" => Action::requeue(Duration::from_secs(60)),
        _ => Action::requeue(Duration::from_secs(2)),
    })
}

/// What `Ready` says of an addon in `phase` (`Ready`, `Installing` or `Failed`).
fn readiness<'a>(phase: &str, message: &'a str) -> Readiness<'a> {
    match phase {
        "Ready" => Readiness::done("Ready", message),
        "Failed" => Readiness::failed("Failed", message),
        _ => Readiness::progressing(message),
    }
}

/// The Ready message: what the pass found, else the revision and phase.
fn ready_message(phase: &str, message: &str, revision: u32) -> String {
    if message.is_empty() {
        format!("revision {revision}: {phase}")
    } else {
        message.to_owned()
    }
}

fn error_policy(_release: Arc<AddonRelease>, error: &AddonError, _: Arc<Releases>) -> Action {
    tracing::warn!(%error, "addon release reconcile failed; retrying");
    Action::requeue(Duration::from_secs(5))
}

/// The AddonRelease of an object labelled with a standalone addon's id.
fn owner(namespace: &str, labels: &BTreeMap<String, String>) -> Option<ObjectRef<AddonRelease>> {
    let addon = labels.get(labels::ADDON_ID)?;
    Some(ObjectRef::new(&addon_release_name(addon)).within(namespace))
}

/// Runs the AddonRelease controller until `shutdown`. It is woken by its AddonReleases and by
/// the [`WAKING`](crate::apply::WAKING) objects of their addons as the applier's caches see
/// them change, so a field changed by hand is reported and put back at once.
pub async fn run(ctx: Arc<Context>, shutdown: impl Future<Output = ()> + Send + Sync + 'static) {
    let releases = Api::<AddonRelease>::namespaced(ctx.client.clone(), &ctx.namespace);
    let mut controller = Controller::new(releases, watcher::Config::default());
    for (api_version, kind) in crate::apply::WAKING {
        let Some((resource, changes)) = ctx.applier.changes(api_version, kind) else {
            continue;
        };
        let namespace = ctx.namespace.clone();
        controller = controller.watches_stream_with(
            changes.map(Ok),
            move |o: DynamicObject| owner(&namespace, o.labels()),
            resource,
        );
    }
    controller
        .graceful_shutdown_on(shutdown)
        .run(
            crate::metrics::metrics()
                .reconciles
                .measure("addon", reconcile),
            error_policy,
            Arc::new(Releases {
                ctx,
                passes: FullPasses::default(),
                left: LeftBehind::default(),
            }),
        )
        .for_each(|result| async move {
            if let Err(error) = result {
                tracing::debug!(%error, "addon release reconcile");
            }
        })
        .await;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ready_follows_the_phase_and_always_says_something() {
        let said = ready_message("Ready", "", 3);
        assert_eq!(said, "revision 3: Ready");
        assert_eq!(readiness("Ready", &said).status, "True");
        assert_eq!(readiness("Installing", "waiting").status, "Unknown");
        let failed = readiness("Failed", "chart not found");
        assert_eq!(
            (failed.status, failed.reason, failed.message),
            ("False", "Failed", "chart not found")
        );
    }
}
