//! The audit log: one row per mutating action, whoever made it and by whichever path.

use chrono::{DateTime, Utc};
use serde::Serialize;
use serde_json::Value;

use super::History;
use crate::error::StoreError;

/// An action to record.
#[derive(Debug, Clone, PartialEq)]
pub struct NewAuditEntry {
    pub org_id: String,
    pub actor: String,
    /// e.g. `app.rollback`, `cluster.rotate_token`.
    pub action: String,
    pub resource_kind: String,
    pub resource_name: String,
    /// Context without secret values.
    pub details: Value,
}

/// A recorded action.
#[derive(Debug, Clone, PartialEq, Serialize, sqlx::FromRow)]
pub struct AuditEntry {
    pub id: i64,
    pub org_id: String,
    pub actor: String,
    pub action: String,
    pub resource_kind: String,
    pub resource_name: String,
    pub details: Value,
    pub at: DateTime<Utc>,
}

impl History {
    /// Appends an entry.
    pub async fn audit(&self, entry: &NewAuditEntry) -> Result<AuditEntry, StoreError> {
        Ok(sqlx::query_as(
            "INSERT INTO audit_log (org_id, actor, action, resource_kind, resource_name, details)
             VALUES ($1, $2, $3, $4, $5, $6) RETURNING *",
        )
        .bind(&entry.org_id)
        .bind(&entry.actor)
        .bind(&entry.action)
        .bind(&entry.resource_kind)
        .bind(&entry.resource_name)
        .bind(&entry.details)
        .fetch_one(&self.pool)
        .await?)
    }

    /// An organization's entries, newest first, at most `limit`.
    pub async fn audit_log(&self, org_id: &str, limit: i64) -> Result<Vec<AuditEntry>, StoreError> {
        Ok(sqlx::query_as(
            "SELECT * FROM audit_log WHERE org_id = $1 ORDER BY at DESC, id DESC LIMIT $2",
        )
        .bind(org_id)
        .bind(limit)
        .fetch_all(&self.pool)
        .await?)
    }
}
