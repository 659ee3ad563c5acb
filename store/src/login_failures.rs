//! Failed logins: the rate limit every API server replica shares. The API server decides how
//! many are too many; this table counts them, per address and per user at an address. Nothing
//! counts a user's failures across addresses: that count would let anyone lock anyone out.

use chrono::{DateTime, Utc};
use sqlx::PgPool;

use crate::error::StoreError;

/// Failures of one kind since some moment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FailureTally {
    pub count: i64,
    /// The oldest of them, if any.
    pub oldest: Option<DateTime<Utc>>,
}

/// Failed logins since some moment, from one address.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FailureCounts {
    /// Failures for the user from the address.
    pub by_pair: FailureTally,
    /// Failures from the address, for any user.
    pub by_address: FailureTally,
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

    /// The failures from `address` after `since`: for `username`, and for anyone.
    pub async fn since(
        &self,
        username: &str,
        address: &str,
        since: DateTime<Utc>,
    ) -> Result<FailureCounts, StoreError> {
        type Row = (i64, Option<DateTime<Utc>>, i64, Option<DateTime<Utc>>);
        let (pair, pair_oldest, all, all_oldest): Row = sqlx::query_as(
            "SELECT count(*) FILTER (WHERE username = $1),
                    min(at) FILTER (WHERE username = $1),
                    count(*),
                    min(at)
             FROM login_failures WHERE address = $2 AND at > $3",
        )
        .bind(username)
        .bind(address)
        .bind(since)
        .fetch_one(&self.pool)
        .await?;
        Ok(FailureCounts {
            by_pair: FailureTally {
                count: pair,
                oldest: pair_oldest,
            },
            by_address: FailureTally {
                count: all,
                oldest: all_oldest,
            },
        })
    }

    /// Forgets the failures of `username` from `address` (after a successful login there).
    pub async fn clear(&self, username: &str, address: &str) -> Result<(), StoreError> {
        sqlx::query("DELETE FROM login_failures WHERE username = $1 AND address = $2")
            .bind(username)
            .bind(address)
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
