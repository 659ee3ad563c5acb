//! Alerts (`migrations/0004_alerts.sql`): opened by the controllers when a cluster goes silent
//! past its heartbeat window or an App fails its progress deadline, resolved when that ends,
//! listed and acknowledged by users through the API. At most one alert of a kind is open for a
//! subject at a time (a partial unique index), so opening twice is harmless.

use chrono::{DateTime, Utc};
use serde::Serialize;
use sqlx::PgPool;
use uuid::Uuid;

use crate::error::StoreError;

/// An alert to open.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewAlert {
    pub org_id: String,
    /// `heartbeat_missed` or `progress_deadline_exceeded`.
    pub kind: String,
    /// `critical` or `warning`.
    pub severity: String,
    /// `cluster` or `app`.
    pub subject_kind: String,
    /// The subject's uid.
    pub subject_id: String,
    pub subject_name: String,
    pub cluster_id: Option<String>,
    pub project_id: Option<String>,
    pub message: String,
}

/// An alert as stored.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, sqlx::FromRow)]
pub struct Alert {
    pub id: Uuid,
    pub org_id: String,
    pub kind: String,
    pub severity: String,
    pub subject_kind: String,
    pub subject_id: String,
    pub subject_name: String,
    pub cluster_id: Option<String>,
    pub project_id: Option<String>,
    pub message: String,
    pub opened_at: DateTime<Utc>,
    pub acknowledged_at: Option<DateTime<Utc>>,
    pub acknowledged_by: Option<String>,
    pub resolved_at: Option<DateTime<Utc>>,
    pub resolution: Option<String>,
}

/// Where an alert stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum AlertState {
    /// Raised and nobody has acknowledged it yet.
    Open,
    /// Someone has acknowledged it; the condition still holds.
    Acknowledged,
    /// The condition ended.
    Resolved,
}

impl Alert {
    /// Where the alert stands: resolved wins over acknowledged.
    pub fn state(&self) -> AlertState {
        match (self.resolved_at, self.acknowledged_at) {
            (Some(_), _) => AlertState::Resolved,
            (None, Some(_)) => AlertState::Acknowledged,
            (None, None) => AlertState::Open,
        }
    }
}

/// The `alerts` table.
#[derive(Debug, Clone)]
pub struct Alerts {
    pool: PgPool,
}

const COLUMNS: &str = "id, org_id, kind, severity, subject_kind, subject_id, subject_name, \
                       cluster_id, project_id, message, opened_at, acknowledged_at, \
                       acknowledged_by, resolved_at, resolution";

impl Alerts {
    pub(crate) fn new(pool: PgPool) -> Self {
        Self { pool }
    }

    /// Opens `alert`; `None` when one of its kind is open for its subject already.
    pub async fn open(&self, alert: &NewAlert) -> Result<Option<Alert>, StoreError> {
        Ok(sqlx::query_as(&format!(
            "INSERT INTO alerts (id, org_id, kind, severity, subject_kind, subject_id,
                                 subject_name, cluster_id, project_id, message)
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)
             ON CONFLICT (subject_id, kind) WHERE resolved_at IS NULL DO NOTHING
             RETURNING {COLUMNS}"
        ))
        .bind(Uuid::new_v4())
        .bind(&alert.org_id)
        .bind(&alert.kind)
        .bind(&alert.severity)
        .bind(&alert.subject_kind)
        .bind(&alert.subject_id)
        .bind(&alert.subject_name)
        .bind(&alert.cluster_id)
        .bind(&alert.project_id)
        .bind(&alert.message)
        .fetch_optional(&self.pool)
        .await?)
    }

    /// Resolves the open alert of `kind` about `subject_id`, saying why; `None` when none is
    /// open.
    pub async fn resolve(
        &self,
        subject_id: &str,
        kind: &str,
        resolution: &str,
    ) -> Result<Option<Alert>, StoreError> {
        Ok(sqlx::query_as(&format!(
            "UPDATE alerts SET resolved_at = now(), resolution = $3
             WHERE subject_id = $1 AND kind = $2 AND resolved_at IS NULL
             RETURNING {COLUMNS}"
        ))
        .bind(subject_id)
        .bind(kind)
        .bind(resolution)
        .fetch_optional(&self.pool)
        .await?)
    }

    /// Every alert not resolved yet, in every organization (what the controllers keep true).
    pub async fn unresolved(&self) -> Result<Vec<Alert>, StoreError> {
        Ok(sqlx::query_as(&format!(
            "SELECT {COLUMNS} FROM alerts WHERE resolved_at IS NULL ORDER BY opened_at"
        ))
        .fetch_all(&self.pool)
        .await?)
    }

    /// An organization's alerts, newest first, at most `limit`; only those in `state` when
    /// given.
    pub async fn list(
        &self,
        org_id: &str,
        state: Option<AlertState>,
        limit: i64,
    ) -> Result<Vec<Alert>, StoreError> {
        let filter = match state {
            None => "",
            Some(AlertState::Open) => "AND resolved_at IS NULL AND acknowledged_at IS NULL",
            Some(AlertState::Acknowledged) => {
                "AND resolved_at IS NULL AND acknowledged_at IS NOT NULL"
            }
            Some(AlertState::Resolved) => "AND resolved_at IS NOT NULL",
        };
        Ok(sqlx::query_as(&format!(
            "SELECT {COLUMNS} FROM alerts WHERE org_id = $1 {filter}
             ORDER BY opened_at DESC, id LIMIT $2"
        ))
        .bind(org_id)
        .bind(limit)
        .fetch_all(&self.pool)
        .await?)
    }

    /// Alert `id` of the organization ([`StoreError::NotFound`] for another organization's).
    pub async fn get(&self, org_id: &str, id: Uuid) -> Result<Alert, StoreError> {
        Ok(sqlx::query_as(&format!(
            "SELECT {COLUMNS} FROM alerts WHERE org_id = $1 AND id = $2"
        ))
        .bind(org_id)
        .bind(id)
        .fetch_one(&self.pool)
        .await?)
    }

    /// Records that `by` acknowledged alert `id` of the organization; the first
    /// acknowledgement stands, so acknowledging again changes nothing.
    pub async fn acknowledge(&self, org_id: &str, id: Uuid, by: &str) -> Result<Alert, StoreError> {
        Ok(sqlx::query_as(&format!(
            "UPDATE alerts
             SET acknowledged_at = coalesce(acknowledged_at, now()),
                 acknowledged_by = coalesce(acknowledged_by, $3)
             WHERE org_id = $1 AND id = $2
             RETURNING {COLUMNS}"
        ))
        .bind(org_id)
        .bind(id)
        .bind(by)
        .fetch_one(&self.pool)
        .await?)
    }
}
