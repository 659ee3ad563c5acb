//! Which listed objects are an App's, and how each is doing (pure).
//!
//! An App's objects are those labelled with its id (what the agent applied, its addons' chart
//! objects included: the agent labels them all) and, transitively, what those own (a
//! Deployment's ReplicaSets, their Pods, a StatefulSet's Pods, a Job's Pods): the owner
//! references are the tree's edges. Secrets are never among them, whatever is passed in.

use std::collections::HashSet;

use chrono::{DateTime, Utc};
use kubenest_contracts::{Health, LiveObject, MAX_OBJECTS, ObjectStatus};
use kubenest_crds::names::labels;
use serde_json::Value;

use crate::logs::truncate;
use crate::readiness;

/// Owner references kept per object (the contract's bound).
const MAX_OWNERS: usize = 8;
/// Ownership depth followed (Deployment → ReplicaSet → Pod is two; CronJob → Job → Pod too).
const MAX_DEPTH: usize = 4;

/// One listed object: its kind and the object as the API server returned it.
pub type Listed = (&'static str, Value);

/// The objects of App `app_id` among `listed`, roots first, at most [`MAX_OBJECTS`]; `true`
/// when more matched.
pub fn select(app_id: &str, listed: &[Listed]) -> (Vec<LiveObject>, bool) {
    let candidates: Vec<&Listed> = listed
        .iter()
        .filter(|(kind, live)| *kind != "Secret" && !retired(kind, live))
        .collect();
    let mut chosen: Vec<&Listed> = candidates
        .iter()
        .copied()
        .filter(|(_, live)| label(live, labels::APP_ID) == Some(app_id))
        .collect();
    let mut uids: HashSet<&str> = chosen.iter().filter_map(|(_, l)| uid(l)).collect();
    for _ in 0..MAX_DEPTH {
        let owned: Vec<&Listed> = candidates
            .iter()
            .copied()
            .filter(|(_, live)| uid(live).is_some_and(|u| !uids.contains(u)))
            .filter(|(_, live)| owners(live).iter().any(|o| uids.contains(o)))
            .collect();
        if owned.is_empty() {
            break;
        }
        uids.extend(owned.iter().filter_map(|(_, l)| uid(l)));
        chosen.extend(owned);
    }
    let truncated = chosen.len() > MAX_OBJECTS;
    let objects = chosen
        .into_iter()
        .take(MAX_OBJECTS)
        .filter_map(|(kind, live)| {
            Some(LiveObject {
                kind: (*kind).to_owned(),
                name: str_at(live, "/metadata/name")?.to_owned(),
                uid: uid(live)?.to_owned(),
                owners: owners(live)
                    .into_iter()
                    .filter(|o| uids.contains(o))
                    .take(MAX_OWNERS)
                    .map(str::to_owned)
                    .collect(),
                component: label(live, labels::COMPONENT).map(str::to_owned),
                status: status_of(kind, live),
                created: str_at(live, "/metadata/creationTimestamp")
                    .and_then(|t| t.parse::<DateTime<Utc>>().ok()),
            })
        })
        .collect();
    (objects, truncated)
}

/// A ReplicaSet a Deployment keeps only as history (no replicas wanted or left).
fn retired(kind: &str, live: &Value) -> bool {
    kind == "ReplicaSet"
        && number(live, "/spec/replicas").unwrap_or(0) == 0
        && number(live, "/status/replicas").unwrap_or(0) == 0
}

/// How `live`, an object of `kind`, is doing.
pub fn status_of(kind: &str, live: &Value) -> ObjectStatus {
    let mut status = match kind {
        "Pod" => pod(live),
        "ReplicaSet" => {
            let desired = number(live, "/spec/replicas").unwrap_or(0);
            let ready = number(live, "/status/readyReplicas").unwrap_or(0);
            ObjectStatus {
                health: if ready >= desired {
                    Health::Ready
                } else {
                    Health::Progressing
                },
                ready: Some(ready),
                desired: Some(desired),
                ..ObjectStatus::default()
            }
        }
        "Service" => ObjectStatus {
            health: Health::Ready,
            phase: str_at(live, "/spec/type").map(str::to_owned),
            ..ObjectStatus::default()
        },
        _ => judged(kind, live),
    };
    if let Some(reason) = &mut status.reason {
        truncate(reason, 128);
    }
    if let Some(message) = &mut status.message {
        truncate(message, 1024);
    }
    status
}

/// Kinds the agent's readiness judge knows (workloads, Jobs, claims, ingresses).
fn judged(kind: &str, live: &Value) -> ObjectStatus {
    let Some(judged) = readiness::object(kind, live, false) else {
        return ObjectStatus::default();
    };
    let failed = failed_condition(live);
    let health = match (judged.ready, &failed) {
        (_, Some(_)) => Health::Failed,
        (true, None) => Health::Ready,
        (false, None) => Health::Progressing,
    };
    let workload = matches!(kind, "Deployment" | "StatefulSet" | "DaemonSet");
    let (reason, message) = match failed {
        Some((reason, message)) => (Some(reason), Some(message)),
        None => (None, Some(judged.message).filter(|m| !m.is_empty())),
    };
    ObjectStatus {
        health,
        phase: str_at(live, "/status/phase").map(str::to_owned),
        ready: workload.then_some(judged.ready_replicas),
        desired: workload.then_some(judged.desired_replicas),
        reason,
        message,
        ..ObjectStatus::default()
    }
}

/// A condition that says the object gave up: a Deployment past its progress deadline, a
/// failed Job.
fn failed_condition(live: &Value) -> Option<(String, String)> {
    let conditions = live.pointer("/status/conditions")?.as_array()?;
    conditions.iter().find_map(|c| {
        let kind = c.get("type")?.as_str()?;
        let status = c.get("status")?.as_str()?;
        let reason = c.get("reason").and_then(Value::as_str).unwrap_or(kind);
        let gave_up =
            (kind == "Failed" && status == "True") || (kind == "Progressing" && status == "False");
        gave_up.then(|| {
            let message = c.get("message").and_then(Value::as_str).unwrap_or_default();
            (reason.to_owned(), message.to_owned())
        })
    })
}

/// A Pod: its phase, ready containers, restarts, and why a container waits or died.
fn pod(live: &Value) -> ObjectStatus {
    let phase = str_at(live, "/status/phase").unwrap_or("Pending");
    let containers = live
        .pointer("/status/containerStatuses")
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or_default();
    let declared = live
        .pointer("/spec/containers")
        .and_then(Value::as_array)
        .map_or(containers.len(), Vec::len);
    let ready = containers
        .iter()
        .filter(|c| c.get("ready").and_then(Value::as_bool) == Some(true))
        .count();
    let restarts: u64 = containers
        .iter()
        .filter_map(|c| c.get("restartCount").and_then(Value::as_u64))
        .sum();
    // The first container that waits (or last died) says why the pod is not ready.
    let why = containers.iter().find_map(|c| {
        ["/state/waiting", "/state/terminated"]
            .iter()
            .find_map(|at| c.pointer(at))
            .and_then(|s| {
                let reason = s.get("reason")?.as_str()?.to_owned();
                let message = s.get("message").and_then(Value::as_str).map(str::to_owned);
                Some((reason, message))
            })
    });
    let stuck = why.as_ref().is_some_and(|(reason, _)| {
        matches!(
            reason.as_str(),
            "CrashLoopBackOff"
                | "ImagePullBackOff"
                | "ErrImagePull"
                | "InvalidImageName"
                | "CreateContainerConfigError"
                | "CreateContainerError"
        )
    });
    let health = match phase {
        "Failed" => Health::Failed,
        "Succeeded" => Health::Ready,
        _ if stuck => Health::Failed,
        "Running" if ready == declared => Health::Ready,
        _ => Health::Progressing,
    };
    let (reason, message) = match (why, phase) {
        (Some((reason, message)), _) if health != Health::Ready => (Some(reason), message),
        (_, _) => (
            str_at(live, "/status/reason").map(str::to_owned),
            str_at(live, "/status/message").map(str::to_owned),
        ),
    };
    ObjectStatus {
        health,
        phase: Some(phase.to_owned()),
        ready: Some(u32::try_from(ready).unwrap_or(u32::MAX)),
        desired: Some(u32::try_from(declared).unwrap_or(u32::MAX)),
        restarts: Some(u32::try_from(restarts).unwrap_or(u32::MAX)),
        reason,
        message,
    }
}

fn str_at<'a>(live: &'a Value, pointer: &str) -> Option<&'a str> {
    live.pointer(pointer)?.as_str()
}

fn number(live: &Value, pointer: &str) -> Option<u32> {
    live.pointer(pointer)?
        .as_u64()
        .map(|n| u32::try_from(n).unwrap_or(u32::MAX))
}

fn uid(live: &Value) -> Option<&str> {
    str_at(live, "/metadata/uid")
}

fn label<'a>(live: &'a Value, key: &str) -> Option<&'a str> {
    live.pointer("/metadata/labels")?.get(key)?.as_str()
}

fn owners(live: &Value) -> Vec<&str> {
    live.pointer("/metadata/ownerReferences")
        .and_then(Value::as_array)
        .map(|refs| refs.iter().filter_map(|r| r.get("uid")?.as_str()).collect())
        .unwrap_or_default()
}

#[cfg(test)]
mod tests;
