//! The agent's answers to commands this process sent: an acceptance or a rejection, written to
//! the object the command was for (and, for a redeploy, to its history row).

use std::sync::Arc;
use std::time::Instant;

use kube::ResourceExt;
use kubenest_contracts as wire;
use kubenest_crds::app::App;
use serde_json::json;

use super::{Router, patch_status, phase_name};
use crate::intents::{ObjectKey, Sent};
use kubenest_store::DeploymentStatus;

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
        let rejection = rejected.as_ref().map(|r| {
            json!({
                "reason": phase_name(&r.reason),
                "message": r.message,
                "field": r.field,
            })
        });
        match (sent, rejection) {
            (Sent::AppDeploy { app: key, revision }, None) => {
                if let Some(app) = app(&key) {
                    self.accepted(app, revision);
                }
            }
            (Sent::AppDeploy { app: key, revision }, Some(mut rejection)) => {
                if let Some(app) = app(&key) {
                    rejection["revision"] = json!(revision);
                    patch_status(client, &*app, json!({ "rejection": rejection })).await?;
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
                    patch_status(client, &*app, json!({ "handledRedeploy": token })).await?;
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
                    let patch = match rejection {
                        None => json!({ "ensuredGeneration": generation }),
                        Some(r) => {
                            json!({ "clusterPhase": "Failed", "clusterMessage": r["message"] })
                        }
                    };
                    patch_status(client, &*project, patch).await?;
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
                    let message = format!(
                        "{}: {}",
                        r["reason"].as_str().unwrap_or_default(),
                        r["message"].as_str().unwrap_or_default()
                    );
                    patch_status(client, &*addon, json!({
                        "observedRevision": revision, "clusterPhase": "Failed", "message": message,
                    }))
                    .await?;
                }
            }
            (sent, Some(r)) => tracing::warn!(?sent, rejection = %r, "the agent refused a command"),
            (_, None) => {}
        }
        Ok(())
    }
}
