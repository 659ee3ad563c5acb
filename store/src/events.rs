//! The live stream's event log, for clients resuming with `Last-Event-ID`. Ids are given by the
//! API server (every replica derives the same id for the same event), so a row is stored once,
//! whichever replica comes first.

use chrono::{DateTime, Utc};
use serde_json::Value;
use sqlx::PgPool;

use crate::error::StoreError;

/// One event of the log.
#[derive(Debug, Clone, PartialEq, sqlx::FromRow)]
pub struct Event {
    pub id: i64,
    pub org_id: String,
    pub cluster_id: Option<String>,
    pub project_id: Option<String>,
    pub app_id: Option<String>,
    pub kind: String,
    pub payload: Value,
    pub at: DateTime<Utc>,
}

/// The `events` table.
#[derive(Debug, Clone)]
pub struct EventLog {
    pool: PgPool,
}

impl EventLog {
    pub(crate) fn new(pool: PgPool) -> Self {
        Self { pool }
    }

    /// The newest stored id, 0 when the log is empty.
    pub async fn newest_id(&self) -> Result<i64, StoreError> {
        let (newest,): (i64,) = sqlx::query_as("SELECT coalesce(max(id), 0) FROM events")
            .fetch_one(&self.pool)
            .await?;
        Ok(newest)
    }

    /// Stores `events` in one statement; an id already stored (by another replica) is kept.
    pub async fn insert(&self, events: &[Event]) -> Result<(), StoreError> {
        let column = |f: fn(&Event) -> Option<String>| events.iter().map(f).collect::<Vec<_>>();
        sqlx::query(
            "INSERT INTO events (id, org_id, cluster_id, project_id, app_id, kind, payload, at)
             SELECT * FROM UNNEST($1::bigint[], $2::text[], $3::text[], $4::text[], $5::text[],
                                  $6::text[], $7::jsonb[], $8::timestamptz[])
             ON CONFLICT (id) DO NOTHING",
        )
        .bind(events.iter().map(|e| e.id).collect::<Vec<_>>())
        .bind(column(|e| Some(e.org_id.clone())))
        .bind(column(|e| e.cluster_id.clone()))
        .bind(column(|e| e.project_id.clone()))
        .bind(column(|e| e.app_id.clone()))
        .bind(column(|e| Some(e.kind.clone())))
        .bind(events.iter().map(|e| e.payload.clone()).collect::<Vec<_>>())
        .bind(events.iter().map(|e| e.at).collect::<Vec<_>>())
        .execute(&self.pool)
        .await?;
        Ok(())
    }

    /// Events after `after` in the given organizations, oldest first, at most `limit`.
    pub async fn after(
        &self,
        after: i64,
        orgs: &[String],
        limit: i64,
    ) -> Result<Vec<Event>, StoreError> {
        Ok(sqlx::query_as(
            "SELECT id, org_id, cluster_id, project_id, app_id, kind, payload, at FROM events
             WHERE id > $1 AND org_id = ANY($2) ORDER BY id LIMIT $3",
        )
        .bind(after)
        .bind(orgs)
        .bind(limit)
        .fetch_all(&self.pool)
        .await?)
    }

    /// Deletes the events stored before `cutoff`.
    pub async fn prune(&self, cutoff: DateTime<Utc>) -> Result<(), StoreError> {
        sqlx::query("DELETE FROM events WHERE at < $1")
            .bind(cutoff)
            .execute(&self.pool)
            .await?;
        Ok(())
    }
}
