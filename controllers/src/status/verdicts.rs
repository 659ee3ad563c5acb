//! The agent's verdicts on verified revisions (`verification.result`): written into the App's
//! `status.verification` and its deployment's history row, told as a Kubernetes Event on the
//! App (`VerificationPassed`, `VerificationFailed`, `VerificationInconclusive`), counted, and
//! left for the App
//! controller to act on ([`crate::app`]). A verdict on a revision the App has moved past (a
//! person changed it during the window) is ignored: it was cancelled.

use kubenest_contracts as wire;
use kubenest_crds::verification::{VerificationSignal, VerificationStatus};
use kubenest_runtime::events::{EventType, event};
use serde_json::{Value, json};

use super::{Router, patch_status};
use crate::rfc3339;

impl Router {
    pub(super) async fn verified(
        &self,
        cluster_id: &str,
        result: wire::VerificationResult,
    ) -> Result<(), kube::Error> {
        let Some(app) = self.caches.app_on(cluster_id, result.app_id.as_str()) else {
            return self.stray(cluster_id, "verification.result");
        };
        let status = app.status.clone().unwrap_or_default();
        if status.revision.as_deref() != Some(result.revision.as_str()) {
            tracing::info!(app = %result.app_id, revision = %result.revision, "a verdict on a revision since replaced ignored");
            return Ok(());
        }
        let observed_at = rfc3339(result.observed_at);
        let same = status
            .verification
            .as_ref()
            .is_some_and(|v| v.revision == result.revision && v.observed_at == observed_at);
        if same {
            return Ok(()); // sent again
        }
        crate::metrics::metrics()
            .verdicts
            .get_or_create(&crate::metrics::VerdictLabel {
                verdict: result.verdict.as_str(),
            })
            .inc();
        let verification = VerificationStatus {
            revision: result.revision.clone(),
            verdict: result.verdict.as_str().into(),
            reason: result.reason.clone(),
            window_seconds: result.window_seconds,
            started_at: rfc3339(result.started_at),
            observed_at,
            signals: result
                .signals
                .iter()
                .map(|s| VerificationSignal {
                    name: s.name.clone(),
                    value: s.value,
                    baseline: s.baseline,
                    threshold: s.threshold,
                    failed: s.failed,
                })
                .collect(),
            action: None,
        };
        self.record_verdict(&app, &status, &verification).await;
        let (reason, warning) = kubenest_crds::names::reasons::verdict(result.verdict);
        let type_ = if warning {
            EventType::Warning
        } else {
            EventType::Normal
        };
        self.plane.events.emit(
            &*app,
            [event(
                type_,
                reason,
                format!("revision {}: {}", result.revision, result.reason),
                "Verify",
            )],
        );
        // `action: null` clears what was done with an earlier revision's verdict.
        let mut written = serde_json::to_value(&verification).unwrap_or(Value::Null);
        written["action"] = Value::Null;
        patch_status(
            &self.plane.client,
            &*app,
            &json!({ "verification": written }),
        )
        .await
    }

    /// Keeps the verdict in the history row of the App's current deployment (a failure is
    /// logged: the status holds the verdict regardless).
    async fn record_verdict(
        &self,
        app: &kubenest_crds::app::App,
        status: &kubenest_crds::app::AppStatus,
        verification: &VerificationStatus,
    ) {
        let namespace = app.metadata.namespace.as_deref().unwrap_or_default();
        let org = crate::placement::org_in(&self.caches, namespace);
        let id = status
            .deployment_id
            .as_deref()
            .and_then(|id| uuid::Uuid::parse_str(id).ok());
        let (Some(org), Some(id)) = (org, id) else {
            return;
        };
        let verdict = serde_json::to_value(verification).unwrap_or(Value::Null);
        if let Err(error) = self
            .plane
            .history
            .record_verification(&org, id, &verdict)
            .await
        {
            tracing::warn!(%error, deployment = %id, "the verdict was not recorded in the history");
        }
    }
}
