//! Revisions of standalone addons: each install, upgrade, change of values or rollback is a new
//! revision; a rollback copies the chart and values of the revision it restores.

use chrono::{DateTime, Utc};
use serde::Serialize;
use serde_json::Value;

use super::History;
use super::deployments::text_enum;
use crate::error::StoreError;

text_enum! {
    /// What a revision changed.
    AddonOperation {
        Install => "install", Upgrade => "upgrade", Values => "values", Rollback => "rollback",
    }
}

/// A revision about to be applied.
#[derive(Debug, Clone, PartialEq)]
pub struct NewAddonRevision {
    pub addon_id: String,
    pub org_id: String,
    pub project_id: String,
    pub definition: String,
    pub chart: Value,
    pub values: Value,
    pub operation: AddonOperation,
    pub actor: String,
}

/// A recorded revision.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct AddonRevision {
    pub addon_id: String,
    pub revision: i32,
    pub org_id: String,
    pub project_id: String,
    pub definition: String,
    pub chart: Value,
    pub values: Value,
    pub operation: AddonOperation,
    pub rollback_to: Option<i32>,
    pub actor: String,
    pub status: String,
    pub message: String,
    pub created_at: DateTime<Utc>,
}

#[derive(sqlx::FromRow)]
struct Row {
    addon_id: String,
    revision: i32,
    org_id: String,
    project_id: String,
    definition: String,
    chart: Value,
    chart_values: Value,
    operation: String,
    rollback_to: Option<i32>,
    actor: String,
    status: String,
    message: String,
    created_at: DateTime<Utc>,
}

impl TryFrom<Row> for AddonRevision {
    type Error = StoreError;

    fn try_from(row: Row) -> Result<Self, StoreError> {
        Ok(Self {
            addon_id: row.addon_id,
            revision: row.revision,
            org_id: row.org_id,
            project_id: row.project_id,
            definition: row.definition,
            chart: row.chart,
            values: row.chart_values,
            operation: AddonOperation::parse(&row.operation)?,
            rollback_to: row.rollback_to,
            actor: row.actor,
            status: row.status,
            message: row.message,
            created_at: row.created_at,
        })
    }
}

const NEXT_REVISION: &str =
    "(SELECT COALESCE(MAX(revision), 0) + 1 FROM addon_revisions WHERE addon_id = $1)";

impl History {
    /// Records the next revision of an addon. Concurrent writers cannot both take the same number:
    /// the primary key refuses the second ([`StoreError::Conflict`]), which retries.
    pub async fn record_addon_revision(
        &self,
        new: &NewAddonRevision,
    ) -> Result<AddonRevision, StoreError> {
        let row: Row = sqlx::query_as(&format!(
            "INSERT INTO addon_revisions (addon_id, revision, org_id, project_id, definition, chart,
                 chart_values, operation, actor)
             VALUES ($1, {NEXT_REVISION}, $2, $3, $4, $5, $6, $7, $8) RETURNING *"
        ))
        .bind(&new.addon_id)
        .bind(&new.org_id)
        .bind(&new.project_id)
        .bind(&new.definition)
        .bind(&new.chart)
        .bind(&new.values)
        .bind(new.operation.as_str())
        .bind(&new.actor)
        .fetch_one(&self.pool)
        .await?;
        row.try_into()
    }

    /// Records a rollback: a new revision with the chart and values of `to_revision`.
    pub async fn record_addon_rollback(
        &self,
        org_id: &str,
        addon_id: &str,
        to_revision: i32,
        actor: &str,
    ) -> Result<AddonRevision, StoreError> {
        let row: Row = sqlx::query_as(&format!(
            "INSERT INTO addon_revisions (addon_id, revision, org_id, project_id, definition, chart,
                 chart_values, operation, rollback_to, actor)
             SELECT addon_id, {NEXT_REVISION}, org_id, project_id, definition, chart, chart_values,
                 'rollback', revision, $4
             FROM addon_revisions WHERE addon_id = $1 AND org_id = $2 AND revision = $3
             RETURNING *"
        ))
        .bind(addon_id)
        .bind(org_id)
        .bind(to_revision)
        .bind(actor)
        .fetch_one(&self.pool)
        .await?;
        row.try_into()
    }

    /// Records a revision's outcome (`succeeded` or `failed`). Repeating the same outcome is
    /// harmless; changing a finished outcome is refused.
    pub async fn finish_addon_revision(
        &self,
        org_id: &str,
        addon_id: &str,
        revision: i32,
        succeeded: bool,
        message: &str,
    ) -> Result<(), StoreError> {
        let status = if succeeded { "succeeded" } else { "failed" };
        let updated = sqlx::query(
            "UPDATE addon_revisions SET status = $4, message = $5
             WHERE org_id = $1 AND addon_id = $2 AND revision = $3 AND status = 'pending'",
        )
        .bind(org_id)
        .bind(addon_id)
        .bind(revision)
        .bind(status)
        .bind(message)
        .execute(&self.pool)
        .await?;
        if updated.rows_affected() == 1 {
            return Ok(());
        }
        let current: (String,) = sqlx::query_as(
            "SELECT status FROM addon_revisions WHERE org_id = $1 AND addon_id = $2 AND revision = $3",
        )
        .bind(org_id)
        .bind(addon_id)
        .bind(revision)
        .fetch_one(&self.pool)
        .await?;
        if current.0 == status {
            return Ok(());
        }
        Err(StoreError::InvalidTransition(format!(
            "addon revision {revision} is already {} and cannot become {status}",
            current.0
        )))
    }

    /// An addon's revisions, newest first.
    pub async fn addon_revisions(
        &self,
        org_id: &str,
        addon_id: &str,
    ) -> Result<Vec<AddonRevision>, StoreError> {
        let rows: Vec<Row> = sqlx::query_as(
            "SELECT * FROM addon_revisions WHERE org_id = $1 AND addon_id = $2 ORDER BY revision DESC",
        )
        .bind(org_id)
        .bind(addon_id)
        .fetch_all(&self.pool)
        .await?;
        rows.into_iter().map(AddonRevision::try_from).collect()
    }
}
