//! Waiting for an App: until its revision runs, until a new deployment shows, until it is gone.
//! A wait reads the App again when the live event stream says something about it (and every
//! few seconds besides, in case an event was missed); without the stream it reads every second.

use std::time::{Duration, Instant};

use kubenest_api::apps::{AppResponse, DeploymentView};

use super::super::cell;
use super::*;
use crate::api;
use crate::exit::TimedOut;

/// What wakes a wait.
pub struct Waker {
    events: Option<api::Events>,
}

/// How long a wait on the stream goes without reading the App anyway.
const QUIET: Duration = Duration::from_secs(5);
/// How often a wait without the stream reads the App.
const WITHOUT_STREAM: Duration = Duration::from_secs(1);

impl Waker {
    /// Subscribes to App `id`'s events (before its first read, so no change falls between).
    pub async fn for_app(client: &mut api::Client, id: &str) -> Self {
        let query = format!("app_id={}", api::query_value(id));
        Self {
            events: api::Events::open(client, &query).await.ok(),
        }
    }

    /// Returns when the App may have changed, or at `deadline`.
    pub async fn wait(&mut self, deadline: Instant) {
        let left = deadline.saturating_duration_since(Instant::now());
        let Some(events) = &mut self.events else {
            tokio::time::sleep(left.min(WITHOUT_STREAM)).await;
            return;
        };
        match tokio::time::timeout(left.min(QUIET), events.next()).await {
            Ok(Ok(Some(_))) | Err(_) => {}
            // The stream ended or broke: read on a timer from now on.
            Ok(Ok(None) | Err(_)) => self.events = None,
        }
    }
}

/// Where a change stands, judged from the App now and as it was `before` the change.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Progress {
    /// The agent reports the change's revision Running.
    Running,
    /// The agent reports the change's revision failed (the message says why).
    Failed(String),
    /// Not yet: the controllers have not taken the change, or the agent has not applied it.
    Waiting(String),
}

/// A change has been taken once the App's deployment (or revision) differs from `before`'s;
/// it has landed once the agent reports that revision. (A redeploy changes neither; its history
/// row tells instead.)
pub fn progress(app: &AppResponse, before: Option<&AppResponse>) -> Progress {
    let phase = cell(&app.phase);
    let taken = before.is_none_or(|before| {
        app.deployment_id != before.deployment_id || app.revision != before.revision
    });
    let observed = app.revision.is_some() && app.observed_revision == app.revision;
    match phase.as_str() {
        "Running" if taken && observed => Progress::Running,
        "Failed" if taken && observed => Progress::Failed(cell(&app.message)),
        _ => Progress::Waiting(format!("{phase}: {}", cell(&app.message))),
    }
}

/// Reads the App until the change made after `before` runs; prints phase changes to standard
/// error when `progress`. A failure of the change's revision is an error.
pub async fn wait_running(
    client: &mut api::Client,
    id: &str,
    before: Option<&AppResponse>,
    timeout: Duration,
    print_progress: bool,
) -> anyhow::Result<AppResponse> {
    let deadline = Instant::now() + timeout;
    let mut last_phase = String::new();
    let mut waker = Waker::for_app(client, id).await;
    loop {
        let app: AppResponse = client.get_as(&format!("/api/v1/apps/{id}")).await?;
        let phase = cell(&app.phase);
        if print_progress && phase != last_phase {
            eprintln!("  {}: {phase} {}", cell(&app.name), cell(&app.message));
            last_phase = phase.clone();
        }
        match progress(&app, before) {
            Progress::Running => return Ok(app),
            Progress::Failed(message) => anyhow::bail!(
                "App {} failed at revision {}: {message}",
                cell(&app.name),
                short_revision(app.revision.as_deref()),
            ),
            Progress::Waiting(state) if Instant::now() >= deadline => {
                return Err(TimedOut(format!(
                    "App {} is not Running after {}s: {state}",
                    cell(&app.name),
                    timeout.as_secs(),
                ))
                .into());
            }
            Progress::Waiting(_) => waker.wait(deadline).await,
        }
    }
}

/// Reads the App's history until a deployment not in `known` has a result; `failed` is an
/// error.
pub(super) async fn wait_new_deployment(
    client: &mut api::Client,
    id: &str,
    known: &[DeploymentView],
    timeout: Duration,
) -> anyhow::Result<DeploymentView> {
    let known: Vec<&str> = known.iter().map(|d| d.id.as_str()).collect();
    let deadline = Instant::now() + timeout;
    let mut waker = Waker::for_app(client, id).await;
    loop {
        let history: Vec<DeploymentView> = client
            .get_as(&format!("/api/v1/apps/{id}/deployments"))
            .await?;
        let new = history
            .into_iter()
            .find(|d| !known.contains(&d.id.as_str()));
        match new {
            Some(row) if row.result == "succeeded" => return Ok(row),
            Some(row) if row.result == "failed" => {
                anyhow::bail!(
                    "deployment {} failed: {}",
                    cell(&row.id),
                    cell(&row.message)
                )
            }
            _ if Instant::now() >= deadline => {
                return Err(TimedOut(format!(
                    "no result for the new deployment after {}s",
                    timeout.as_secs()
                ))
                .into());
            }
            _ => waker.wait(deadline).await,
        }
    }
}

/// Reads the App until it is gone (the agent confirmed the removal and the finalizer let go).
pub async fn wait_deleted(
    client: &mut api::Client,
    id: &str,
    timeout: Duration,
) -> anyhow::Result<()> {
    let deadline = Instant::now() + timeout;
    let mut waker = Waker::for_app(client, id).await;
    loop {
        match client
            .get_as::<AppResponse>(&format!("/api/v1/apps/{id}"))
            .await
        {
            Err(e) if e.status() == Some(404) => return Ok(()),
            Err(e) => return Err(e.into()),
            Ok(app) if Instant::now() >= deadline => {
                return Err(TimedOut(format!(
                    "App {} still exists after {}s: {}",
                    cell(&app.name),
                    timeout.as_secs(),
                    cell(&app.message)
                ))
                .into());
            }
            Ok(_) => waker.wait(deadline).await,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// An App answer with `fields` set.
    fn app(fields: serde_json::Value) -> AppResponse {
        let mut app = json!({
            "id": "a1", "name": "shop", "org": "acme", "project": "p", "phase": "Running",
            "message": "", "paused": false, "progress_deadline_seconds": 600,
            "components": [], "component_status": [], "conditions": [],
            "sync": {"drift_detected": false, "drift_details": []},
        });
        for (key, value) in fields.as_object().into_iter().flatten() {
            app[key] = value.clone();
        }
        serde_json::from_value(app).unwrap()
    }

    #[test]
    fn a_change_has_landed_only_once_its_own_deployment_runs() {
        let before = app(
            json!({"phase": "Running", "deployment_id": "d1", "revision": "r1",
            "observed_revision": "r1", "message": ""}),
        );
        // Right after the PATCH the controllers have not taken it: still the old deployment.
        assert!(matches!(
            progress(&before, Some(&before)),
            Progress::Waiting(_)
        ));
        let taken = app(
            json!({"phase": "Deploying", "deployment_id": "d2", "revision": "r2",
            "observed_revision": "r1", "message": "applying"}),
        );
        assert!(matches!(
            progress(&taken, Some(&before)),
            Progress::Waiting(_)
        ));
        let landed = app(
            json!({"phase": "Running", "deployment_id": "d2", "revision": "r2",
            "observed_revision": "r2"}),
        );
        assert_eq!(progress(&landed, Some(&before)), Progress::Running);
        // A rollback to the first revision is a new deployment of an old revision.
        let rolled_back = app(json!({"phase": "Running", "deployment_id": "d3",
            "revision": "r1", "observed_revision": "r1"}));
        assert_eq!(progress(&rolled_back, Some(&landed)), Progress::Running);
        let failed = app(
            json!({"phase": "Failed", "deployment_id": "d2", "revision": "r2",
            "observed_revision": "r2", "message": "progress deadline exceeded"}),
        );
        assert_eq!(
            progress(&failed, Some(&before)),
            Progress::Failed("progress deadline exceeded".into())
        );
        // A new App has nothing before it.
        assert_eq!(progress(&landed, None), Progress::Running);
    }
}
