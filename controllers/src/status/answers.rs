//! The agent's answers to commands this process sent: an acceptance or a rejection, written to
//! the object the command was for (and, for a redeploy, to its history row).

use std::sync::Arc;
use std::time::Instant;

use kube::ResourceExt;
use kubenest_contracts as wire;
use kubenest_crds::app::App;
use kubenest_crds::observed::{
    AddonRefused, AppRedeployHandled, AppRejected, ObservedRejection, ProjectEnsured,
    ProjectRefused,
};
use serde::Serialize;

use super::{Router, patch_status, phase_name};
use crate::intents::{ObjectKey, Sent};
use kubenest_store::DeploymentStatus;

/// A refusal as the logs and a refused redeploy's history message show it: its JSON.
#[derive(Debug, Serialize)]
struct Refusal {
    reason: String,
    message: String,
    field: Option<String>,
}

impl Refusal {
    fn of(rejected: &wire::CommandRejected) -> Self {
        Self {
            reason: phase_name(&rejected.reason),
            message: rejected.message.clone(),
            field: rejected.field.clone(),
        }
    }
}

impl std::fmt::Display for Refusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Through a `Value`, so the keys come in the order they always did (sorted).
        match serde_json::to_value(self) {
            Ok(value) => value.fmt(f),
            Err(_) => write!(f, "{}: {}", self.reason, self.message),
        }
    }
}

impl Router {
    /// Records the agent's acceptance of `revision` of `app`: with the App's next status if it
    /// comes within [`ACCEPTANCE_WAIT`], else alone.
    fn accepted(&self, app: Arc<App>, revision: String) {
        let Some(uid) = app.uid() else { return };
        self.acceptances.add(&uid, app, &revision, Instant::now());
    }

    /// The agent's answer to a command this process sent.
    pub(super) async fn answered(
        &self,
        cluster_id: &str,
        command_id: uuid::Uuid,
        rejected: Option<wire::CommandRejected>,
    ) -> Result<(), kube::Error> {
        let Some(sent) = self.plane.intents.command(command_id) else {
            return Ok(()); // sent by another replica, or long ago
        };
        let client = &self.plane.client;
        let app = |key: &ObjectKey| self.caches.app_on(cluster_id, &key.uid);
        let rejection = rejected.as_ref().map(Refusal::of);
        match (sent, rejection) {
            (Sent::AppDeploy { app: key, revision }, None) => {
                if let Some(app) = app(&key) {
                    self.accepted(app, revision);
                }
            }
            (Sent::AppDeploy { app: key, revision }, Some(r)) => {
                if let Some(app) = app(&key) {
                    let rejected = AppRejected {
                        rejection: ObservedRejection {
                            revision,
                            reason: r.reason,
                            message: r.message,
                            field: r.field,
                        },
                    };
                    patch_status(client, &*app, &rejected).await?;
                }
            }
            (
                Sent::AppRedeploy {
                    app: key,
                    token,
                    deployment,
                    org,
                },
                rejection,
            ) => {
                if let Some(app) = app(&key) {
                    let (outcome, message) = match &rejection {
                        None => (
                            DeploymentStatus::Succeeded,
                            "the agent restarted the workloads".to_owned(),
                        ),
                        Some(r) => (
                            DeploymentStatus::Failed,
                            format!("the agent refused the redeploy: {r}"),
                        ),
                    };
                    if let Err(error) = self
                        .plane
                        .history
                        .finish_deployment(&org, deployment, outcome, &message)
                        .await
                    {
                        tracing::debug!(%error, "redeploy outcome not recorded");
                    }
                    let handled = AppRedeployHandled {
                        handled_redeploy: token,
                    };
                    patch_status(client, &*app, &handled).await?;
                }
            }
            (
                Sent::ProjectEnsure {
                    project: key,
                    generation,
                },
                rejection,
            ) => {
                if let Some(project) = self.caches.project_on(cluster_id, &key.uid) {
                    match rejection {
                        None => {
                            let ensured = ProjectEnsured {
                                ensured_generation: generation,
                            };
                            patch_status(client, &*project, &ensured).await?;
                        }
                        Some(r) => {
                            let refused = ProjectRefused {
                                cluster_phase: "Failed".into(),
                                cluster_message: r.message,
                            };
                            patch_status(client, &*project, &refused).await?;
                        }
                    }
                }
            }
            (
                Sent::AddonApply {
                    addon: key,
                    revision,
                },
                Some(r),
            ) => {
                if let Some(addon) = self.caches.addon_on(cluster_id, &key.uid) {
                    let refused = AddonRefused {
                        observed_revision: revision,
                        cluster_phase: "Failed".into(),
                        message: format!("{}: {}", r.reason, r.message),
                    };
                    patch_status(client, &*addon, &refused).await?;
                }
            }
            (sent, Some(r)) => tracing::warn!(?sent, rejection = %r, "the agent refused a command"),
            (_, None) => {}
        }
        Ok(())
    }
}
