//! The Project controller's decisions (pure): from what is known of a project to the status it
//! shows and what its cluster is asked for.

use std::collections::BTreeMap;
use std::time::Duration;

use chrono::{DateTime, Utc};

use kube::{Resource, ResourceExt};
use kubenest_contracts as wire;
use kubenest_crds::names::labels;
use kubenest_crds::project::{Project, ProjectPhase, ProjectStatus};

use crate::conditions::{self, PROGRESSING, READY};
use crate::deadline;
use crate::intents::{ObjectKey, Sent};
use crate::placement::{Placement, Unplaced};
use crate::plane::Attempt;
use crate::reach::{self, Silence};

/// What a reconcile of a live project knows.
#[derive(Debug)]
pub struct Facts<'a> {
    pub project: &'a Project,
    pub key: &'a ObjectKey,
    pub generation: i64,
    /// The status as read.
    pub old: &'a ProjectStatus,
    /// The name of another project that holds this project's namespace on its cluster.
    pub owner: Option<String>,
    pub placement: Result<Placement, Unplaced>,
    /// When this reconcile judges the project's deadline.
    pub now: DateTime<Utc>,
    /// The project's cluster has not reported within its heartbeat window.
    pub silence: Option<Silence>,
}

/// What a reconcile of a live project does.
#[derive(Debug)]
pub enum Plan {
    /// Write `status` and look again after `requeue`; `settled` when the cluster holds what
    /// the project asks for (no command is pending).
    Write {
        status: ProjectStatus,
        requeue: Duration,
        settled: bool,
    },
    /// Send `project.ensure` (when its backoff has run out), then write the status
    /// [`waiting`] gives for the attempt.
    Ensure {
        placement: Box<Placement>,
        command: Box<wire::ProjectEnsure>,
        sent: Sent,
        routed: String,
    },
}

/// The project that holds `namespace` on `cluster` among `projects`: the oldest claim that is
/// not being deleted, ties broken by name.
pub fn owner_of<'a>(
    projects: &'a [Project],
    cluster: &str,
    namespace: &str,
) -> Option<&'a Project> {
    projects
        .iter()
        .filter(|p| p.spec.cluster == cluster && p.spec.namespace == namespace)
        .filter(|p| p.meta().deletion_timestamp.is_none() || claimed(p))
        .min_by_key(|p| {
            (
                !claimed(p),
                p.meta().creation_timestamp.as_ref().map(|t| t.0),
                p.name_any(),
            )
        })
}

/// Whether the project's namespace was ever confirmed on its cluster.
pub fn claimed(project: &Project) -> bool {
    project
        .status
        .as_ref()
        .and_then(|s| s.cluster_phase.as_deref())
        .is_some()
}

/// Whether the agent confirmed the namespace for this very generation. Such a namespace is the
/// project's own (the cluster labels it with one project only), so no other claim is looked
/// for.
pub fn confirmed(old: &ProjectStatus, generation: i64) -> bool {
    old.cluster_phase.as_deref() == Some("Ready") && old.ensured_generation == Some(generation)
}

/// The command that has the agent create (or keep) the project's namespace.
pub fn ensure_command(project: &Project, placement: &Placement) -> wire::ProjectEnsure {
    let labels: BTreeMap<String, String> = [
        (labels::PROJECT.to_owned(), project.name_any()),
        (labels::ORGANIZATION.to_owned(), placement.org_id.clone()),
    ]
    .into();
    wire::ProjectEnsure {
        project_id: wire::Id::new(&placement.project_id),
        namespace: wire::Name::new(&project.spec.namespace),
        labels,
        registry_secret: project.spec.registry_secret.as_deref().map(wire::Name::new),
        // Every project namespace enforces at least Pod Security's baseline.
        pod_security: match project.spec.pod_security {
            Some(kubenest_crds::project::PodSecurity::Restricted) => wire::PodSecurity::Restricted,
            Some(kubenest_crds::project::PodSecurity::Baseline) | None => {
                wire::PodSecurity::Baseline
            }
        },
        fences: fences(&project.spec),
    }
}

/// The fences the agent keeps in the namespace (pure): the quota as given, the defaults with
/// the requests a quota needs ([`kubenest_domain::fences::effective_defaults`]), and the
/// network, isolated unless the project says `Open`.
pub fn fences(spec: &kubenest_crds::project::ProjectSpec) -> wire::Fences {
    use kubenest_crds::fences::Isolation;
    let network = spec.network.clone().unwrap_or_default();
    wire::Fences {
        quota: spec.quota.as_ref().map(|q| wire::Quota {
            cpu: q.cpu.clone(),
            memory: q.memory.clone(),
            storage: q.storage.clone(),
            pods: q.pods,
            load_balancers: q.load_balancers,
        }),
        defaults: kubenest_domain::fences::effective_defaults(spec).map(|d| wire::Resources {
            cpu_request: d.cpu_request,
            cpu_limit: d.cpu_limit,
            memory_request: d.memory_request,
            memory_limit: d.memory_limit,
        }),
        network: wire::NetworkFence {
            isolated: network.isolation == Isolation::Isolated,
            allow_from: network
                .allow_from
                .iter()
                .map(|p| wire::Name::new(&p.0))
                .collect(),
            egress: network
                .egress
                .iter()
                .map(|rule| wire::EgressRule {
                    cidr: rule.cidr.clone(),
                    ports: rule.ports.iter().copied().map(wire::Port).collect(),
                })
                .collect(),
        },
    }
}

/// What a live project needs.
pub fn decide(facts: &Facts<'_>) -> Plan {
    let project = facts.project;
    let generation = Some(facts.generation);
    let mut status = facts.old.clone();
    status.last_observation = None;
    if let Some(owner) = &facts.owner {
        status.phase = ProjectPhase::Failed;
        conditions::set(
            &mut status.conditions,
            READY,
            false,
            "NamespaceConflict",
            format!(
                "namespace {} on cluster {} already belongs to project {owner}",
                project.spec.namespace, project.spec.cluster,
            ),
            generation,
        );
        conditions::remove(&mut status.conditions, PROGRESSING);
        return Plan::Write {
            status,
            requeue: Duration::from_secs(30),
            settled: false,
        };
    }
    let placement = match &facts.placement {
        Ok(placement) => placement,
        Err(unplaced) => {
            status.phase = ProjectPhase::Pending;
            conditions::set(
                &mut status.conditions,
                READY,
                false,
                unplaced.reason(),
                unplaced.message(),
                generation,
            );
            return Plan::Write {
                status,
                requeue: Duration::from_secs(10),
                settled: false,
            };
        }
    };
    if !confirmed(facts.old, facts.generation) {
        return Plan::Ensure {
            placement: Box::new(placement.clone()),
            command: Box::new(ensure_command(project, placement)),
            sent: Sent::ProjectEnsure {
                project: facts.key.clone(),
                generation: facts.generation,
            },
            routed: format!(
                "namespace {} requested; waiting for the agent to confirm it",
                project.spec.namespace
            ),
        };
    }
    status.phase = ProjectPhase::Ready;
    conditions::set(
        &mut status.conditions,
        READY,
        true,
        "NamespaceReady",
        format!(
            "namespace {} is ready on cluster {}",
            project.spec.namespace, project.spec.cluster
        ),
        generation,
    );
    conditions::remove(&mut status.conditions, PROGRESSING);
    status.progress = None;
    status.last_observation = reach::show(
        &facts.old.conditions,
        &mut status.conditions,
        facts.silence.as_ref(),
        "Ready",
        generation,
    );
    Plan::Write {
        status,
        requeue: Duration::from_secs(300),
        settled: true,
    }
}

/// The status of a project waiting for its namespace after `attempt` (and when to look again):
/// what the agent last reported for it, why it waits, and whether its progress deadline passed: before the agent
/// accepted the request that only names the delay (the request is still sent); after, the
/// project is `Failed` (and still ensured, so a late namespace turns it `Ready`).
pub fn waiting(facts: &Facts<'_>, attempt: &Attempt) -> (ProjectStatus, Duration) {
    let generation = Some(facts.generation);
    let old = facts.old;
    let seconds = facts.project.spec.progress_deadline_seconds;
    let delivered = old.ensured_generation == generation;
    let deadline = deadline::judge(
        old.progress.as_ref(),
        facts.generation,
        delivered,
        seconds,
        facts.now,
    );
    let mut status = old.clone();
    status.progress = Some(deadline.clock.clone());
    let (reason, message) = attempt.waiting_or_default();
    let last = if delivered {
        match old.cluster_message.as_str() {
            "" => "the agent accepted the request but has not reported the namespace ready".into(),
            why => why.to_owned(),
        }
    } else {
        format!("{reason}: {message}")
    };
    let what = format!("namespace {}", facts.project.spec.namespace);
    let passed = deadline.passed(&what, seconds, &last);
    let exceeded = matches!(passed, Some(("ProgressDeadlineExceeded", _)));
    match &passed {
        Some((late, why)) if exceeded => conditions::set(
            &mut status.conditions,
            PROGRESSING,
            false,
            late,
            why.clone(),
            generation,
        ),
        _ => conditions::set(
            &mut status.conditions,
            PROGRESSING,
            true,
            &reason,
            message.clone(),
            generation,
        ),
    };
    let failed = old.cluster_phase.as_deref() == Some("Failed");
    let there = old.cluster_phase.as_deref() == Some("Ready");
    status.phase = if failed || (exceeded && !there) {
        ProjectPhase::Failed
    } else if there {
        ProjectPhase::Ready
    } else {
        ProjectPhase::Pending
    };
    let (reason, message) = match passed {
        _ if failed => ("NamespaceFailed".to_owned(), old.cluster_message.clone()),
        Some((late, why)) => (late.to_owned(), why),
        None => (reason, message),
    };
    if status.phase != ProjectPhase::Ready {
        conditions::set(
            &mut status.conditions,
            READY,
            false,
            &reason,
            message,
            generation,
        );
    }
    let last = format!("{:?}", status.phase);
    status.last_observation = reach::show(
        &old.conditions,
        &mut status.conditions,
        facts.silence.as_ref(),
        &last,
        generation,
    );
    let requeue = deadline::sooner(attempt.retry, deadline.at, facts.now);
    (status, requeue.max(Duration::from_secs(1)))
}

#[cfg(test)]
mod tests;
