//! What a StackDeploy pass tells as Kubernetes Events on the workload cluster (pure):
//! `kubectl describe stackdeploy` shows the revision taken, the rollout settling and why it
//! failed (drift is told by [`crate::drift_events`]). The reasons are those of
//! [`kubenest_crds::names::reasons`], as on the management side.

use kubenest_crds::names::reasons;
use kubenest_runtime::events::{Event, EventType, event};

use crate::crd::StackDeployStatus;

/// What a status write of a StackDeploy from `old` to `new` tells.
pub fn stack_events(old: &StackDeployStatus, new: &StackDeployStatus) -> Vec<Event> {
    let mut events = Vec::new();
    let revision = new.observed_revision.as_deref().unwrap_or("?");
    if new.observed_revision.is_some() && old.observed_revision != new.observed_revision {
        events.push(event(
            EventType::Normal,
            reasons::REVISION_ACCEPTED,
            format!("rolling out revision {revision}"),
            "Rollout",
        ));
    }
    let settled = old.phase != new.phase || old.observed_revision != new.observed_revision;
    match new.phase.as_deref() {
        Some("Running") if settled => events.push(event(
            EventType::Normal,
            reasons::ROLLOUT_SUCCEEDED,
            format!("revision {revision}: every component is ready"),
            "Rollout",
        )),
        Some("Failed") if settled => events.push(event(
            EventType::Warning,
            reasons::ROLLOUT_FAILED,
            format!("revision {revision}: {}", why_failed(new)),
            "Rollout",
        )),
        _ => {}
    }
    events
}

/// Why a StackDeploy failed: its rejection, or the components that are not ready with their
/// messages.
fn why_failed(status: &StackDeployStatus) -> String {
    if let Some(rejection) = &status.rejection {
        return format!("refused: {rejection}");
    }
    let failing: Vec<String> = status
        .components
        .iter()
        .filter(|c| !c.ready)
        .map(|c| {
            if c.message.is_empty() {
                format!(
                    "{}: {}/{} ready",
                    c.name.as_str(),
                    c.ready_replicas,
                    c.desired_replicas
                )
            } else {
                format!("{}: {}", c.name.as_str(), c.message)
            }
        })
        .collect();
    if failing.is_empty() {
        "a component failed".into()
    } else {
        failing.join("; ")
    }
}

#[cfg(test)]
mod tests {
    use kubenest_contracts as wire;

    use super::*;

    fn status(phase: &str, revision: &str) -> StackDeployStatus {
        StackDeployStatus {
            phase: Some(phase.into()),
            observed_revision: Some(revision.into()),
            ..StackDeployStatus::default()
        }
    }

    fn reasons_of(events: &[Event]) -> Vec<&str> {
        events.iter().map(|e| e.reason.as_str()).collect()
    }

    #[test]
    fn a_taken_revision_and_its_end_are_told_once_and_a_failure_names_the_component() {
        let deploying = status("Deploying", "r1");
        assert_eq!(
            reasons_of(&stack_events(&StackDeployStatus::default(), &deploying)),
            ["RevisionAccepted"]
        );
        assert!(stack_events(&deploying, &deploying).is_empty());
        let mut failed = status("Failed", "r1");
        failed.components.push(wire::ComponentStatus {
            name: wire::Name::new("web"),
            kind: "workload".into(),
            ready_replicas: 0,
            desired_replicas: 1,
            ready: false,
            message: "ImagePullBackOff".into(),
        });
        let events = stack_events(&deploying, &failed);
        assert_eq!(reasons_of(&events), ["RolloutFailed"]);
        assert_eq!(
            events[0].note.as_deref(),
            Some("revision r1: web: ImagePullBackOff")
        );
        assert_eq!(
            reasons_of(&stack_events(&failed, &status("Running", "r2"))),
            ["RevisionAccepted", "RolloutSucceeded"]
        );
    }
}
