//! Verified deployments: how the agent judges a revision once it runs ([`Verification`], part
//! of `app.deploy`), and its verdict ([`VerificationResult`], `verification.result`).
//!
//! The agent watches the revision's pods through a window and, when the App declares a metrics
//! endpoint, scrapes it through the Kubernetes API; each signal is compared with the previous
//! revision's baseline. Nothing leaves the cluster but the verdict and its numbers.

use chrono::{DateTime, Utc};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::common::Id;

/// How a revision is judged after it runs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct Verification {
    /// How long the revision is watched once it runs.
    #[schemars(range(min = 30, max = 3600))]
    pub window_seconds: u32,
    /// The App's own Prometheus endpoint on its workloads' pods, if it declares one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metrics: Option<MetricsEndpoint>,
}

/// The pattern of a Prometheus metric name, the exposition format's own. The REST API, the
/// CRDs and the hub's schemas all take names by it.
pub const METRIC_NAME_PATTERN: &str = r"^[a-zA-Z_:][a-zA-Z0-9_:]*$";

/// The longest metric name taken.
pub const MAX_METRIC_NAME: usize = 200;

/// The request counter read when an App names none.
pub const DEFAULT_REQUESTS_METRIC: &str = "http_requests_total";

/// The latency histogram read when an App names none.
pub const DEFAULT_LATENCY_METRIC: &str = "http_request_duration_seconds";

/// Where a workload's pods serve Prometheus metrics, and which of their series are read.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct MetricsEndpoint {
    #[schemars(range(min = 1, max = 65535))]
    pub port: u16,
    /// An absolute path: segments of letters, digits and `_~-` joined by single dots, never `..`
    /// (it becomes part of a proxy URL: it may not climb out of the pod's endpoint).
    #[schemars(
        length(min = 1, max = 256),
        regex(pattern = r"^(/\.?[A-Za-z0-9_~-]+(\.[A-Za-z0-9_~-]+)*)*/?$")
    )]
    pub path: String,
    /// The request counter, labelled by status code (`code`, `status` or `status_code`):
    /// `http_requests_total` when not given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 200), regex(pattern = METRIC_NAME_PATTERN))]
    pub requests_metric: Option<String>,
    /// The latency histogram's base name, whose `_bucket` series are read:
    /// `http_request_duration_seconds` when not given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 200), regex(pattern = METRIC_NAME_PATTERN))]
    pub latency_metric: Option<String>,
}

impl MetricsEndpoint {
    /// The request counter read: the App's, else the default.
    pub fn requests(&self) -> &str {
        self.requests_metric
            .as_deref()
            .unwrap_or(DEFAULT_REQUESTS_METRIC)
    }

    /// The latency histogram read: the App's, else the default.
    pub fn latency(&self) -> &str {
        self.latency_metric
            .as_deref()
            .unwrap_or(DEFAULT_LATENCY_METRIC)
    }
}

/// What a verification concluded.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
pub enum Verdict {
    Passed,
    Failed,
    /// Nothing to judge by (e.g. no requests observed): never taken for a success.
    Inconclusive,
}

impl Verdict {
    /// The verdict as statuses and the history spell it.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Passed => "Passed",
            Self::Failed => "Failed",
            Self::Inconclusive => "Inconclusive",
        }
    }
}

/// One measured signal: its value over the window, the previous revision's, and the threshold
/// it was judged against.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Signal {
    /// e.g. `restarts`, `oom_kills`, `crash_loops`, `readiness_flaps`, `error_ratio`,
    /// `p95_latency_seconds`, `requests`.
    #[schemars(length(min = 1, max = 64), regex(pattern = r"^[a-z0-9_]+$"))]
    pub name: String,
    pub value: f64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub baseline: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub threshold: Option<f64>,
    /// The signal alone fails the revision.
    pub failed: bool,
}

/// The verdict on one revision of an App.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct VerificationResult {
    pub app_id: Id,
    #[schemars(length(min = 1, max = 64), regex(pattern = r"^[a-z0-9]+$"))]
    pub revision: String,
    pub verdict: Verdict,
    /// Why, for people: the failing signal with its numbers, or what could not be observed.
    #[schemars(length(max = 1024))]
    pub reason: String,
    pub window_seconds: u32,
    pub started_at: DateTime<Utc>,
    #[schemars(length(max = 16))]
    pub signals: Vec<Signal>,
    pub observed_at: DateTime<Utc>,
}
