//! The audit log: one row per mutating action, whoever made it and by whichever path.

use chrono::{DateTime, Utc};
use serde::Serialize;
use serde_json::Value;

use super::History;
use crate::error::StoreError;

/// The path a mutation came by.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, sqlx::Type)]
#[serde(rename_all = "lowercase")]
#[sqlx(type_name = "text", rename_all = "lowercase")]
pub enum AuditPath {
    /// The REST API (and the console and CLI on it).
    Rest,
    /// A Kubernetes client writing the custom resources itself.
    Kubectl,
    /// A GitOps engine writing them (Flux, Argo CD, or an object labelled as GitOps-managed).
    Gitops,
}

impl AuditPath {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Rest => "rest",
            Self::Kubectl => "kubectl",
            Self::Gitops => "gitops",
        }
    }

    pub fn parse(text: &str) -> Option<Self> {
        [Self::Rest, Self::Kubectl, Self::Gitops]
            .into_iter()
            .find(|p| p.as_str() == text)
    }
}

/// What became of a mutation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, sqlx::Type)]
#[serde(rename_all = "lowercase")]
#[sqlx(type_name = "text", rename_all = "lowercase")]
pub enum Outcome {
    Succeeded,
    /// Refused at the door: not allowed, not valid, or in conflict.
    Refused,
    /// Accepted but not carried out (a server-side failure).
    Failed,
}

impl Outcome {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Succeeded => "succeeded",
            Self::Refused => "refused",
            Self::Failed => "failed",
        }
    }

    pub fn parse(text: &str) -> Option<Self> {
        [Self::Succeeded, Self::Refused, Self::Failed]
            .into_iter()
            .find(|o| o.as_str() == text)
    }

    /// The outcome an HTTP-style status code means.
    pub fn of_status(status: u16) -> Self {
        match status {
            ..400 => Self::Succeeded,
            400..500 => Self::Refused,
            _ => Self::Failed,
        }
    }
}

/// An action to record.
#[derive(Debug, Clone, PartialEq)]
pub struct NewAuditEntry {
    pub org_id: String,
    pub actor: String,
    /// The kubenest user's id, when the actor is one.
    pub actor_id: Option<String>,
    /// e.g. `app.rollback`, `cluster.rotate_token`, `PATCH /api/v1/apps/{id}`, `apps.update`.
    pub action: String,
    pub resource_kind: String,
    pub resource_name: String,
    pub path: AuditPath,
    pub outcome: Outcome,
    /// The HTTP-style status the request ended with.
    pub status: u16,
    /// Context without secret values.
    pub details: Value,
}

/// A recorded action.
#[derive(Debug, Clone, PartialEq, Serialize, sqlx::FromRow)]
pub struct AuditEntry {
    pub id: i64,
    pub org_id: String,
    pub actor: String,
    pub actor_id: Option<String>,
    pub action: String,
    pub resource_kind: String,
    pub resource_name: String,
    pub path: AuditPath,
    pub outcome: Outcome,
    pub status: i16,
    pub details: Value,
    pub at: DateTime<Utc>,
}

/// Which entries to read (every field optional; all given must match).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct AuditFilter {
    pub actor: Option<String>,
    pub path: Option<AuditPath>,
    pub outcome: Option<Outcome>,
    pub resource_kind: Option<String>,
    /// Only entries older than this id (the paging cursor).
    pub before_id: Option<i64>,
}

impl History {
    /// Appends an entry.
    pub async fn audit(&self, entry: &NewAuditEntry) -> Result<AuditEntry, StoreError> {
        Ok(sqlx::query_as(
            "INSERT INTO audit_log (org_id, actor, actor_id, action, resource_kind, resource_name,
                                    path, outcome, status, details)
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10) RETURNING *",
        )
        .bind(&entry.org_id)
        .bind(&entry.actor)
        .bind(&entry.actor_id)
        .bind(&entry.action)
        .bind(&entry.resource_kind)
        .bind(&entry.resource_name)
        .bind(entry.path)
        .bind(entry.outcome)
        .bind(i16::try_from(entry.status).unwrap_or(i16::MAX))
        .bind(&entry.details)
        .fetch_one(&self.pool)
        .await?)
    }

    /// Appends an entry unless the same actor's same action on the same object with the same
    /// outcome was recorded in the last `window_ms` milliseconds. The Kubernetes API server
    /// calls admission again when it retries a write that met a concurrent change (a delete or
    /// patch racing the controllers' status writes): one request, several calls.
    pub async fn audit_once(
        &self,
        entry: &NewAuditEntry,
        window_ms: i64,
    ) -> Result<Option<AuditEntry>, StoreError> {
        Ok(sqlx::query_as(
            "INSERT INTO audit_log (org_id, actor, actor_id, action, resource_kind, resource_name,
                                    path, outcome, status, details)
             SELECT $1, $2, $3, $4, $5, $6, $7, $8, $9, $10
             WHERE NOT EXISTS (
                 SELECT 1 FROM audit_log
                 WHERE org_id = $1 AND actor = $2 AND action = $4 AND resource_kind = $5
                   AND resource_name = $6 AND path = $7 AND outcome = $8 AND status = $9
                   AND at > now() - make_interval(secs => $11::double precision / 1000))
             RETURNING *",
        )
        .bind(&entry.org_id)
        .bind(&entry.actor)
        .bind(&entry.actor_id)
        .bind(&entry.action)
        .bind(&entry.resource_kind)
        .bind(&entry.resource_name)
        .bind(entry.path)
        .bind(entry.outcome)
        .bind(i16::try_from(entry.status).unwrap_or(i16::MAX))
        .bind(&entry.details)
        .bind(window_ms)
        .fetch_optional(&self.pool)
        .await?)
    }

    /// Who deleted an object through kubectl or GitOps: the actor of the newest successful
    /// `{resource}.delete` entry of `name` since `since` (the admission webhook's record; a
    /// delete leaves no stamp on the object itself).
    pub async fn deleter(
        &self,
        org_id: &str,
        resource: &str,
        name: &str,
        since: DateTime<Utc>,
    ) -> Result<Option<String>, StoreError> {
        let row: Option<(String,)> = sqlx::query_as(
            "SELECT actor FROM audit_log
             WHERE org_id = $1 AND action = $2 AND resource_name = $3 AND outcome = 'succeeded'
               AND path IN ('kubectl', 'gitops') AND at >= $4
             ORDER BY id DESC LIMIT 1",
        )
        .bind(org_id)
        .bind(format!("{resource}.delete"))
        .bind(name)
        .bind(since)
        .fetch_optional(&self.pool)
        .await?;
        Ok(row.map(|(actor,)| actor))
    }

    /// An organization's entries, newest first, at most `limit`.
    pub async fn audit_log(&self, org_id: &str, limit: i64) -> Result<Vec<AuditEntry>, StoreError> {
        self.audit_page(org_id, &AuditFilter::default(), limit)
            .await
    }

    /// An organization's entries passing `filter`, newest first (by id), at most `limit`.
    pub async fn audit_page(
        &self,
        org_id: &str,
        filter: &AuditFilter,
        limit: i64,
    ) -> Result<Vec<AuditEntry>, StoreError> {
        Ok(sqlx::query_as(
            "SELECT * FROM audit_log
             WHERE org_id = $1
               AND ($2::text IS NULL OR actor = $2)
               AND ($3::text IS NULL OR path = $3)
               AND ($4::text IS NULL OR outcome = $4)
               AND ($5::text IS NULL OR resource_kind = $5)
               AND ($6::bigint IS NULL OR id < $6)
             ORDER BY id DESC LIMIT $7",
        )
        .bind(org_id)
        .bind(&filter.actor)
        .bind(filter.path.map(AuditPath::as_str))
        .bind(filter.outcome.map(Outcome::as_str))
        .bind(&filter.resource_kind)
        .bind(filter.before_id)
        .bind(limit)
        .fetch_all(&self.pool)
        .await?)
    }
}
