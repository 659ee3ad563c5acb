//! Readiness of a live Deployment or StatefulSet for the revision it was last given (pure).
//!
//! A rolling update keeps the previous revision's pods serving while the new ones start, so
//! "enough pods are ready" says nothing about the new revision. A workload is ready for its
//! revision only when the controller has observed that generation, every desired replica is
//! updated, ready and available, and no replica of an older revision remains.

use serde_json::Value;

/// Where a workload's rollout stands.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Readiness {
    /// The workload runs its revision, fully.
    pub ready: bool,
    /// Replicas of the new revision known to be ready (a lower bound while old ones remain).
    pub ready_replicas: u32,
    pub desired_replicas: u32,
    /// Why it is not ready yet (empty when ready).
    pub message: String,
}

/// The readiness of `live`, a Deployment or StatefulSet as the API server returned it.
pub fn workload(live: &Value) -> Readiness {
    let number = |path: &str| {
        live.pointer(path)
            .and_then(Value::as_u64)
            .and_then(|n| u32::try_from(n).ok())
    };
    let desired = number("/spec/replicas").unwrap_or(1);
    let total = number("/status/replicas").unwrap_or(0);
    let ready = number("/status/readyReplicas").unwrap_or(0);
    let available = number("/status/availableReplicas").unwrap_or(0);
    let updated = number("/status/updatedReplicas").unwrap_or(0);
    let generation = live.pointer("/metadata/generation").and_then(Value::as_i64);
    let observed = live
        .pointer("/status/observedGeneration")
        .and_then(Value::as_i64);
    let current = generation.is_some() && observed >= generation;
    let old = total.saturating_sub(updated);
    // Old pods may be among the ready ones: only what exceeds them is surely new.
    let new_ready = ready.saturating_sub(old).min(updated).min(desired);
    let ready_now = current
        && updated >= desired
        && ready >= desired
        && available >= desired
        && old == 0
        && total == desired;
    let message = if ready_now {
        String::new()
    } else if !current {
        format!(
            "waiting for the new generation to be observed ({new_ready}/{desired} replicas ready)"
        )
    } else if old > 0 {
        format!(
            "rolling out: {updated}/{desired} replicas updated, {new_ready} of them ready, \
             {old} old replica(s) still running"
        )
    } else if total > desired {
        format!("scaling down: {total} replicas for {desired} desired")
    } else if available < ready.min(desired) {
        format!("{new_ready}/{desired} replicas ready, {available} available")
    } else {
        format!("{new_ready}/{desired} replicas ready")
    };
    Readiness {
        ready: ready_now,
        ready_replicas: if ready_now { desired } else { new_ready },
        desired_replicas: desired,
        message,
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn deployment(generation: i64, observed: i64, status: Value) -> Value {
        let mut status = status;
        status["observedGeneration"] = json!(observed);
        json!({"metadata": {"generation": generation}, "spec": {"replicas": 1}, "status": status})
    }

    #[test]
    fn an_old_pod_still_serving_does_not_make_the_new_revision_ready() {
        // A rolling update of one replica whose new pod never becomes Ready: the old pod keeps
        // readyReplicas at 1 and the new one makes updatedReplicas 1.
        let live = deployment(
            2,
            2,
            json!({"replicas": 2, "updatedReplicas": 1, "readyReplicas": 1, "availableReplicas": 1}),
        );
        let r = workload(&live);
        assert!(!r.ready, "{r:?}");
        assert_eq!(r.ready_replicas, 0);
        assert!(r.message.contains("1 old replica"), "{}", r.message);
    }

    #[test]
    fn a_workload_is_ready_once_every_replica_is_new_ready_and_available() {
        let done = json!({"replicas": 1, "updatedReplicas": 1, "readyReplicas": 1, "availableReplicas": 1});
        assert!(workload(&deployment(2, 2, done.clone())).ready);
        let unobserved = workload(&deployment(3, 2, done));
        assert!(!unobserved.ready);
        assert!(unobserved.message.contains("generation"));
        let unavailable = json!({"replicas": 1, "updatedReplicas": 1, "readyReplicas": 1});
        assert!(!workload(&deployment(2, 2, unavailable)).ready);
        let unready = json!({"replicas": 1, "updatedReplicas": 1, "availableReplicas": 0});
        let r = workload(&deployment(2, 2, unready));
        assert_eq!((r.ready, r.message.as_str()), (false, "0/1 replicas ready"));
    }

    #[test]
    fn a_workload_scaled_to_zero_is_ready_when_no_pod_is_left() {
        let mut live = deployment(2, 2, json!({"replicas": 1, "updatedReplicas": 1}));
        live["spec"]["replicas"] = json!(0);
        assert!(!workload(&live).ready, "one pod still terminating");
        live["status"] = json!({"observedGeneration": 2});
        let r = workload(&live);
        assert!(r.ready && r.desired_replicas == 0);
    }
}
