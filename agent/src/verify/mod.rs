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
//! - `signals` (pure): restarts, OOM kills and crash loops from pod statuses;
//! - `metrics` (pure): the standard HTTP series of a scrape, and a window between two scrapes;
//! - `judge` (pure): the verdict.

mod judge;
mod metrics;
mod signals;

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, Utc};
use futures::StreamExt;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, ListParams, Patch, PatchParams};
use kube::runtime::reflector::{self, Store};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Resource, ResourceExt};
use kubenest_contracts as wire;
use kubenest_crds::names::labels;
use kubenest_runtime::events::{Event, EventType};
use serde::{Deserialize, Serialize};
use serde_json::json;

use crate::context::Context;
use crate::crd::StackDeploy;
pub use judge::{Judgement, Measured, Seen, judge};
pub use metrics::{Scrape, Window};
pub use signals::{PodSignals, pod_signals};

/// How often each verification looks again.
pub const TICK: Duration = Duration::from_secs(5);
/// The longest one scrape may take.
const SCRAPE_TIMEOUT: Duration = Duration::from_secs(5);
/// The most of a scrape read (a metrics page larger than this is no standard one).
const SCRAPE_MAX_BYTES: usize = 4 * 1024 * 1024;

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
                return Ok(());
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

/// What the revision's pods show now.
struct Observed {
    pods: PodSignals,
    /// The sum of the pods' scrapes; `None` when no metrics are declared or none answered.
    scrape: Option<Scrape>,
}

async fn observe(
    ctx: &Context,
    stack: &StackDeploy,
    endpoint: Option<&wire::MetricsEndpoint>,
    status: &crate::crd::StackDeployStatus,
) -> Result<Observed, kube::Error> {
    let deploy = &stack.spec.deploy;
    let namespace = deploy.app.namespace.as_str();
    let workloads: BTreeSet<&str> = deploy
        .components
        .iter()
        .filter_map(|c| match c {
            wire::Component::Workload(w) => Some(w.name.as_str()),
            wire::Component::Addon(_) => None,
        })
        .collect();
    let since = status.rollout_started_at.unwrap_or_else(Utc::now);
    let api = Api::<Pod>::namespaced(ctx.client.clone(), namespace);
    let listed = api
        .list(&ListParams::default().labels(&format!("{}={}", labels::APP_ID, deploy.app.app_id)))
        .await?;
    // The revision's pods: its workloads', made since its rollout started (a second's slack
    // for clocks that read the same instant differently).
    let pods: Vec<Pod> = listed
        .items
        .into_iter()
        .filter(|p| {
            p.labels()
                .get(labels::COMPONENT)
                .is_some_and(|c| workloads.contains(c.as_str()))
                && p.metadata
                    .creation_timestamp
                    .as_ref()
                    .is_some_and(|t| t.0.as_second() + 1 >= since.timestamp())
        })
        .collect();
    let values: Vec<serde_json::Value> = pods
        .iter()
        .filter_map(|p| serde_json::to_value(p).ok())
        .collect();
    let signals = pod_signals(&values);
    let scrape = match endpoint {
        None => None,
        Some(endpoint) => scrape_all(ctx, namespace, &pods, endpoint).await,
    };
    Ok(Observed {
        pods: signals,
        scrape,
    })
}

/// The sum of the running pods' scrapes; `None` when none answered.
async fn scrape_all(
    ctx: &Context,
    namespace: &str,
    pods: &[Pod],
    endpoint: &wire::MetricsEndpoint,
) -> Option<Scrape> {
    let mut sum: Option<Scrape> = None;
    for pod in pods {
        let running = pod.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running");
        if !running {
            continue;
        }
        match scrape(ctx, namespace, &pod.name_any(), endpoint).await {
            Ok(one) => {
                let total = sum.get_or_insert_with(Scrape::default);
                total.requests += one.requests;
                total.errors += one.errors;
                for (le, count) in one.buckets {
                    match total.buckets.iter_mut().find(|(l, _)| *l == le) {
                        Some(bucket) => bucket.1 += count,
                        None => total.buckets.push((le, count)),
                    }
                }
                total.buckets.sort_by(|a, b| a.0.total_cmp(&b.0));
            }
            Err(error) => {
                tracing::debug!(pod = %pod.name_any(), %error, "metrics scrape failed");
            }
        }
    }
    sum
}

/// One pod's metrics, through the API server's pod proxy. The path is the wire's (an absolute
/// path of `[A-Za-z0-9._~/-]`), so it cannot leave the pod's endpoint.
async fn scrape(
    ctx: &Context,
    namespace: &str,
    pod: &str,
    endpoint: &wire::MetricsEndpoint,
) -> Result<Scrape, String> {
    if endpoint.path.contains("..") {
        return Err("a metrics path with `..`".into());
    }
    let url = format!(
        "/api/v1/namespaces/{namespace}/pods/{pod}:{}/proxy{}",
        endpoint.port, endpoint.path
    );
    let request = http::Request::get(url)
        .body(Vec::new())
        .map_err(|e| e.to_string())?;
    let text = tokio::time::timeout(SCRAPE_TIMEOUT, ctx.client.request_text(request))
        .await
        .map_err(|_| "the scrape timed out".to_owned())?
        .map_err(|e| e.to_string())?;
    if text.len() > SCRAPE_MAX_BYTES {
        return Err("the metrics page is too large".into());
    }
    metrics::read(&text)
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
    let (type_, reason) = match judged.verdict {
        wire::Verdict::Passed => (EventType::Normal, "VerificationPassed"),
        wire::Verdict::Failed => (EventType::Warning, "VerificationFailed"),
        wire::Verdict::Inconclusive => (EventType::Warning, "VerificationInconclusive"),
    };
    let event = Event {
        type_,
        reason: reason.into(),
        note: Some(format!(
            "revision {}: {}",
            stack.spec.deploy.revision, judged.reason
        )),
        action: "Verify".into(),
        secondary: None,
    };
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
    }
}
