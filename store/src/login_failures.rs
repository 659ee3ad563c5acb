//! Failed logins: the rate limit every API server replica shares. The API server decides how
//! many are too many; this table counts them.

use chrono::{DateTime, Utc};
use sqlx::PgPool;

use crate::error::StoreError;

/// Failed logins since some moment, for one user and one address.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FailureCounts {
    /// Failures of the user, from any address.
    pub by_user: i64,
    /// Failures from the address, for any user.
    pub by_address: i64,
    /// The oldest of either, if any.
    pub oldest: Option<DateTime<Utc>>,
}

/// The `login_failures` table.
#[derive(Debug, Clone)]
pub struct LoginFailures {
    pool: PgPool,
}

impl LoginFailures {
    pub(crate) fn new(pool: PgPool) -> Self {
        Self { pool }
    }

    /// The failures of `username` and from `address` after `since`.
    pub async fn since(
        &self,
        username: &str,
        address: &str,
        since: DateTime<Utc>,
    ) -> Result<FailureCounts, StoreError> {
        let (by_user, by_address, oldest): (i64, i64, Option<DateTime<Utc>>) = sqlx::query_as(
            "SELECT count(*) FILTER (WHERE username = $1),
                    count(*) FILTER (WHERE address = $2),
                    min(at)
             FROM login_failures WHERE at > $3 AND (username = $1 OR address = $2)",
        )
        .bind(username)
        .bind(address)
        .bind(since)
        .fetch_one(&self.pool)
        .await?;
        Ok(FailureCounts {
            by_user,
            by_address,
            oldest,
        })
    }

    /// Forgets the failures of `username` (after a successful login).
    pub async fn clear(&self, username: &str) -> Result<(), StoreError> {
        sqlx::query("DELETE FROM login_failures WHERE username = $1")
            .bind(username)
            .execute(&self.pool)
            .await?;
        Ok(())
    }

    /// Records a failure, and forgets those older than a day (no limit looks back that far).
    pub async fn record(&self, username: &str, address: &str) -> Result<(), StoreError> {
        sqlx::query("INSERT INTO login_failures (username, address) VALUES ($1, $2)")
            .bind(username)
            .bind(address)
            .execute(&self.pool)
            .await?;
        sqlx::query("DELETE FROM login_failures WHERE at < now() - interval '1 day'")
            .execute(&self.pool)
            .await?;
        Ok(())
    }
}
