//! What the API answers about a verdict on a verified revision (the App's last, and each
//! deployment's in its history).

use kubenest_crds::verification::VerificationStatus;
use schemars::JsonSchema;
use serde::Serialize;

/// The verdict on a revision once it ran, with its numbers and what kubenest did with it.
#[derive(Debug, Serialize, JsonSchema)]
pub struct VerdictView {
    pub revision: String,
    /// `Passed`, `Failed` or `Inconclusive`.
    pub verdict: String,
    /// Why: the failing signal with its numbers, or what could not be observed.
    pub reason: String,
    pub window_seconds: u32,
    pub started_at: String,
    pub observed_at: String,
    pub signals: Vec<SignalView>,
    /// What was done with a `Failed` verdict (`rolling back to deployment …`, `held: …`,
    /// `automation stopped: …`); `null` otherwise or before it was acted on.
    pub action: Option<String>,
}

/// One measured signal of a verdict.
#[derive(Debug, Serialize, JsonSchema)]
pub struct SignalView {
    /// `restarts`, `oom_kills`, `crash_loops`, `readiness_flaps`, `requests`, `error_ratio`,
    /// `p95_latency_seconds`.
    pub name: String,
    pub value: f64,
    /// The previous revision's value.
    pub baseline: Option<f64>,
    pub threshold: Option<f64>,
    pub failed: bool,
}

impl From<VerificationStatus> for VerdictView {
    fn from(v: VerificationStatus) -> Self {
        VerdictView {
            revision: v.revision,
            verdict: v.verdict,
            reason: v.reason,
            window_seconds: v.window_seconds,
            started_at: v.started_at,
            observed_at: v.observed_at,
            signals: v
                .signals
                .into_iter()
                .map(|s| SignalView {
                    name: s.name,
                    value: s.value,
                    baseline: s.baseline,
                    threshold: s.threshold,
                    failed: s.failed,
                })
                .collect(),
            action: v.action,
        }
    }
}

impl VerdictView {
    /// The verdict a history row keeps (the App's status as it was written then), if readable.
    pub fn of_row(kept: Option<&serde_json::Value>) -> Option<Self> {
        let status: VerificationStatus = serde_json::from_value(kept?.clone()).ok()?;
        Some(status.into())
    }
}
