//! Pod signals (pure): what a revision's pods say of its health, read from their statuses.
//! Ready is not healthy: a pod that restarts, is OOM-killed or crash-loops after warm-up is
//! counted here whatever its readiness says now.
//!
//! Readiness flaps need two looks: [`readiness`] reads each pod's `Ready` condition, kept
//! between polls, and [`readiness_flaps`] counts what changed since the last look.

use serde::{Deserialize, Serialize};
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
    /// Times a pod's `Ready` went from true to false while the pod still ran (see
    /// [`readiness_flaps`]); the verification loop counts them across polls.
    pub readiness_flaps: u32,
}

/// A pod's `Ready` condition as one poll saw it, kept until the next.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PodReady {
    pub uid: String,
    pub ready: bool,
    /// The condition's `lastTransitionTime`, as the API server gave it.
    #[serde(default)]
    pub since: Option<String>,
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

/// The `Ready` condition of each of `pods` that still runs, by uid. A pod being deleted is
/// left out (its readiness falls with its deletion, no flap), and so are a finished pod and
/// one whose kubelet has not yet said whether it is ready.
pub fn readiness<'a>(pods: impl IntoIterator<Item = &'a Value>) -> Vec<PodReady> {
    let mut seen: Vec<PodReady> = pods
        .into_iter()
        .filter(|pod| pod.pointer("/metadata/deletionTimestamp").is_none())
        .filter(|pod| {
            let phase = pod.pointer("/status/phase").and_then(Value::as_str);
            !matches!(phase, Some("Succeeded" | "Failed"))
        })
        .filter_map(|pod| {
            let uid = pod.pointer("/metadata/uid").and_then(Value::as_str)?;
            let condition = pod
                .pointer("/status/conditions")
                .and_then(Value::as_array)?
                .iter()
                .find(|c| c.get("type").and_then(Value::as_str) == Some("Ready"))?;
            Some(PodReady {
                uid: uid.to_owned(),
                ready: condition.get("status").and_then(Value::as_str) == Some("True"),
                since: condition
                    .get("lastTransitionTime")
                    .and_then(Value::as_str)
                    .map(str::to_owned),
            })
        })
        .collect();
    seen.sort_by(|a, b| a.uid.cmp(&b.uid));
    seen
}

/// The readiness flaps between two polls: for each pod seen by both, one when its `Ready` went
/// from true to false, or when it changed since `before` and came back to the same value (the
/// condition's transition time moved: a flap quicker than the poll). The transition time is
/// compared with the one kept, never with the agent's clock, so a node's clock ahead of the
/// agent's does not count one transition twice. A pod seen once, or no longer, counts nothing.
pub fn readiness_flaps(before: &[PodReady], now: &[PodReady]) -> u32 {
    let flapped = |now: &PodReady| {
        let Some(was) = before.iter().find(|b| b.uid == now.uid) else {
            return false;
        };
        let moved = was.since.is_some() && now.since.is_some() && was.since != now.since;
        (was.ready && !now.ready) || (was.ready == now.ready && moved)
    };
    let count = now.iter().filter(|pod| flapped(pod)).count();
    u32::try_from(count).unwrap_or(u32::MAX)
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
                crash_loops: 1,
                readiness_flaps: 0
            }
        );
    }

    fn pod(uid: &str, ready: &str, since: &str) -> Value {
        json!({"metadata": {"uid": uid}, "status": {"phase": "Running", "conditions": [
            {"type": "PodScheduled", "status": "True", "lastTransitionTime": "2026-01-01T00:00:00Z"},
            {"type": "Ready", "status": ready, "lastTransitionTime": since}
        ]}})
    }

    const T0: &str = "2026-01-01T00:00:10Z";
    const T1: &str = "2026-01-01T00:00:12Z";
    const T2: &str = "2026-01-01T00:00:14Z";

    #[test]
    fn ready_going_false_while_the_pod_runs_is_a_flap() {
        let before = readiness(&[pod("a", "True", T0), pod("b", "True", T0)]);
        let now = readiness(&[pod("a", "False", T1), pod("b", "True", T0)]);
        assert_eq!(readiness_flaps(&before, &now), 1);
        // Coming back is no second flap, nor is staying down.
        let back = readiness(&[pod("a", "True", T2), pod("b", "True", T0)]);
        assert_eq!(readiness_flaps(&now, &back), 0);
        assert_eq!(readiness_flaps(&now, &now), 0);
    }

    #[test]
    fn a_flap_quicker_than_the_poll_is_seen_by_its_transition_time() {
        // Down, up and down again between two polls.
        let before = readiness(&[pod("a", "False", T0)]);
        let now = readiness(&[pod("a", "False", T2)]);
        assert_eq!(readiness_flaps(&before, &now), 1);
        // Down and up again between two polls.
        let before = readiness(&[pod("a", "True", T0)]);
        let now = readiness(&[pod("a", "True", T2)]);
        assert_eq!(readiness_flaps(&before, &now), 1);
        // Down, with a transition time the agent's clock would call the future: counted once.
        let before = readiness(&[pod("a", "True", T0)]);
        let down = readiness(&[pod("a", "False", T2)]);
        assert_eq!(readiness_flaps(&before, &down), 1);
        assert_eq!(readiness_flaps(&down, &down), 0);
    }

    #[test]
    fn a_deleted_finished_or_new_pod_is_no_flap() {
        let before = readiness(&[pod("a", "True", T0), pod("b", "False", T0)]);
        let mut deleting = pod("a", "False", T1);
        deleting["metadata"]["deletionTimestamp"] = json!(T1);
        let mut finished = pod("b", "False", T1);
        finished["status"]["phase"] = json!("Succeeded");
        let now = readiness(&[deleting, finished, pod("c", "False", T1)]);
        assert_eq!(now.len(), 1, "{now:?}");
        assert_eq!(readiness_flaps(&before, &now), 0);
        // A pod whose kubelet has not yet reported a Ready condition is not read.
        let starting = json!({"metadata": {"uid": "d"}, "status": {"phase": "Pending"}});
        assert!(readiness(&[starting]).is_empty());
        // Kept as JSON between polls, whole.
        let kept: Vec<PodReady> =
            serde_json::from_value(serde_json::to_value(&before).unwrap()).unwrap();
        assert_eq!(kept, before);
    }
}
