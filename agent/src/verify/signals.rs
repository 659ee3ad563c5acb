//! Pod signals (pure): what a revision's pods say of its health, read from their statuses.
//! Ready is not healthy: a pod that restarts, is OOM-killed or crash-loops after warm-up is
//! counted here whatever its readiness says now.

use serde_json::Value;

/// What the pods of one revision showed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PodSignals {
    pub pods: u32,
    /// Container restarts, summed over the pods.
    pub restarts: u32,
    /// Containers whose last (or current) termination was an OOM kill.
    pub oom_kills: u32,
    /// Containers waiting in `CrashLoopBackOff`.
    pub crash_loops: u32,
}

/// The signals of `pods` (pods as the API server returns them).
pub fn pod_signals<'a>(pods: impl IntoIterator<Item = &'a Value>) -> PodSignals {
    let mut signals = PodSignals::default();
    for pod in pods {
        signals.pods += 1;
        let statuses = ["/status/containerStatuses", "/status/initContainerStatuses"]
            .iter()
            .filter_map(|p| pod.pointer(p).and_then(Value::as_array))
            .flatten();
        for container in statuses {
            let restarts = container
                .get("restartCount")
                .and_then(Value::as_u64)
                .unwrap_or(0);
            signals.restarts += u32::try_from(restarts).unwrap_or(u32::MAX);
            let oom = ["/lastState/terminated/reason", "/state/terminated/reason"]
                .iter()
                .any(|p| container.pointer(p).and_then(Value::as_str) == Some("OOMKilled"));
            signals.oom_kills += u32::from(oom);
            let crash_loop = container
                .pointer("/state/waiting/reason")
                .and_then(Value::as_str)
                == Some("CrashLoopBackOff");
            signals.crash_loops += u32::from(crash_loop);
        }
    }
    signals
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn restarts_oom_kills_and_crash_loops_are_counted_per_container() {
        let pods = [
            json!({"status": {"containerStatuses": [
                {"name": "web", "restartCount": 2,
                 "lastState": {"terminated": {"reason": "OOMKilled", "exitCode": 137}},
                 "state": {"waiting": {"reason": "CrashLoopBackOff"}}},
                {"name": "side", "restartCount": 0, "state": {"running": {}}}
            ]}}),
            json!({"status": {"containerStatuses": [
                {"name": "web", "restartCount": 1,
                 "lastState": {"terminated": {"reason": "Error", "exitCode": 1}},
                 "state": {"running": {}}}
            ]}}),
            json!({"status": {"phase": "Pending"}}),
        ];
        assert_eq!(
            pod_signals(&pods),
            PodSignals {
                pods: 3,
                restarts: 3,
                oom_kills: 1,
                crash_loops: 1
            }
        );
    }
}
