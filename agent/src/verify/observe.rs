//! What a revision's pods show (IO): their statuses, read through the API server, and, when
//! the App declares a metrics endpoint, a scrape of each through the API server's pod proxy,
//! read by the series the App names.

use std::collections::BTreeSet;

use chrono::Utc;
use k8s_openapi::api::core::v1::Pod;
use kube::ResourceExt;
use kube::api::{Api, ListParams};
use kubenest_contracts as wire;
use kubenest_crds::names::labels;

use super::metrics::{self, Scrape, Series};
use super::signals::{PodReady, PodSignals, pod_signals, readiness};
use crate::context::Context;
use crate::crd::{StackDeploy, StackDeployStatus};

/// The longest one scrape may take.
const SCRAPE_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(5);
/// The most of a scrape read (a metrics page larger than this is no standard one).
const SCRAPE_MAX_BYTES: usize = 4 * 1024 * 1024;

/// What the revision's pods show now.
pub(super) struct Observed {
    pub pods: PodSignals,
    /// Each running pod's `Ready`, by uid, to count flaps against the next look.
    pub ready: Vec<PodReady>,
    /// The sum of the pods' scrapes; `None` when no metrics are declared or none answered.
    pub scrape: Option<Scrape>,
}

/// Reads the pods of `stack`'s revision and, when `endpoint` is given, scrapes them.
pub(super) async fn observe(
    ctx: &Context,
    stack: &StackDeploy,
    endpoint: Option<&wire::MetricsEndpoint>,
    status: &StackDeployStatus,
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
    let ready = readiness(&values);
    let scrape = match endpoint {
        None => None,
        Some(endpoint) => scrape_all(ctx, namespace, &pods, endpoint).await,
    };
    Ok(Observed {
        pods: signals,
        ready,
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
    let series = Series {
        requests: endpoint.requests(),
        latency: endpoint.latency(),
    };
    metrics::read(&text, series)
}
