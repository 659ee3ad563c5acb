//! Act, the third step of a rollout pass: carry out the planned steps, in order. The deployment
//! row is written before anything is sent; sends go out when their backoff allows.

use std::time::Duration;

use kube::ResourceExt;
use kubenest_contracts as wire;
use kubenest_crds::app::{App, AppStatus};
use kubenest_store::Operation;

use super::facts::{Built, Facts};
use super::plan::Step;
use super::record::{new_deployment, record};
use super::{ACCEPTED_RESEND, holding};
use crate::conditions::{self, PROGRESSING};
use crate::intents::{ObjectKey, Sent};
use crate::placement::Placement;
use crate::plane::Plane;
use crate::reconcile::{At, Error};
use crate::rfc3339;

/// What the steps came to, for [`super::conclude`].
#[derive(Debug)]
pub(super) struct Acted {
    /// The status with the deployment row the generation is recorded in.
    pub status: AppStatus,
    pub placement: Placement,
    pub revision: String,
    /// Why the App waits, from this pass's send or the last one's.
    pub waiting: Option<(String, String)>,
    /// When a command is due again, if one is still to be (re-)sent.
    pub retry: Option<Duration>,
}

/// Takes `steps` for the built generation.
pub(super) async fn act(
    app: &App,
    plane: &Plane,
    key: &ObjectKey,
    facts: &Facts,
    built: Built,
    steps: &[Step],
) -> Result<Acted, Error> {
    let Built {
        placement,
        deploy,
        revision,
        mut adopt,
        redeploy: token,
        ..
    } = built;
    let mut deploy = Some(deploy);
    let mut status = facts.old.clone();
    let mut waiting = None;
    let mut retry: Option<Duration> = None;
    for step in steps {
        match step {
            Step::Record | Step::Adopt => {
                let row = match adopt.take() {
                    Some(row) => row,
                    None => {
                        record(app, plane, key, &placement, &revision, facts.generation).await?
                    }
                };
                status.revision = Some(revision.clone());
                status.deployment_id = Some(row.id.to_string());
                status.recorded_generation = Some(facts.generation);
                status.rollout_started_at = Some(rfc3339(row.created_at));
                plane.intents.settled(&key.uid);
            }
            Step::Hold => holding::hold(app, plane, key).await?,
            Step::SlowResend => plane.intents.hold_since_sent(&key.uid, ACCEPTED_RESEND),
            Step::Send => {
                let Some(deploy) = deploy.take() else {
                    continue;
                };
                if plane.intents.due(&key.uid) {
                    // Forgotten before sending: a snapshot that arrives meanwhile is newer and
                    // stays.
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
                retry = sooner(retry, attempt.retry);
            }
            Step::Settle => plane.intents.settled(&key.uid),
            Step::Redeploy => {
                if let Some(token) = &token {
                    let due = redeploy(app, plane, key, &placement, &revision, token).await?;
                    retry = sooner(retry, due);
                }
            }
        }
    }
    let waiting = waiting.or_else(|| {
        conditions::get(&facts.old.conditions, PROGRESSING)
            .map(|c| (c.reason.clone(), c.message.clone()))
    });
    Ok(Acted {
        status,
        placement,
        revision,
        waiting,
        retry,
    })
}

fn sooner(retry: Option<Duration>, due: Duration) -> Option<Duration> {
    Some(retry.map_or(due, |r| r.min(due)))
}

/// Redeploy: `kubenest.io/redeploy: <token>` restarts the workloads at the same revision, once
/// per token. `app.redeploy` (with a deployment row of its own) is re-sent with backoff until
/// the agent accepts it; the status router then marks the token handled. Returns when it is due
/// again.
async fn redeploy(
    app: &App,
    plane: &Plane,
    key: &ObjectKey,
    placement: &Placement,
    revision: &str,
    token: &str,
) -> Result<Duration, Error> {
    let due_key = format!("{}/redeploy", key.uid);
    if !plane.intents.due(&due_key) {
        return Ok(plane.intents.until_due(&due_key));
    }
    let spec = serde_json::to_value(&app.spec).map_err(|e| Error::Invalid(e.to_string()))?;
    let intent_key = format!("{}/redeploy/{token}", key.uid);
    let new = new_deployment(
        app,
        key,
        placement,
        intent_key,
        revision,
        Operation::Redeploy,
        spec,
    );
    let (row, _) = plane
        .history
        .record_deployment(&new)
        .await
        .at("recording the redeploy of App", key)?;
    let command = wire::AppRedeploy {
        app: super::app_ref(key, placement),
        revision: revision.to_owned(),
        restart_id: wire::Id::new(row.id.to_string()),
    };
    let sent = Sent::AppRedeploy {
        app: key.clone(),
        token: token.to_owned(),
        deployment: row.id,
        org: placement.org_id.clone(),
    };
    if let Err(error) = plane.send(placement, command, sent).await {
        tracing::debug!(%error, name = app.name_any(), "app.redeploy not routed");
    }
    Ok(plane.intents.backoff(&due_key))
}
