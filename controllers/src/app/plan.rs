//! Plan, the second step of a rollout pass (pure): from the facts, either a status to wait in
//! (the App cannot be placed or built) or the steps that move the rollout on, in order.

use std::time::Duration;

use kubenest_crds::app::AppStatus;

use super::facts::{Built, Facts, Target};
use super::weigh;

/// How long an App with an invalid spec waits before it is built again: a missing
/// AddonDefinition may appear; other errors need a spec change.
pub const INVALID_RETRY: Duration = Duration::from_secs(60);
/// How long an App whose project or cluster is not ready waits.
pub const UNPLACED_RETRY: Duration = Duration::from_secs(10);

/// What a rollout pass does.
#[derive(Debug)]
pub(super) enum Plan {
    /// Nothing can be rolled out yet: write this status and look again after `requeue`.
    Wait {
        status: Box<AppStatus>,
        requeue: Duration,
    },
    /// Take these steps for the built generation, then conclude.
    Roll(Box<Built>, Vec<Step>),
}

/// One step of a rollout, carried out by [`super::act`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Step {
    /// Record the generation's deployment row: the durable intent, before anything is sent.
    Record,
    /// Point the status at the pending rollback row that restored this spec.
    Adopt,
    /// Hold the cleanup finalizer, so a deletion waits for the cluster side to be removed.
    Hold,
    /// The agent stored this revision durably and converges on its own: a re-send is only a
    /// safety net now, not a retry, and waits longer.
    SlowResend,
    /// Send the deploy when its backoff allows (else say what the last attempt waits for).
    Send,
    /// The cluster has the revision: forget the send's backoff.
    Settle,
    /// Send `app.redeploy` for the unhandled token.
    Redeploy,
}

/// Plans the pass: [`Plan::Wait`] when the App cannot be placed or built, else the steps.
pub(super) fn plan(facts: &Facts, target: Target) -> Plan {
    let built = match target {
        Target::Unplaced { reason, message } => {
            return Plan::Wait {
                status: Box::new(weigh::unplaced(
                    &facts.old,
                    reason,
                    message,
                    facts.generation,
                )),
                requeue: UNPLACED_RETRY,
            };
        }
        Target::Invalid(why) => {
            return Plan::Wait {
                status: Box::new(weigh::invalid_spec(&facts.old, why, facts.generation)),
                requeue: INVALID_RETRY,
            };
        }
        Target::Built(built) => built,
    };
    let old = &facts.old;
    let revision = Some(built.revision.as_str());
    let mut steps = Vec::new();
    match (&built.adopt, built.recorded) {
        (Some(_), _) => steps.push(Step::Adopt),
        (None, false) => steps.push(Step::Record),
        (None, true) => {}
    }
    if !facts.held {
        steps.push(Step::Hold);
    }
    let observed = old.observed_revision.as_deref() == revision;
    let rejected = old
        .rejection
        .as_ref()
        .is_some_and(|r| Some(r.revision.as_str()) == revision);
    // A passed deadline does not stop the send: durable intent is delivered until the cluster
    // confirms it, refuses it, or a newer revision supersedes it.
    if !rejected && (!observed || built.differs) {
        if old.accepted_revision.as_deref() == revision && !built.differs {
            steps.push(Step::SlowResend);
        }
        steps.push(Step::Send);
    } else if observed {
        steps.push(Step::Settle);
    }
    if built.redeploy.is_some() {
        steps.push(Step::Redeploy);
    }
    Plan::Roll(built, steps)
}

#[cfg(test)]
mod tests {
    use kubenest_crds::app::Rejection;

    use super::Step::*;
    use super::*;
    use crate::app::fixtures;

    /// One row of the table: what the status and the work in flight say, and the steps.
    struct Case {
        name: &'static str,
        recorded: bool,
        adopt: bool,
        held: bool,
        observed: Option<&'static str>,
        accepted: Option<&'static str>,
        rejected: Option<&'static str>,
        differs: bool,
        redeploy: bool,
        steps: &'static [Step],
    }

    const BASE: Case = Case {
        name: "",
        recorded: true,
        adopt: false,
        held: true,
        observed: None,
        accepted: None,
        rejected: None,
        differs: false,
        redeploy: false,
        steps: &[],
    };

    fn run(case: &Case) -> Vec<Step> {
        let status = AppStatus {
            observed_revision: case.observed.map(Into::into),
            accepted_revision: case.accepted.map(Into::into),
            rejection: case.rejected.map(|revision| Rejection {
                revision: revision.into(),
                reason: "invalid".into(),
                message: "no".into(),
                field: None,
            }),
            ..AppStatus::default()
        };
        let facts = Facts {
            generation: 2,
            old: status,
            held: case.held,
        };
        let mut built = fixtures::built("r1");
        built.recorded = case.recorded;
        built.adopt = case.adopt.then(fixtures::pending_row);
        built.differs = case.differs;
        built.redeploy = case.redeploy.then(|| "t1".to_owned());
        match plan(&facts, Target::Built(Box::new(built))) {
            Plan::Roll(_, steps) => steps,
            Plan::Wait { .. } => panic!("{}: waits", case.name),
        }
    }

    #[test]
    fn each_state_of_a_rollout_plans_its_steps() {
        let cases = [
            Case {
                name: "a new generation is recorded, held and sent",
                recorded: false,
                held: false,
                steps: &[Record, Hold, Send],
                ..BASE
            },
            Case {
                name: "a restored snapshot adopts its rollback row instead of recording",
                recorded: false,
                adopt: true,
                steps: &[Adopt, Send],
                ..BASE
            },
            Case {
                name: "adoption wins over a recorded generation (a rollback to the same spec)",
                adopt: true,
                observed: Some("r1"),
                steps: &[Adopt, Settle],
                ..BASE
            },
            Case {
                name: "recorded, not yet observed: sent again when due (past its deadline too)",
                steps: &[Send],
                ..BASE
            },
            Case {
                name: "accepted by the agent: the re-send is a slow safety net",
                accepted: Some("r1"),
                steps: &[SlowResend, Send],
                ..BASE
            },
            Case {
                name: "accepted but the snapshot differs: a plain re-send",
                accepted: Some("r1"),
                differs: true,
                steps: &[Send],
                ..BASE
            },
            Case {
                name: "observed: the backoff is forgotten",
                observed: Some("r1"),
                steps: &[Settle],
                ..BASE
            },
            Case {
                name: "observed, but the cluster lost it: sent again",
                observed: Some("r1"),
                differs: true,
                steps: &[Send],
                ..BASE
            },
            Case {
                name: "an older revision observed: the new one is sent",
                observed: Some("r0"),
                steps: &[Send],
                ..BASE
            },
            Case {
                name: "refused: never re-sent, even when it differs",
                rejected: Some("r1"),
                differs: true,
                steps: &[],
                ..BASE
            },
            Case {
                name: "refused after it was observed: the backoff is forgotten",
                rejected: Some("r1"),
                observed: Some("r1"),
                steps: &[Settle],
                ..BASE
            },
            Case {
                name: "a refusal of another revision does not stop this one",
                rejected: Some("r0"),
                steps: &[Send],
                ..BASE
            },
            Case {
                name: "a redeploy token rides along an observed revision",
                observed: Some("r1"),
                redeploy: true,
                steps: &[Settle, Redeploy],
                ..BASE
            },
            Case {
                name: "a redeploy token rides along a send",
                redeploy: true,
                steps: &[Send, Redeploy],
                ..BASE
            },
            Case {
                name: "a lost finalizer is held again",
                held: false,
                observed: Some("r1"),
                steps: &[Hold, Settle],
                ..BASE
            },
        ];
        for case in &cases {
            assert_eq!(run(case), case.steps, "{}", case.name);
        }
    }

    #[test]
    fn an_app_that_cannot_be_placed_or_built_waits_with_a_status_that_says_why() {
        let facts = Facts {
            generation: 2,
            old: AppStatus::default(),
            held: true,
        };
        let unplaced = Target::Unplaced {
            reason: "ProjectNotReady",
            message: "wait".into(),
        };
        let Plan::Wait { status, requeue } = plan(&facts, unplaced) else {
            panic!("rolls out unplaced");
        };
        assert_eq!(
            (status.phase.as_deref(), requeue),
            (Some("Pending"), UNPLACED_RETRY)
        );
        let Plan::Wait { status, requeue } = plan(&facts, Target::Invalid("no".into())) else {
            panic!("rolls out invalid");
        };
        assert_eq!(
            (status.phase.as_deref(), requeue),
            (Some("Failed"), INVALID_RETRY)
        );
    }
}
