//! The `Ready` condition of a StackDeploy (pure): said from the App's phase, with the rejection
//! or the components not ready as its message.

use chrono::{DateTime, Utc};
use kubenest_contracts::AppPhase;

use crate::crd::{StackDeploy, StackDeployStatus};
use crate::ready::{Readiness, with_ready};

/// Stamps `status`, decided for `held` in `phase`, with the generation it was decided for and
/// the `Ready` condition that says the phase.
pub fn observe(
    status: &mut StackDeployStatus,
    phase: AppPhase,
    held: &StackDeploy,
    now: DateTime<Utc>,
) {
    let generation = held.metadata.generation;
    status.observed_generation = generation;
    let message = message(status, &held.spec.deploy.revision);
    status.conditions = with_ready(&status.conditions, of(phase, &message), generation, now);
}

/// What `Ready` says of an App in `phase`.
pub fn of(phase: AppPhase, message: &str) -> Readiness<'_> {
    match phase {
        AppPhase::Running => Readiness::done("Running", message),
        AppPhase::Paused => Readiness::done("Paused", message),
        AppPhase::Failed => Readiness::failed("Failed", message),
        _ => Readiness::progressing(message),
    }
}

/// The Ready message of `status`: the rejection, else the components not ready, else the
/// revision and phase.
pub fn message(status: &StackDeployStatus, revision: &str) -> String {
    if let Some(rejection) = &status.rejection {
        return rejection.clone();
    }
    let waiting: Vec<String> = status
        .components
        .iter()
        .filter(|c| !c.ready)
        .map(|c| match c.message.as_str() {
            "" => format!("{}: not ready", c.name.as_str()),
            why => format!("{}: {why}", c.name.as_str()),
        })
        .collect();
    if waiting.is_empty() {
        let phase = status.phase.as_deref().unwrap_or("Pending");
        format!("revision {revision}: {phase}")
    } else {
        waiting.join("; ")
    }
}

#[cfg(test)]
mod tests {
    use kubenest_contracts as wire;
    use serde_json::json;

    use super::*;

    #[test]
    fn ready_says_the_phase_and_names_what_waits() {
        assert_eq!(of(AppPhase::Running, "ok").status, "True");
        assert_eq!(of(AppPhase::Paused, "ok").status, "True");
        assert_eq!(of(AppPhase::Failed, "no").status, "False");
        assert_eq!(of(AppPhase::Deploying, "..").status, "Unknown");
        let web: wire::ComponentStatus = serde_json::from_value(json!({
            "name": "web", "kind": "Deployment", "ready_replicas": 1, "desired_replicas": 2,
            "ready": false, "message": "1/2 replicas ready"
        }))
        .unwrap();
        let mut status = StackDeployStatus {
            phase: Some("Deploying".into()),
            components: vec![web],
            ..StackDeployStatus::default()
        };
        assert_eq!(message(&status, "r1"), "web: 1/2 replicas ready");
        status.components[0].ready = true;
        assert_eq!(message(&status, "r1"), "revision r1: Deploying");
        status.rejection = Some("NamespaceViolation: no".into());
        assert_eq!(message(&status, "r1"), "NamespaceViolation: no");
    }
}
