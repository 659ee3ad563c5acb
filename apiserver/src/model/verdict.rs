//! What the API answers about a verdict on a verified revision (the App's last, and each
//! deployment's in its history).

pub use kubenest_api::verification::{SignalView, VerdictView};

use kubenest_crds::verification::VerificationStatus;

/// The verdict of a resource's status as the API answers it.
pub fn verdict_view(v: VerificationStatus) -> VerdictView {
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

/// The verdict a history row keeps (the App's status as it was written then), if readable.
pub fn verdict_of_row(kept: Option<&serde_json::Value>) -> Option<VerdictView> {
    let status: VerificationStatus = serde_json::from_value(kept?.clone()).ok()?;
    Some(verdict_view(status))
}
