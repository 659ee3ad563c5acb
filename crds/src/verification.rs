//! Verified deployments as a spec says them: an App's `verification`, or its organization's
//! default for Apps that give none.

/// The policies are the REST API's words too: one definition, in the API types.
pub use kubenest_api::verification::OnFailure;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// How each revision of an App is judged once it runs, and what is done with a bad one.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct VerificationSpec {
    /// Seconds the revision is watched once it runs (30 to 3600, default 180).
    #[serde(default = "default_window")]
    #[schemars(range(min = 30, max = 3600))]
    pub window_seconds: u32,
    /// What a `Failed` verdict does: `rollback` to the last revision that passed (the default),
    /// `hold` (nothing is changed; the App says why), or `none`.
    #[serde(default)]
    pub on_failure: OnFailure,
    /// The workloads' own Prometheus endpoint, judged beside the pods' signals when given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metrics: Option<MetricsSpec>,
}

fn default_window() -> u32 {
    180
}

/// Where the workloads' pods serve Prometheus metrics, and which of their series are read.
/// The names are optional, so Apps that give none keep their revision.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct MetricsSpec {
    /// The pods' port serving the metrics.
    #[schemars(range(min = 1, max = 65535))]
    pub port: u16,
    /// An absolute path: segments of letters, digits and `_~-` joined by single dots, never
    /// `..` (default `/metrics`).
    #[serde(default = "default_path")]
    #[schemars(
        length(min = 1, max = 256),
        regex(pattern = r"^(/\.?[A-Za-z0-9_~-]+(\.[A-Za-z0-9_~-]+)*)*/?$")
    )]
    pub path: String,
    /// The request counter, labelled by status code (`code`, `status` or `status_code`):
    /// a Prometheus metric name (default `http_requests_total`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(
        length(min = 1, max = 200),
        regex(pattern = kubenest_contracts::METRIC_NAME_PATTERN)
    )]
    pub requests_metric: Option<String>,
    /// The latency histogram's base name, whose `_bucket` series are read: a Prometheus
    /// metric name (default `http_request_duration_seconds`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(
        length(min = 1, max = 200),
        regex(pattern = kubenest_contracts::METRIC_NAME_PATTERN)
    )]
    pub latency_metric: Option<String>,
}

fn default_path() -> String {
    "/metrics".into()
}

impl From<&MetricsSpec> for kubenest_contracts::MetricsEndpoint {
    /// The endpoint as `app.deploy` carries it to the agent, names left out staying out.
    fn from(spec: &MetricsSpec) -> Self {
        Self {
            port: spec.port,
            path: spec.path.clone(),
            requests_metric: spec.requests_metric.clone(),
            latency_metric: spec.latency_metric.clone(),
        }
    }
}

/// The verdict on a revision, as the agent reported it and the App shows it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct VerificationStatus {
    /// The revision judged.
    pub revision: String,
    /// `Passed`, `Failed` or `Inconclusive`.
    pub verdict: String,
    /// Why, in a sentence.
    pub reason: String,
    /// Seconds the revision was watched.
    pub window_seconds: u32,
    /// When the watch started (RFC 3339).
    pub started_at: String,
    /// When the verdict was given (RFC 3339).
    pub observed_at: String,
    /// The signals measured.
    #[serde(default)]
    pub signals: Vec<VerificationSignal>,
    /// What the controllers did with it: `rolled back to deployment …`, `held`, or why they
    /// did nothing (`automation stopped: …`); unset until they acted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub action: Option<String>,
}

/// One measured signal of a verdict.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct VerificationSignal {
    /// The signal, e.g. `error_rate`.
    pub name: String,
    /// What the revision measured.
    pub value: f64,
    /// What the last revision that passed measured.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub baseline: Option<f64>,
    /// The value past which the signal fails.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub threshold: Option<f64>,
    /// The signal failed the revision.
    pub failed: bool,
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn metric_names_reach_the_wire_as_given_and_stay_out_when_not() {
        let named: MetricsSpec = serde_json::from_value(json!(
            {"port": 9090, "requestsMetric": "shop_requests_total", "latencyMetric": "shop_seconds"}
        ))
        .unwrap();
        let wire = kubenest_contracts::MetricsEndpoint::from(&named);
        assert_eq!(
            serde_json::to_value(&wire).unwrap(),
            json!({"port": 9090, "path": "/metrics", "requests_metric": "shop_requests_total",
                   "latency_metric": "shop_seconds"})
        );
        let plain: MetricsSpec = serde_json::from_value(json!({"port": 9090})).unwrap();
        assert_eq!(
            serde_json::to_value(&plain).unwrap(),
            json!({"port": 9090, "path": "/metrics"}),
            "an App that names none keeps its spec, so its revision"
        );
        let wire = kubenest_contracts::MetricsEndpoint::from(&plain);
        assert_eq!(
            (wire.requests(), wire.latency()),
            ("http_requests_total", "http_request_duration_seconds")
        );
    }
}
