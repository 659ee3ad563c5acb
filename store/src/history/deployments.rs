//! Deployment records: one row per change of an App, written before the change is dispatched.

use chrono::{DateTime, Utc};
use serde::Serialize;
use serde_json::Value;
use uuid::Uuid;

use super::History;
use crate::error::StoreError;

macro_rules! text_enum {
    ($(#[$meta:meta])* $name:ident { $($variant:ident => $text:literal),* $(,)? }) => {
        $(#[$meta])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, serde::Deserialize)]
        #[serde(rename_all = "snake_case")]
        pub enum $name { $($variant),* }

        impl $name {
            /// The stored text.
            pub fn as_str(self) -> &'static str {
                match self { $(Self::$variant => $text),* }
            }

            fn parse(text: &str) -> Result<Self, StoreError> {
                match text {
                    $($text => Ok(Self::$variant),)*
                    other => Err(StoreError::InvalidTransition(format!("unknown {} {other:?}", stringify!($name)))),
                }
            }
        }
    };
}
pub(crate) use text_enum;

text_enum! {
    /// What a deployment did to its App.
    Operation {
        Create => "create", Update => "update", Rollback => "rollback", Pause => "pause",
        Resume => "resume", Redeploy => "redeploy", Delete => "delete",
    }
}

text_enum! {
    /// A deployment's outcome. `pending` changes once; the one later change is `failed` to
    /// `succeeded`, when a revision that missed its deadline runs after all, so the row never
    /// contradicts the App. `forced`: an administrator removed the App without its cluster's
    /// confirmation.
    DeploymentStatus {
        Pending => "pending", Succeeded => "succeeded", Failed => "failed", Superseded => "superseded",
        Forced => "forced",
    }
}

impl Operation {
    /// Which operation a change of an App's spec from `before` into `after` is: pausing and
    /// resuming when only `paused` flips, creating when there was nothing before.
    pub fn between(before: Option<&Value>, after: &Value) -> Self {
        let Some(before) = before else {
            return Self::Create;
        };
        let paused = |spec: &Value| spec.get("paused").and_then(Value::as_bool) == Some(true);
        let without_paused = |spec: &Value| {
            let mut spec = spec.clone();
            if let Some(map) = spec.as_object_mut() {
                map.remove("paused");
            }
            spec
        };
        let same_otherwise = without_paused(before) == without_paused(after);
        match (paused(before), paused(after)) {
            (false, true) if same_otherwise => Self::Pause,
            (true, false) if same_otherwise => Self::Resume,
            _ => Self::Update,
        }
    }
}

/// A deployment about to be dispatched.
#[derive(Debug, Clone, PartialEq)]
pub struct NewDeployment {
    /// Unique per intended change (e.g. `{app uid}/{generation}`): recording it twice is harmless.
    pub intent_key: String,
    pub org_id: String,
    pub project_id: String,
    pub cluster_id: String,
    pub app_id: String,
    pub app_name: String,
    pub revision: String,
    pub operation: Operation,
    pub actor: String,
    pub spec_before: Option<Value>,
    pub spec_after: Value,
    pub rollback_of: Option<Uuid>,
}

/// A recorded deployment.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Deployment {
    pub id: Uuid,
    pub intent_key: String,
    pub org_id: String,
    pub project_id: String,
    pub cluster_id: String,
    pub app_id: String,
    pub app_name: String,
    pub revision: String,
    pub operation: Operation,
    pub actor: String,
    pub spec_before: Option<Value>,
    pub spec_after: Value,
    pub rollback_of: Option<Uuid>,
    pub status: DeploymentStatus,
    pub message: String,
    pub created_at: DateTime<Utc>,
    pub finished_at: Option<DateTime<Utc>>,
    /// The verdict on the revision once it ran, when it was verified.
    pub verification: Option<Value>,
    /// Why kubenest made this deployment itself (an automatic rollback), else empty.
    pub reason: String,
}

/// A deployment with what it changed, as a JSON Patch (RFC 6902) from the spec before to after.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct DeploymentWithDiff {
    #[serde(flatten)]
    pub deployment: Deployment,
    pub diff: json_patch::Patch,
}

#[derive(Debug, Clone, sqlx::FromRow)]
pub(super) struct Row {
    pub(super) id: Uuid,
    pub(super) intent_key: String,
    pub(super) org_id: String,
    pub(super) project_id: String,
    pub(super) cluster_id: String,
    pub(super) app_id: String,
    pub(super) app_name: String,
    pub(super) revision: String,
    pub(super) operation: String,
    pub(super) actor: String,
    pub(super) spec_before: Option<Value>,
    pub(super) spec_after: Value,
    pub(super) rollback_of: Option<Uuid>,
    pub(super) status: String,
    pub(super) message: String,
    pub(super) created_at: DateTime<Utc>,
    pub(super) finished_at: Option<DateTime<Utc>>,
    pub(super) verification: Option<Value>,
    pub(super) reason: String,
}

impl TryFrom<Row> for Deployment {
    type Error = StoreError;

    fn try_from(row: Row) -> Result<Self, StoreError> {
        Ok(Self {
            id: row.id,
            intent_key: row.intent_key,
            org_id: row.org_id,
            project_id: row.project_id,
            cluster_id: row.cluster_id,
            app_id: row.app_id,
            app_name: row.app_name,
            revision: row.revision,
            operation: Operation::parse(&row.operation)?,
            actor: row.actor,
            spec_before: row.spec_before,
            spec_after: row.spec_after,
            rollback_of: row.rollback_of,
            status: DeploymentStatus::parse(&row.status)?,
            message: row.message,
            created_at: row.created_at,
            finished_at: row.finished_at,
            verification: row.verification,
            reason: row.reason,
        })
    }
}

impl History {
    /// Records a deployment before it is dispatched, and marks the App's older pending
    /// deployments superseded. Idempotent on `intent_key`: recording the same intent again
    /// returns the existing row and `false`. Concurrent calls share transactions (see
    /// [`super::recorder`]); each returns only once its row is committed.
    pub async fn record_deployment(
        &self,
        new: &NewDeployment,
    ) -> Result<(Deployment, bool), StoreError> {
        self.recorder.record(new.clone(), false).await
    }

    /// [`Self::record_deployment`] for the App's next change: `spec_before` becomes the spec of
    /// the App's latest deployment and `operation` is derived from the two specs
    /// ([`Operation::between`]); what `new` holds in those fields is ignored.
    pub async fn record_change(
        &self,
        new: NewDeployment,
    ) -> Result<(Deployment, bool), StoreError> {
        self.recorder.record(new, true).await
    }

    /// Waits (at most `at_most`) until the deployments being recorded alongside are committed
    /// too: see [`super::recorder`]. Returns at once when nothing else is being recorded.
    pub async fn recorded_burst(&self, at_most: std::time::Duration) {
        self.recorder.recorded_burst(at_most).await;
    }

    /// Records a pending deployment's outcome. Repeating the same outcome is harmless (status
    /// events may arrive twice). A failed deployment whose revision runs after all (its pods
    /// became Ready past the deadline) becomes succeeded, with the new message; every other
    /// change of a finished outcome is refused.
    pub async fn finish_deployment(
        &self,
        org_id: &str,
        id: Uuid,
        status: DeploymentStatus,
        message: &str,
    ) -> Result<Deployment, StoreError> {
        if status == DeploymentStatus::Pending {
            return Err(StoreError::InvalidTransition(
                "a deployment cannot become pending again".into(),
            ));
        }
        let updated: Option<Row> = sqlx::query_as(
            "UPDATE deployments SET status = $3, message = $4, finished_at = now()
             WHERE org_id = $1 AND id = $2
               AND (status = 'pending' OR (status = 'failed' AND $3 = 'succeeded'))
             RETURNING *",
        )
        .bind(org_id)
        .bind(id)
        .bind(status.as_str())
        .bind(message)
        .fetch_optional(&self.pool)
        .await?;
        if let Some(row) = updated {
            return row.try_into();
        }
        let current = self.deployment_row(org_id, id).await?;
        if current.status == status.as_str() {
            return current.try_into();
        }
        Err(StoreError::InvalidTransition(format!(
            "deployment {id} is already {} and cannot become {}",
            current.status,
            status.as_str()
        )))
    }

    async fn deployment_row(&self, org_id: &str, id: Uuid) -> Result<Row, StoreError> {
        Ok(
            sqlx::query_as("SELECT * FROM deployments WHERE org_id = $1 AND id = $2")
                .bind(org_id)
                .bind(id)
                .fetch_one(&self.pool)
                .await?,
        )
    }

    /// One deployment of the organization, with its diff.
    pub async fn deployment(
        &self,
        org_id: &str,
        id: Uuid,
    ) -> Result<DeploymentWithDiff, StoreError> {
        let deployment: Deployment = self.deployment_row(org_id, id).await?.try_into()?;
        let before = deployment
            .spec_before
            .clone()
            .unwrap_or(Value::Object(Default::default()));
        let diff = json_patch::diff(&before, &deployment.spec_after);
        Ok(DeploymentWithDiff { deployment, diff })
    }

    /// An App's deployments, newest first, at most `limit`.
    pub async fn app_history(
        &self,
        org_id: &str,
        app_id: &str,
        limit: i64,
    ) -> Result<Vec<Deployment>, StoreError> {
        let rows: Vec<Row> = sqlx::query_as(
            "SELECT * FROM deployments WHERE org_id = $1 AND app_id = $2
             ORDER BY created_at DESC, id DESC LIMIT $3",
        )
        .bind(org_id)
        .bind(app_id)
        .bind(limit)
        .fetch_all(&self.pool)
        .await?;
        rows.into_iter().map(Deployment::try_from).collect()
    }

    /// Records the verdict on deployment `id`'s revision (the newest verdict wins: a revision
    /// is judged once per rollout).
    pub async fn record_verification(
        &self,
        org_id: &str,
        id: Uuid,
        verdict: &Value,
    ) -> Result<(), StoreError> {
        sqlx::query("UPDATE deployments SET verification = $3 WHERE org_id = $1 AND id = $2")
            .bind(org_id)
            .bind(id)
            .bind(verdict)
            .execute(&self.pool)
            .await?;
        Ok(())
    }

    /// Records why kubenest made deployment `id` itself.
    pub async fn record_reason(
        &self,
        org_id: &str,
        id: Uuid,
        reason: &str,
    ) -> Result<(), StoreError> {
        sqlx::query("UPDATE deployments SET reason = $3 WHERE org_id = $1 AND id = $2")
            .bind(org_id)
            .bind(id)
            .bind(reason)
            .execute(&self.pool)
            .await?;
        Ok(())
    }

    /// The deployment of App `app_id` made before deployment `before` that a rollback after a
    /// failed verification goes back to: the newest whose revision passed its verification,
    /// else the newest that succeeded and was never judged (made before verification was on).
    pub async fn last_good(
        &self,
        org_id: &str,
        app_id: &str,
        before: Uuid,
    ) -> Result<Option<Deployment>, StoreError> {
        let row: Option<Row> = sqlx::query_as(
            "SELECT d.* FROM deployments d, deployments b
             WHERE d.org_id = $1 AND d.app_id = $2 AND b.org_id = $1 AND b.id = $3
               AND d.id <> b.id AND d.created_at <= b.created_at
               AND (d.verification->>'verdict' = 'Passed'
                    OR (d.verification IS NULL AND d.status = 'succeeded'))
             ORDER BY (d.verification->>'verdict' = 'Passed') DESC NULLS LAST,
                      d.created_at DESC, d.id DESC
             LIMIT 1",
        )
        .bind(org_id)
        .bind(app_id)
        .bind(before)
        .fetch_optional(&self.pool)
        .await?;
        row.map(Deployment::try_from).transpose()
    }

    /// How many deployments an organization has recorded.
    pub async fn deployments_recorded(&self, org_id: &str) -> Result<i64, StoreError> {
        Ok(
            sqlx::query_scalar("SELECT count(*) FROM deployments WHERE org_id = $1")
                .bind(org_id)
                .fetch_one(&self.pool)
                .await?,
        )
    }
}
