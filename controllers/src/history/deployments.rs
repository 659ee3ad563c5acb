//! Deployment records: one row per change of an App, written before the change is dispatched.

use chrono::{DateTime, Utc};
use serde::Serialize;
use serde_json::Value;
use uuid::Uuid;

use super::{History, HistoryError};

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

            fn parse(text: &str) -> Result<Self, HistoryError> {
                match text {
                    $($text => Ok(Self::$variant),)*
                    other => Err(HistoryError::InvalidTransition(format!("unknown {} {other:?}", stringify!($name)))),
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
    /// A deployment's outcome. Only `pending` ever changes, and only once.
    DeploymentStatus {
        Pending => "pending", Succeeded => "succeeded", Failed => "failed", Superseded => "superseded",
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
}

/// A deployment with what it changed, as a JSON Patch (RFC 6902) from the spec before to after.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct DeploymentWithDiff {
    #[serde(flatten)]
    pub deployment: Deployment,
    pub diff: json_patch::Patch,
}

#[derive(sqlx::FromRow)]
struct Row {
    id: Uuid,
    intent_key: String,
    org_id: String,
    project_id: String,
    cluster_id: String,
    app_id: String,
    app_name: String,
    revision: String,
    operation: String,
    actor: String,
    spec_before: Option<Value>,
    spec_after: Value,
    rollback_of: Option<Uuid>,
    status: String,
    message: String,
    created_at: DateTime<Utc>,
    finished_at: Option<DateTime<Utc>>,
}

impl TryFrom<Row> for Deployment {
    type Error = HistoryError;

    fn try_from(row: Row) -> Result<Self, HistoryError> {
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
        })
    }
}

impl History {
    /// Records a deployment before it is dispatched, and marks the App's older pending
    /// deployments superseded. Idempotent on `intent_key`: recording the same intent again
    /// returns the existing row and `false`.
    pub async fn record_deployment(
        &self,
        new: &NewDeployment,
    ) -> Result<(Deployment, bool), HistoryError> {
        let mut tx = self.pool.begin().await?;
        let inserted: Option<Row> = sqlx::query_as(
            "INSERT INTO deployments (id, intent_key, org_id, project_id, cluster_id, app_id, app_name,
                 revision, operation, actor, spec_before, spec_after, rollback_of)
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13)
             ON CONFLICT (intent_key) DO NOTHING
             RETURNING *",
        )
        .bind(Uuid::new_v4())
        .bind(&new.intent_key)
        .bind(&new.org_id)
        .bind(&new.project_id)
        .bind(&new.cluster_id)
        .bind(&new.app_id)
        .bind(&new.app_name)
        .bind(&new.revision)
        .bind(new.operation.as_str())
        .bind(&new.actor)
        .bind(&new.spec_before)
        .bind(&new.spec_after)
        .bind(new.rollback_of)
        .fetch_optional(&mut *tx)
        .await?;
        let Some(row) = inserted else {
            tx.rollback().await?;
            let existing: Row = sqlx::query_as("SELECT * FROM deployments WHERE intent_key = $1")
                .bind(&new.intent_key)
                .fetch_one(&self.pool)
                .await?;
            if existing.org_id != new.org_id || existing.app_id != new.app_id {
                return Err(HistoryError::Conflict {
                    constraint: "deployments_intent_key_unique".into(),
                });
            }
            return Ok((existing.try_into()?, false));
        };
        sqlx::query(
            "UPDATE deployments SET status = 'superseded', finished_at = now(),
                 message = 'superseded by deployment ' || $3::text
             WHERE org_id = $1 AND app_id = $2 AND status = 'pending' AND id <> $3",
        )
        .bind(&new.org_id)
        .bind(&new.app_id)
        .bind(row.id)
        .execute(&mut *tx)
        .await?;
        tx.commit().await?;
        Ok((row.try_into()?, true))
    }

    /// Records a pending deployment's outcome. Repeating the same outcome is harmless (status
    /// events may arrive twice); changing a finished outcome is refused.
    pub async fn finish_deployment(
        &self,
        org_id: &str,
        id: Uuid,
        status: DeploymentStatus,
        message: &str,
    ) -> Result<Deployment, HistoryError> {
        if status == DeploymentStatus::Pending {
            return Err(HistoryError::InvalidTransition(
                "a deployment cannot become pending again".into(),
            ));
        }
        let updated: Option<Row> = sqlx::query_as(
            "UPDATE deployments SET status = $3, message = $4, finished_at = now()
             WHERE org_id = $1 AND id = $2 AND status = 'pending' RETURNING *",
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
        Err(HistoryError::InvalidTransition(format!(
            "deployment {id} is already {} and cannot become {}",
            current.status,
            status.as_str()
        )))
    }

    async fn deployment_row(&self, org_id: &str, id: Uuid) -> Result<Row, HistoryError> {
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
    ) -> Result<DeploymentWithDiff, HistoryError> {
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
    ) -> Result<Vec<Deployment>, HistoryError> {
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
}
