//! Verified deployments, on the cluster: every revision of an App that asks for it
//! (`app.deploy`'s `verification`) is watched for a window once it runs and judged against the
//! window of the last revision that passed ([`baseline_after`]), then `verification.result`
//! tells the verdict with its numbers.
//! Nothing leaves the cluster but the verdict.
//!
//! A loop of its own ([`run`]) looks at every StackDeploy each [`TICK`]: it reads the pods of
//! the revision (those of the App's workloads made since its rollout started) and, when the App
//! declares a metrics endpoint, scrapes each of them through the API server's pod proxy. Its
//! progress is kept in the StackDeploy's `status.verification` ([`Verifying`]), so a restarted
//! agent carries a window on; the StackDeploy controller's status writes never touch it.
//!
//! - `signals` (pure): restarts, OOM kills, crash loops and readiness flaps from pod statuses;
//! - `metrics` (pure): the HTTP series the App names (or the standard ones) of a scrape, and a
//!   window between two scrapes;
//! - `judge` (pure): the verdict;
//! - `observe`: the pods and their scrapes, read through the API server.

mod judge;
mod metrics;
mod observe;
mod signals;

use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, Utc};
use futures::StreamExt;
use kube::api::{Api, Patch, PatchParams};
use kube::runtime::reflector::{self, Store};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Resource, ResourceExt};
use kubenest_contracts as wire;
use kubenest_runtime::events::{EventType, event};
use serde::{Deserialize, Serialize};
use serde_json::json;

use crate::context::Context;
use crate::crd::StackDeploy;
pub use judge::{Judgement, Measured, Seen, judge};
pub use metrics::{Scrape, Series, Window};
use observe::observe;
pub use signals::{PodReady, PodSignals, pod_signals, readiness, readiness_flaps};

/// How often each verification looks again.
pub const TICK: Duration = Duration::from_secs(5);

/// A revision's verification as its StackDeploy keeps it. Written whole by a merge patch, so
/// every field is written, `null` when empty (a field left out would keep the previous
/// revision's).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Verifying {
    pub revision: String,
    pub started_at: DateTime<Utc>,
    /// The revision's restarts when its window started (counted from there).
    pub restarts_at_start: u32,
    /// Each pod's `Ready` at the last look, to count flaps against the next (a list, so the
    /// merge patch replaces it whole).
    #[serde(default)]
    pub readiness: Vec<PodReady>,
    /// The readiness flaps counted since the window started.
    #[serde(default)]
    pub readiness_flaps: u32,
    /// The sum of the revision's scrapes when its window started.
    #[serde(default)]
    pub scrape_at_start: Option<Scrape>,
    /// What the window of the last revision that passed measured.
    #[serde(default)]
    pub baseline: Option<Measured>,
    /// This revision's numbers once judged: the next one's baseline.
    #[serde(default)]
    pub measured: Option<Measured>,
    #[serde(default)]
    pub result: Option<wire::VerificationResult>,
    /// The result was queued for the hub.
    #[serde(default)]
    pub delivered: bool,
}

/// Runs the verifications until `shutdown`.
pub async fn run(ctx: Arc<Context>, shutdown: impl Future<Output = ()> + Send + Sync + 'static) {
    let (held, writer) = reflector::store();
    let watch = watcher(
        Api::<StackDeploy>::namespaced(ctx.client.clone(), &ctx.namespace),
        watcher::Config::default(),
    )
    .default_backoff()
    .reflect(writer)
    .for_each(|_| async {});
    let ticks = async {
        let mut interval = tokio::time::interval(TICK);
        loop {
            interval.tick().await;
            tick(&ctx, &held).await;
        }
    };
    tokio::select! {
        () = shutdown => {}
        () = watch => {}
        () = ticks => {}
    }
}

async fn tick(ctx: &Context, held: &Store<StackDeploy>) {
    for stack in held.state() {
        if let Err(error) = verify(ctx, &stack).await {
            tracing::warn!(stack = %stack.name_any(), %error, "verification step failed; trying again");
        }
    }
}

/// One step of `stack`'s verification.
async fn verify(ctx: &Context, stack: &StackDeploy) -> Result<(), kube::Error> {
    let deploy = &stack.spec.deploy;
    let Some(policy) = &deploy.verification else {
        return Ok(());
    };
    let status = stack.status.clone().unwrap_or_default();
    let kept: Option<Verifying> = match status.verification.clone() {
        None => None,
        Some(value) => match serde_json::from_value(value) {
            Ok(kept) => Some(kept),
            Err(error) => {
                tracing::warn!(%error, "a verification's kept state is unreadable; starting again");
                None
            }
        },
    };
    let now = Utc::now();
    if stack.metadata.deletion_timestamp.is_some() || deploy.paused {
        return Ok(());
    }
    match kept {
        Some(mut state) if state.revision == deploy.revision => {
            if state.result.is_some() {
                if !state.delivered {
                    deliver(ctx, stack, &mut state).await?;
                }
                return Ok(());
            }
            let observed = observe(ctx, stack, policy.metrics.as_ref(), &status).await?;
            // Flaps are counted between looks, so what this one saw is kept when it changed.
            let flaps = readiness_flaps(&state.readiness, &observed.ready);
            let ready_changed = state.readiness != observed.ready;
            state.readiness_flaps = state.readiness_flaps.saturating_add(flaps);
            state.readiness = observed.ready;
            if policy.metrics.is_some() && state.scrape_at_start.is_none() {
                // The pods did not answer when the window opened: it counts from their first
                // answer, rather than ending Inconclusive for a slow start.
                if observed.scrape.is_some() {
                    state.scrape_at_start = observed.scrape;
                    return keep(ctx, stack, &state).await;
                }
            }
            let ended = now
                >= state.started_at + chrono::Duration::seconds(i64::from(policy.window_seconds));
            let pods = PodSignals {
                restarts: observed
                    .pods
                    .restarts
                    .saturating_sub(state.restarts_at_start),
                readiness_flaps: state.readiness_flaps,
                ..observed.pods
            };
            let metrics =
                policy
                    .metrics
                    .as_ref()
                    .map(|_| match (&state.scrape_at_start, &observed.scrape) {
                        (Some(start), Some(now)) => Ok(metrics::between(start, now)),
                        _ => Err(()),
                    });
            let seen = Seen {
                pods,
                metrics,
                ended,
            };
            let Some(judged) = judge(&seen, state.baseline.as_ref(), policy.window_seconds) else {
                return if ready_changed {
                    keep(ctx, stack, &state).await
                } else {
                    Ok(())
                };
            };
            state.measured = Some(judged.measured);
            state.result = Some(wire::VerificationResult {
                app_id: deploy.app.app_id.clone(),
                revision: deploy.revision.clone(),
                verdict: judged.verdict,
                reason: judged.reason.chars().take(1024).collect(),
                window_seconds: policy.window_seconds,
                started_at: state.started_at,
                signals: judged.signals.clone(),
                observed_at: now,
            });
            tell(ctx, stack, &judged);
            deliver(ctx, stack, &mut state).await
        }
        previous => {
            // A window starts once the revision runs.
            let running = status.phase.as_deref() == Some("Running")
                && status.observed_revision.as_deref() == Some(deploy.revision.as_str());
            if !running {
                return Ok(());
            }
            let baseline = previous.and_then(baseline_after);
            let observed = observe(ctx, stack, policy.metrics.as_ref(), &status).await?;
            let state = Verifying {
                revision: deploy.revision.clone(),
                started_at: now,
                restarts_at_start: observed.pods.restarts,
                readiness: observed.ready,
                readiness_flaps: 0,
                scrape_at_start: observed.scrape,
                baseline,
                measured: None,
                result: None,
                delivered: false,
            };
            keep(ctx, stack, &state).await
        }
    }
}

/// The baseline of the revision after `previous`: what `previous` measured if it passed, else
/// the baseline it was judged against (a failed or inconclusive revision is no measure of
/// good: a rollback to a revision as broken must not pass against it).
fn baseline_after(previous: Verifying) -> Option<Measured> {
    let passed = previous
        .result
        .as_ref()
        .is_some_and(|r| r.verdict == wire::Verdict::Passed);
    if passed {
        previous.measured
    } else {
        previous.baseline
    }
}

/// Writes `state` into the StackDeploy's status.
async fn keep(ctx: &Context, stack: &StackDeploy, state: &Verifying) -> Result<(), kube::Error> {
    let api = Api::<StackDeploy>::namespaced(ctx.client.clone(), &ctx.namespace);
    let patch = json!({"status": {"verification": state}});
    api.patch_status(
        &stack.name_any(),
        &PatchParams::default(),
        &Patch::Merge(&patch),
    )
    .await?;
    Ok(())
}

/// Queues the result for the hub and keeps whether it was.
async fn deliver(
    ctx: &Context,
    stack: &StackDeploy,
    state: &mut Verifying,
) -> Result<(), kube::Error> {
    if let Some(result) = &state.result {
        state.delivered = ctx.reporter.offer(result.clone());
    }
    keep(ctx, stack, state).await
}

/// The verdict as a Kubernetes Event on the StackDeploy.
fn tell(ctx: &Context, stack: &StackDeploy, judged: &Judgement) {
    let (reason, warning) = kubenest_crds::names::reasons::verdict(judged.verdict);
    let type_ = if warning {
        EventType::Warning
    } else {
        EventType::Normal
    };
    let note = format!("revision {}: {}", stack.spec.deploy.revision, judged.reason);
    let event = event(type_, reason, note, "Verify");
    ctx.events.emit_to(&stack.object_ref(&()), [event]);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn judged(verdict: wire::Verdict, measured: f64, baseline: f64) -> Verifying {
        let now = Utc::now();
        let numbers = |ratio| Measured {
            error_ratio: Some(ratio),
            ..Measured::default()
        };
        Verifying {
            revision: "r2".into(),
            started_at: now,
            restarts_at_start: 0,
            readiness: Vec::new(),
            readiness_flaps: 0,
            scrape_at_start: None,
            baseline: Some(numbers(baseline)),
            measured: Some(numbers(measured)),
            result: Some(wire::VerificationResult {
                app_id: wire::Id::new("a1"),
                revision: "r2".into(),
                verdict,
                reason: String::new(),
                window_seconds: 30,
                started_at: now,
                signals: Vec::new(),
                observed_at: now,
            }),
            delivered: true,
        }
    }

    #[test]
    fn only_a_revision_that_passed_becomes_the_next_ones_baseline() {
        let passed = baseline_after(judged(wire::Verdict::Passed, 0.01, 0.0)).unwrap();
        assert_eq!(passed.error_ratio, Some(0.01));
        // The rollback after a failed revision is judged against what was good before it.
        let failed = baseline_after(judged(wire::Verdict::Failed, 0.3, 0.0)).unwrap();
        assert_eq!(failed.error_ratio, Some(0.0));
        let unsure = baseline_after(judged(wire::Verdict::Inconclusive, 0.0, 0.02)).unwrap();
        assert_eq!(unsure.error_ratio, Some(0.02));
    }

    #[test]
    fn a_new_window_writes_every_field_so_the_previous_revisions_verdict_goes() {
        let fresh = Verifying {
            revision: "r2".into(),
            started_at: Utc::now(),
            restarts_at_start: 0,
            readiness: vec![PodReady {
                uid: "u1".into(),
                ready: true,
                since: None,
            }],
            readiness_flaps: 0,
            scrape_at_start: None,
            baseline: None,
            measured: None,
            result: None,
            delivered: false,
        };
        let written = serde_json::to_value(&fresh).unwrap();
        for key in ["scrapeAtStart", "baseline", "measured", "result"] {
            assert!(
                written[key].is_null() && written.get(key).is_some(),
                "{key}: {written}"
            );
        }
        // The pods' readiness is a list: a merge patch replaces it, dropping pods gone.
        assert_eq!(
            written["readiness"],
            json!([{"uid": "u1", "ready": true, "since": null}])
        );
        assert_eq!(written["readinessFlaps"], 0);
        // A state kept before flaps were counted reads on.
        let mut older = written.clone();
        for key in ["readiness", "readinessFlaps"] {
            older.as_object_mut().unwrap().remove(key);
        }
        let read: Verifying = serde_json::from_value(older).unwrap();
        assert_eq!((read.readiness.len(), read.readiness_flaps), (0, 0));
    }
}
