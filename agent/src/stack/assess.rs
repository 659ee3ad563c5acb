//! Assess (pure): what the cluster's answers to a plan add up to: each component's status, the
//! exports published, the drift, the ingress address, and what pruning keeps.

use std::collections::BTreeSet;

use kubenest_contracts as wire;
use serde_json::Value;

use super::plan::{Kind, Plan};
use super::rollout::Answer;
use crate::apply::ObjectId;
use crate::drift;
use crate::readiness;

/// Everything one pass over the components found.
#[derive(Debug)]
pub struct Pass {
    /// What pruning keeps.
    pub keep: BTreeSet<ObjectId>,
    pub components: Vec<wire::ComponentStatus>,
    pub exports: Vec<wire::PublishedExport>,
    pub drift: Vec<wire::DriftDetail>,
    pub blocked: Vec<wire::DriftDetail>,
    /// Workload objects not ready yet: `blocked_sync` once the App's deadline passes.
    pub stalled: Vec<wire::DriftDetail>,
    pub ingress: Option<String>,
    /// Why the GitOps repository could not be written for an addon component, if it could not.
    pub gitops_error: Option<String>,
    pub failed: bool,
    pub all_ready: bool,
    pub workloads_at_zero: bool,
}

fn component(
    name: &wire::Name,
    kind: Kind,
    (ready, have, want): (bool, u32, u32),
    message: String,
) -> wire::ComponentStatus {
    wire::ComponentStatus {
        name: name.clone(),
        kind: kind.as_str().into(),
        ready_replicas: have,
        desired_replicas: want,
        ready,
        message: message.chars().take(4096).collect(),
    }
}

/// What the answers to `plan`'s steps (one per step, in order) add up to; `paused`: the App
/// asks for its workloads at zero.
pub fn assess(plan: &Plan<'_>, answers: &[Answer], paused: bool) -> Pass {
    let mut pass = Pass {
        keep: plan.rendered.clone(),
        components: Vec::new(),
        exports: Vec::new(),
        drift: plan.drift.clone(),
        blocked: Vec::new(),
        stalled: Vec::new(),
        ingress: None,
        gitops_error: None,
        failed: false,
        all_ready: true,
        workloads_at_zero: true,
    };
    for (step, answer) in plan.steps.iter().zip(answers) {
        let status = match answer {
            Answer::Chart(Ok(outcome)) => {
                pass.all_ready &= outcome.ready;
                pass.keep.extend(outcome.objects.iter().cloned());
                if pass.gitops_error.is_none() {
                    pass.gitops_error = outcome.git_error.clone();
                }
                // Found before the chart's objects were applied, and applied back.
                pass.drift.extend(outcome.drift.iter().cloned());
                pass.blocked.extend(outcome.blocked.iter().cloned());
                pass.stalled.extend(outcome.stalled.iter().cloned());
                if step.kind == Kind::Addon {
                    pass.exports.push(outcome.export.clone());
                } else {
                    // A chart workload is stopped once everything it runs is judged stopped.
                    pass.workloads_at_zero &= outcome.ready && outcome.desired_replicas == 0;
                }
                let replicas = (
                    outcome.ready,
                    outcome.ready_replicas,
                    outcome.desired_replicas,
                );
                component(step.component, step.kind, replicas, outcome.message.clone())
            }
            Answer::Chart(Err(message)) => {
                pass.failed = true;
                pass.all_ready = false;
                component(
                    step.component,
                    step.kind,
                    (false, 0, step.replicas),
                    message.clone(),
                )
            }
            Answer::Waiting { failed, message } => {
                if *failed {
                    pass.failed = true;
                } else {
                    pass.all_ready = false;
                    pass.workloads_at_zero &= paused;
                }
                component(
                    step.component,
                    step.kind,
                    (false, 0, step.replicas),
                    message.clone(),
                )
            }
            Answer::Objects { live, refused } => {
                let mut status = (false, 0, step.replicas);
                let mut message = String::new();
                for (id, live) in live {
                    if id.1 == "Deployment" {
                        // The cache is at least as new as the change that woke this pass.
                        let workload = readiness::workload(live);
                        status = (
                            workload.ready,
                            workload.ready_replicas,
                            workload.desired_replicas,
                        );
                        pass.workloads_at_zero &= status.1 == 0 && live_replicas(live) == 0;
                        let blocked = drift::blocked(live);
                        message = match &blocked {
                            Some(_) => "the rollout exceeded its progress deadline".to_owned(),
                            None => workload.message,
                        };
                        pass.blocked.extend(blocked);
                    }
                    if id.1 == "Ingress" {
                        pass.ingress = readiness::ingress_address(live);
                        // Served once an ingress controller publishes its address (a paused
                        // App serves nothing anyway).
                        let served = readiness::ingress(live);
                        if status.0 && !served.ready && !paused {
                            status.0 = false;
                            message = served.message;
                        }
                    }
                }
                if let Some(pending) = &step.pending {
                    status.0 = false;
                    message = pending.clone();
                }
                if let Some((id, error)) = refused {
                    status.0 = false;
                    message = format!("cannot apply {}/{}: {error}", id.1, id.2);
                }
                pass.all_ready &= status.0;
                component(step.component, step.kind, status, message)
            }
        };
        pass.components.push(status);
    }
    pass
}

fn live_replicas(live: &Value) -> u64 {
    live.pointer("/status/replicas")
        .and_then(Value::as_u64)
        .unwrap_or(0)
}
