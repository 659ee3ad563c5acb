//! Plan (pure): what one pass applies, in order: addons first (their export Secrets exist before
//! a consumer starts), then workloads, each with the force it is written with and the drift
//! found on its live Deployment.

use std::collections::BTreeSet;

use kubenest_contracts as wire;
use serde_json::Value;

use super::facts::Facts;
use crate::addon::AddonTarget;
use crate::apply::{ObjectId, id_of};
use crate::build::{self, Image};
use crate::drift;
use crate::render::{self, RenderError, WorkloadInputs};

/// The exports of a Helm workload: none.
static NO_EXPORTS: wire::ExportMapping = wire::ExportMapping::new();

/// What one pass applies.
#[derive(Debug, Default)]
pub struct Plan<'a> {
    pub steps: Vec<Step<'a>>,
    /// Everything the revision renders, applied or not: a failed write must not make pruning
    /// delete the object's last good version. (Charts add what they render once applied.)
    pub rendered: BTreeSet<ObjectId>,
    /// Fields of live Deployments that another manager changed, in component order.
    pub drift: Vec<wire::DriftDetail>,
}

/// One component's part of the pass.
#[derive(Debug)]
pub struct Step<'a> {
    pub component: &'a wire::Name,
    pub kind: Kind,
    /// The replicas the component asks for, for its status when nothing answers.
    pub replicas: u32,
    pub work: Work<'a>,
    /// Why the component cannot be ready whatever the cluster answers (its ingress has no
    /// certificate), said in its status.
    pub pending: Option<String>,
}

/// Which kind of component a step is for, as its status names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Addon,
    Workload,
}

impl Kind {
    /// The name of the kind in a component's status.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Addon => "addon",
            Self::Workload => "workload",
        }
    }
}

/// What a step applies.
#[derive(Debug)]
pub enum Work<'a> {
    /// An addon component, or a workload that is a Helm chart (without exports).
    Chart(AddonTarget<'a>),
    /// A workload's objects, in apply order.
    Objects(Vec<Desired>),
    /// A Git workload without its image yet: its build is asked for (`request`), under way, or
    /// failed.
    Build {
        request: Option<wire::BuildRequest>,
        failed: bool,
        message: String,
    },
}

/// One object to apply.
#[derive(Debug)]
pub struct Desired {
    pub id: ObjectId,
    pub object: Value,
    /// Write it even when its stamp says it is current.
    pub force: bool,
    /// Someone else changed it: put it back whole ([`crate::apply::Applier::restore`]).
    pub restore: bool,
}

/// The plan of a pass that `facts` admit (a rejected StackDeploy applies nothing).
pub fn plan<'a>(facts: &Facts<'a>) -> Plan<'a> {
    let mut plan = Plan::default();
    if facts.rejection.is_some() {
        return plan;
    }
    let held = facts.held;
    let deploy = &held.spec.deploy;
    let app = &deploy.app;
    let fresh_revision = facts.fresh_revision();
    let force = fresh_revision || facts.full_pass_due;
    for component in &deploy.components {
        let wire::Component::Addon(a) = component else {
            continue;
        };
        let target = AddonTarget {
            release: render::component_object(app, a.name.as_str()),
            namespace: app.namespace.as_str(),
            labels: render::labels(app, a.name.as_str()),
            export_secret: render::export_secret(app, a.name.as_str()),
            name: a.name.as_str(),
            definition: a.definition.as_str(),
            chart: &a.chart,
            values: &a.values,
            exports: &a.exports,
            third_party: false,
            force,
            // Addons keep running while the App is paused: only workloads stop.
            paused: false,
        };
        plan.steps.push(Step {
            component: &a.name,
            kind: Kind::Addon,
            replicas: 1,
            work: Work::Chart(target),
            pending: None,
        });
    }
    for component in &deploy.components {
        let wire::Component::Workload(w) = component else {
            continue;
        };
        // The Secrets `secret.set` fills for the workload (its own values, its repository's
        // credentials) are the App's while the workload is: pruned with it, never before.
        for secret in [
            wire::component_secret(app.name.as_str(), w.name.as_str()),
            wire::git_secret(app.name.as_str(), w.name.as_str()),
        ] {
            plan.rendered
                .insert(("v1".into(), "Secret".into(), secret.as_str().to_owned()));
        }
    }
    for component in &deploy.components {
        let wire::Component::Workload(w) = component else {
            continue;
        };
        let certificate = facts.certificates.get(w.name.as_str());
        let pending = certificate.and_then(|c| c.as_ref().err()).cloned();
        let step = |work: Work<'a>| Step {
            component: &w.name,
            kind: Kind::Workload,
            replicas: w.replicas,
            work,
            pending: pending.clone(),
        };
        let built = match &w.source {
            wire::WorkloadSource::Git(git) => {
                let found = facts.builds.get(w.name.as_str()).and_then(Option::as_ref);
                let wait = |failed, message| Work::Build {
                    request: found
                        .is_none()
                        .then(|| build::request_for(facts.push_prefix, deploy, w, git)),
                    failed,
                    message,
                };
                match build::image(found) {
                    Image::Ready(image) => Some(image),
                    Image::Building(message) => {
                        plan.steps.push(step(wait(false, message)));
                        continue;
                    }
                    Image::Failed(message) => {
                        plan.steps.push(step(wait(true, message)));
                        continue;
                    }
                }
            }
            _ => None,
        };
        let inputs = WorkloadInputs {
            built_image: built.as_deref(),
            paused: deploy.paused,
            restart_id: held.spec.restart_id.as_deref(),
            progress_deadline_seconds: deploy.progress_deadline_seconds,
            certificate: certificate.and_then(|c| c.as_ref().ok()),
        };
        match render::workload(app, w, &inputs) {
            Ok(objects) => {
                let mut desired = Vec::new();
                for object in objects {
                    let Some(id) = id_of(&object) else { continue };
                    let mut drifted = false;
                    if let Some(before) = facts.live.get(&id).filter(|_| !fresh_revision) {
                        // Only fields another manager changed: a field that differs because
                        // the desired state changed is still the agent's.
                        let found: Vec<_> = drift::drift(&object, before)
                            .into_iter()
                            .filter(|d| d.manager.is_some())
                            .collect();
                        drifted = !found.is_empty();
                        plan.drift.extend(found);
                    }
                    plan.rendered.insert(id.clone());
                    desired.push(Desired {
                        id,
                        object,
                        force,
                        restore: drifted,
                    });
                }
                plan.steps.push(step(Work::Objects(desired)));
            }
            Err(RenderError::Helm) => {
                let wire::WorkloadSource::Helm { chart, values } = &w.source else {
                    continue;
                };
                plan.steps.push(step(Work::Chart(AddonTarget {
                    release: render::component_object(app, w.name.as_str()),
                    namespace: app.namespace.as_str(),
                    labels: render::labels(app, w.name.as_str()),
                    export_secret: render::export_secret(app, w.name.as_str()),
                    name: w.name.as_str(),
                    definition: "helm",
                    chart,
                    values,
                    exports: &NO_EXPORTS,
                    third_party: true,
                    force,
                    paused: deploy.paused,
                })));
            }
            Err(RenderError::AwaitingBuild) => {}
        }
    }
    plan
}
