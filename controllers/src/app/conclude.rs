//! Conclude, the last step of a rollout pass: weigh what the steps came to into the status
//! ([`weigh::conclude`]), show a silent cluster's Apps as only their last observation, record
//! the deployment's outcome once it is final, and write the status.

use chrono::Utc;
use kube::runtime::controller::Action;
use kubenest_crds::app::App;
use kubenest_domain::app::Outcome;

use super::act::Acted;
use super::facts::Facts;
use super::record::{finish, write_status};
use super::weigh::{self, Pass};
use crate::intents::ObjectKey;
use crate::plane::Plane;
use crate::reach;
use crate::reconcile::Error;

/// Writes what the pass means and says when to look again.
pub(super) async fn conclude(
    app: &App,
    plane: &Plane,
    key: &ObjectKey,
    facts: &Facts,
    acted: Acted,
) -> Result<Action, Error> {
    let deadline_seconds = app.spec.progress_deadline_seconds;
    let timing = weigh::timing(&acted.status, &acted.revision, deadline_seconds, Utc::now());
    let mut conclusion = weigh::conclude(
        &facts.old,
        acted.status,
        &Pass {
            revision: &acted.revision,
            generation: facts.generation,
            deadline_seconds,
            timing: &timing,
            waiting: acted.waiting,
            retry: acted.retry,
        },
    );
    let silence = reach::silence_in(&plane.caches, &key.namespace, &acted.placement.cluster_name);
    let status = &mut conclusion.status;
    status.last_observation = reach::show(
        &facts.old.conditions,
        &mut status.conditions,
        silence.as_ref(),
        conclusion.assessment.phase,
        Some(facts.generation),
    );
    let assessment = &conclusion.assessment;
    if let (Some(outcome), Some(id)) = (assessment.outcome, status.deployment_id.as_deref()) {
        // Once per deployment, not on a change of phase: when the status router's write and
        // this controller's own race, a reconcile may never see the phase change (the App was
        // Running before a rollback and is Running again), and the row would stay pending.
        // A restarted controller records each outcome once more; a finished row keeps its own.
        let recorded = plane.intents.outcome_recorded(&key.uid, id);
        if conclusion.changed || !recorded {
            let org = &acted.placement.org_id;
            finish(plane, org, id, outcome, &assessment.message).await?;
            if !recorded {
                confirmed(outcome, status.rollout_started_at.as_deref());
            }
            plane.intents.record_outcome(&key.uid, id);
        }
    }
    write_status(
        plane,
        key,
        app.metadata.generation,
        &facts.old,
        &conclusion.status,
    )
    .await?;
    Ok(Action::requeue(conclusion.requeue))
}

/// Records in `revision_confirmation_seconds` how long the revision took from its deployment
/// row (`started`, RFC 3339) to its outcome.
fn confirmed(outcome: Outcome, started: Option<&str>) {
    let Some(started) = started.and_then(|s| chrono::DateTime::parse_from_rfc3339(s).ok()) else {
        return;
    };
    let seconds = (Utc::now() - started.with_timezone(&Utc)).as_seconds_f64();
    let outcome = match outcome {
        Outcome::Succeeded => "succeeded",
        Outcome::Failed => "failed",
    };
    tracing::info!(outcome, seconds, "revision confirmed");
    crate::metrics::metrics().confirmed(outcome, seconds);
}
