//! Readiness of what the agent applies, judged on the live objects (pure): one judge for plain
//! workloads, addons and Helm charts alike ([`object`]).
//!
//! - Deployments and StatefulSets ([`workload`]): a rolling update keeps the previous
//!   revision's pods serving while the new ones start, so "enough pods are ready" says nothing
//!   about the new revision. A workload is ready for its revision only when the controller has
//!   observed that generation, every desired replica is updated, ready and available, and no
//!   replica of an older revision remains.
//! - DaemonSets: every scheduled daemon pod updated, ready and available, for the observed
//!   generation.
//! - Jobs: complete; a failed Job says why. CronJobs: scheduled (not suspended).
//! - PersistentVolumeClaims: bound to a volume (unless the App is paused: nothing mounts it).
//! - Ingresses ([`ingress`]): an ingress controller has published an address (unless the App
//!   is paused).
//! - Services with a selector ([`service`]): at least one ready endpoint in their
//!   EndpointSlices, so a selector that matches no pod (a typo, a label the chart forgot) is
//!   not green. Unless nothing should serve: the App is paused, or every workload of the render
//!   the selector matches asks for no replicas ([`idle`]). A Service without a selector
//!   (endpoints kept by hand, `ExternalName`) is ready as it is.
//!
//! A paused App's chart has its Jobs and CronJobs suspended and its daemon pods unscheduled
//! ([`pause`]); suspended is then what they should be.

use serde_json::Value;

mod ingress;
mod service;

pub use ingress::{ingress, ingress_address};
pub use service::{idle, service};

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

/// The readiness of `live`, an object of `kind` as the API server returned it, if kubenest
/// judges that kind; `paused`: the App asks for its workloads stopped.
pub fn object(kind: &str, live: &Value, paused: bool) -> Option<Readiness> {
    match kind {
        "Deployment" | "StatefulSet" => Some(workload(live)),
        "DaemonSet" => Some(daemon_set(live)),
        "Job" => Some(job(live, paused)),
        "CronJob" => Some(cron_job(live, paused)),
        "PersistentVolumeClaim" => Some(claim(live, paused)),
        "Ingress" if !paused => Some(ingress(live)),
        _ => None,
    }
}

/// Makes `object` (as a chart rendered it) stopped for a paused App: no replicas, Jobs and
/// CronJobs suspended, daemon pods on no node. Resuming renders the chart again, and the apply
/// (server-side, the agent's own fields) restores exactly what the chart says.
pub fn pause(object: &mut Value) {
    match object["kind"].as_str() {
        Some("Deployment" | "StatefulSet" | "ReplicaSet") => {
            object["spec"]["replicas"] = 0.into();
        }
        Some("Job" | "CronJob") => object["spec"]["suspend"] = true.into(),
        Some("DaemonSet") => {
            // A DaemonSet cannot be scaled; a node selector no node carries removes its pods.
            object["spec"]["template"]["spec"]["nodeSelector"][PAUSED_NODE_LABEL] = "true".into();
        }
        _ => {}
    }
}

/// The node label a paused App's DaemonSets select (no node carries it).
pub const PAUSED_NODE_LABEL: &str = "kubenest.io/paused-app";

fn number(live: &Value, path: &str) -> Option<u32> {
    live.pointer(path)
        .and_then(Value::as_u64)
        .and_then(|n| u32::try_from(n).ok())
}

/// Whether the controller has observed the object's latest generation.
fn observed(live: &Value) -> bool {
    let generation = live.pointer("/metadata/generation").and_then(Value::as_i64);
    let observed = live
        .pointer("/status/observedGeneration")
        .and_then(Value::as_i64);
    generation.is_some() && observed >= generation
}

/// A condition of `live` of `kind` whose status is `True`: (reason, message).
fn true_condition<'a>(live: &'a Value, kind: &str) -> Option<(&'a str, &'a str)> {
    live.pointer("/status/conditions")?
        .as_array()?
        .iter()
        .find(|c| c["type"] == kind && c["status"] == "True")
        .map(|c| {
            (
                c["reason"].as_str().unwrap_or_default(),
                c["message"].as_str().unwrap_or_default(),
            )
        })
}

/// Readiness without replicas to count.
fn judged(ready: bool, message: String) -> Readiness {
    Readiness {
        ready,
        ready_replicas: 0,
        desired_replicas: 0,
        message: if ready { String::new() } else { message },
    }
}

fn daemon_set(live: &Value) -> Readiness {
    let desired = number(live, "/status/desiredNumberScheduled").unwrap_or(0);
    let ready = number(live, "/status/numberReady").unwrap_or(0);
    let updated = number(live, "/status/updatedNumberScheduled").unwrap_or(0);
    let available = number(live, "/status/numberAvailable").unwrap_or(0);
    let scheduled = number(live, "/status/currentNumberScheduled").unwrap_or(0);
    let current = observed(live);
    let ready_now = current
        && updated >= desired
        && ready >= desired
        && available >= desired
        && scheduled == desired;
    let message = if ready_now {
        String::new()
    } else if !current {
        format!(
            "waiting for the new generation to be observed ({ready}/{desired} daemon pods ready)"
        )
    } else if scheduled > desired {
        format!(
            "{} daemon pod(s) still on nodes they must leave",
            scheduled - desired
        )
    } else {
        format!("{ready}/{desired} daemon pods ready, {updated} updated, {available} available")
    };
    Readiness {
        ready: ready_now,
        ready_replicas: ready.min(desired),
        desired_replicas: desired,
        message,
    }
}

fn job(live: &Value, paused: bool) -> Readiness {
    if true_condition(live, "Complete").is_some() {
        return judged(true, String::new());
    }
    if let Some((reason, message)) = true_condition(live, "Failed") {
        return judged(false, format!("the Job failed: {reason}: {message}"));
    }
    let suspended = live.pointer("/spec/suspend") == Some(&Value::Bool(true));
    let active = number(live, "/status/active").unwrap_or(0);
    if suspended {
        // Suspended and no pod left: what a paused App's Job should be.
        return judged(paused && active == 0, "the Job is suspended".to_owned());
    }
    let succeeded = number(live, "/status/succeeded").unwrap_or(0);
    let completions = number(live, "/spec/completions").unwrap_or(1);
    judged(
        false,
        format!("the Job runs: {succeeded}/{completions} completions, {active} pod(s) active"),
    )
}

fn cron_job(live: &Value, paused: bool) -> Readiness {
    let suspended = live.pointer("/spec/suspend") == Some(&Value::Bool(true));
    judged(
        suspended == paused,
        if suspended {
            "the CronJob is suspended: nothing is scheduled".to_owned()
        } else {
            "the CronJob is still scheduled".to_owned()
        },
    )
}

/// A claim must be bound for what mounts it to run; while the App is paused nothing does (and
/// a `WaitForFirstConsumer` claim waits for a pod).
fn claim(live: &Value, paused: bool) -> Readiness {
    let phase = live
        .pointer("/status/phase")
        .and_then(Value::as_str)
        .unwrap_or("Pending");
    judged(
        phase == "Bound" || paused,
        format!("the claim is {phase}: not bound to a volume"),
    )
}

/// The readiness of `live`, a Deployment or StatefulSet as the API server returned it.
pub fn workload(live: &Value) -> Readiness {
    let desired = number(live, "/spec/replicas").unwrap_or(1);
    let total = number(live, "/status/replicas").unwrap_or(0);
    let ready = number(live, "/status/readyReplicas").unwrap_or(0);
    let available = number(live, "/status/availableReplicas").unwrap_or(0);
    let updated = number(live, "/status/updatedReplicas").unwrap_or(0);
    let current = observed(live);
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

    #[test]
    fn a_daemon_set_is_ready_when_every_scheduled_pod_is_updated_ready_and_available() {
        let daemons = |status: Value| json!({"metadata": {"generation": 2}, "status": status});
        let all = json!({"observedGeneration": 2, "desiredNumberScheduled": 2,
            "currentNumberScheduled": 2, "updatedNumberScheduled": 2, "numberReady": 2,
            "numberAvailable": 2});
        assert!(object("DaemonSet", &daemons(all), false).unwrap().ready);
        let rolling = json!({"observedGeneration": 2, "desiredNumberScheduled": 2,
            "currentNumberScheduled": 2, "updatedNumberScheduled": 1, "numberReady": 2,
            "numberAvailable": 2});
        let r = object("DaemonSet", &daemons(rolling), false).unwrap();
        assert!(!r.ready && r.message.contains("1 updated"), "{r:?}");
        let unobserved = json!({"observedGeneration": 1, "desiredNumberScheduled": 0});
        assert!(
            !object("DaemonSet", &daemons(unobserved), false)
                .unwrap()
                .ready
        );
        // Paused: no node matches, and the last pod has left.
        let leaving = json!({"observedGeneration": 2, "desiredNumberScheduled": 0,
            "currentNumberScheduled": 1});
        assert!(!object("DaemonSet", &daemons(leaving), true).unwrap().ready);
        let gone = json!({"observedGeneration": 2, "desiredNumberScheduled": 0});
        assert!(object("DaemonSet", &daemons(gone), true).unwrap().ready);
    }

    #[test]
    fn a_job_is_ready_when_complete_and_says_why_it_failed() {
        let job = |spec: Value, status: Value| json!({"spec": spec, "status": status});
        let complete = json!({"succeeded": 1, "conditions": [
            {"type": "Complete", "status": "True"}]});
        assert!(
            object("Job", &job(json!({}), complete), false)
                .unwrap()
                .ready
        );
        let failed = json!({"failed": 6, "conditions": [{"type": "Failed", "status": "True",
            "reason": "BackoffLimitExceeded", "message": "Job has reached the specified backoff limit"}]});
        let r = object("Job", &job(json!({}), failed), false).unwrap();
        assert!(!r.ready);
        assert!(r.message.contains("BackoffLimitExceeded"), "{}", r.message);
        let running = object(
            "Job",
            &job(
                json!({"completions": 3}),
                json!({"succeeded": 1, "active": 1}),
            ),
            false,
        )
        .unwrap();
        assert_eq!(
            running.message,
            "the Job runs: 1/3 completions, 1 pod(s) active"
        );
        let suspended = job(json!({"suspend": true}), json!({}));
        assert!(
            !object("Job", &suspended, false).unwrap().ready,
            "suspended by someone else"
        );
        assert!(
            object("Job", &suspended, true).unwrap().ready,
            "suspended by the pause"
        );
    }

    #[test]
    fn a_cron_job_is_ready_when_scheduled_or_suspended_by_the_pause() {
        let scheduled = json!({"spec": {"schedule": "*/5 * * * *"}});
        let suspended = json!({"spec": {"schedule": "*/5 * * * *", "suspend": true}});
        assert!(object("CronJob", &scheduled, false).unwrap().ready);
        assert!(
            !object("CronJob", &scheduled, true).unwrap().ready,
            "the pause is not applied yet"
        );
        assert!(object("CronJob", &suspended, true).unwrap().ready);
        assert!(!object("CronJob", &suspended, false).unwrap().ready);
    }

    #[test]
    fn a_claim_is_ready_only_when_bound() {
        let bound = json!({"status": {"phase": "Bound"}});
        assert!(
            object("PersistentVolumeClaim", &bound, false)
                .unwrap()
                .ready
        );
        let r = object(
            "PersistentVolumeClaim",
            &json!({"status": {"phase": "Pending"}}),
            false,
        )
        .unwrap();
        assert_eq!(
            (r.ready, r.message.as_str()),
            (false, "the claim is Pending: not bound to a volume")
        );
        let pending = json!({"status": {"phase": "Pending"}});
        assert!(
            object("PersistentVolumeClaim", &pending, true)
                .unwrap()
                .ready,
            "nothing runs"
        );
        assert!(object("ConfigMap", &json!({}), false).is_none());
    }

    #[test]
    fn pausing_stops_every_kind_that_runs_pods() {
        let mut objects = [
            json!({"kind": "Deployment", "spec": {"replicas": 3}}),
            json!({"kind": "StatefulSet", "spec": {"replicas": 2}}),
            json!({"kind": "CronJob", "spec": {"schedule": "@hourly"}}),
            json!({"kind": "Job", "spec": {}}),
            json!({"kind": "DaemonSet", "spec": {"template": {"spec": {"nodeSelector": {"disk": "ssd"}}}}}),
            json!({"kind": "Service", "spec": {"ports": [{"port": 80}]}}),
        ];
        for object in &mut objects {
            pause(object);
        }
        assert_eq!(objects[0]["spec"]["replicas"], 0);
        assert_eq!(objects[1]["spec"]["replicas"], 0);
        assert_eq!(objects[2]["spec"]["suspend"], true);
        assert_eq!(objects[3]["spec"]["suspend"], true);
        assert_eq!(
            objects[4]["spec"]["template"]["spec"]["nodeSelector"],
            json!({"disk": "ssd", PAUSED_NODE_LABEL: "true"})
        );
        assert_eq!(
            objects[5],
            json!({"kind": "Service", "spec": {"ports": [{"port": 80}]}})
        );
    }

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
