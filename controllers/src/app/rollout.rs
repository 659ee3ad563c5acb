//! The rollout of an App's current generation, fetch → decide → act: place the App and build its
//! deploy, record the deployment row **before** anything is sent, send what the cluster does not
//! have yet (with backoff), then write what it all means ([`decide::conclude`]).

use std::time::Duration;

use chrono::Utc;
use kube::ResourceExt;
use kube::runtime::controller::Action;
use kubenest_crds::app::App;
use kubenest_crds::names::annotations;
use kubenest_domain::app::{AppIdentity, Outcome, build_deploy};

use super::decide::{self, Pass};
use super::record::{finish, record, write_status};
use super::{ACCEPTED_RESEND, addons, holding, redeploy, rollback};
use crate::conditions::{self, PROGRESSING};
use crate::intents::{ObjectKey, Sent};
use crate::placement;
use crate::plane::Plane;
use crate::reach;
use crate::reconcile::Error;
use crate::rfc3339;

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

/// Rolls out the App's current generation (or carries out a rollback request first).
pub(super) async fn apply(app: &App, plane: &Plane, key: &ObjectKey) -> Result<Action, Error> {
    let generation = app.metadata.generation.unwrap_or(0);
    let old = app.status.clone().unwrap_or_default();

    if let Some(target) = app.annotations().get(annotations::ROLLBACK_TO) {
        return rollback::rollback(app, plane, key, target, &old).await;
    }

    // Fetch: where the App goes and what it is.
    let placement = match placement::place(&plane.caches, &key.namespace, &app.spec.project, true) {
        Ok(placement) => placement,
        Err(unplaced) => {
            let status = decide::unplaced(&old, unplaced.reason(), unplaced.message(), generation);
            write_status(plane, key, &old, &status).await?;
            return Ok(Action::requeue(decide::UNPLACED_RETRY));
        }
    };
    let addons = addons::resolve_addons(plane, &key.namespace, &app.spec);
    let identity = AppIdentity {
        app_id: key.uid.clone(),
        name: key.name.clone(),
        project_id: placement.project_id.clone(),
        namespace: placement.namespace.clone(),
    };
    let deploy = match build_deploy(&identity, &app.spec, &addons) {
        Ok(deploy) => deploy,
        Err(error) => {
            let status = decide::invalid_spec(&old, error.to_string(), generation);
            write_status(plane, key, &old, &status).await?;
            return Ok(Action::requeue(decide::INVALID_RETRY));
        }
    };
    let revision = deploy.revision.clone();
    tracing::Span::current().record("revision", revision.as_str());
    let mut status = old.clone();

    // 1. The deployment row, before anything is sent.
    let adopt = rollback::restored_rollback(app, plane, &placement, &revision, &status).await?;
    if !decide::recorded(&status, generation, &revision) || adopt.is_some() {
        let row = match adopt {
            Some(row) => row,
            None => record(app, plane, key, &placement, &revision, generation).await?,
        };
        status.revision = Some(revision.clone());
        status.deployment_id = Some(row.id.to_string());
        status.recorded_generation = Some(generation);
        status.rollout_started_at = Some(rfc3339(row.created_at));
        plane.intents.settled(&key.uid);
    }
    decide::drop_stale_rejection(&mut status, &revision);

    // 2. Send what the cluster does not have yet, once its deletion is sure to be cleaned up.
    if !holding::held(app) {
        holding::hold(app, plane, key).await?;
    }
    let deadline_seconds = app.spec.progress_deadline_seconds;
    let timing = decide::timing(&status, &revision, deadline_seconds, Utc::now());
    let checksum = deploy.checksum();
    let differs = plane.intents.differs(&key.uid, &revision, &checksum);
    let previous_wait = conditions::get(&status.conditions, PROGRESSING)
        .map(|c| (c.reason.clone(), c.message.clone()));
    let mut waiting: Option<(String, String)> = None;
    let mut retry: Option<Duration> = None;
    if decide::must_send(&timing, differs) {
        let accepted = status.accepted_revision.as_deref() == Some(revision.as_str());
        if accepted && !differs {
            // The agent stored this revision durably and converges on its own: re-sending is
            // only a safety net now, not a retry.
            plane.intents.hold_since_sent(&key.uid, ACCEPTED_RESEND);
        }
        if plane.intents.due(&key.uid) {
            // Forgotten before sending: a snapshot that arrives meanwhile is newer and stays.
            plane.intents.clear_held(&key.uid);
        }
        let sent = Sent::AppDeploy {
            app: key.clone(),
            revision: revision.clone(),
        };
        let routed = format!(
            "revision {revision} was sent to the cluster; waiting for the agent to report it"
        );
        let previous = conditions::get(&status.conditions, PROGRESSING);
        let attempt = plane
            .attempt(&key.uid, &placement, deploy, sent, routed, previous)
            .await;
        waiting = attempt.waiting;
        retry = Some(attempt.retry);
    } else if timing.observed {
        plane.intents.settled(&key.uid);
    }
    redeploy::redeploy(app, plane, key, &placement, &revision, &mut retry).await?;

    // 3. What it all means (and on a silent cluster, that it is only the last observation).
    let mut conclusion = decide::conclude(
        &old,
        status,
        &Pass {
            revision: &revision,
            generation,
            deadline_seconds,
            timing: &timing,
            waiting: waiting.or(previous_wait),
            retry,
        },
    );
    let silence = reach::silence_in(&plane.caches, &key.namespace, &placement.cluster_name);
    let status = &mut conclusion.status;
    status.last_observation = reach::show(
        &old.conditions,
        &mut status.conditions,
        silence.as_ref(),
        conclusion.assessment.phase,
        Some(generation),
    );
    let assessment = &conclusion.assessment;
    if let (Some(outcome), Some(id)) = (
        assessment.outcome,
        conclusion.status.deployment_id.as_deref(),
    ) {
        // Once per deployment, not on a change of phase: when the status router's write and
        // this controller's own race, a reconcile may never see the phase change (the App was
        // Running before a rollback and is Running again), and the row would stay pending.
        // A restarted controller records each outcome once more; a finished row keeps its own.
        if conclusion.changed || !plane.intents.outcome_recorded(&key.uid, id) {
            finish(plane, &placement.org_id, id, outcome, &assessment.message).await?;
            if !plane.intents.outcome_recorded(&key.uid, id) {
                confirmed(outcome, conclusion.status.rollout_started_at.as_deref());
            }
            plane.intents.record_outcome(&key.uid, id);
        }
    }
    write_status(plane, key, &old, &conclusion.status).await?;
    Ok(Action::requeue(conclusion.requeue))
}
