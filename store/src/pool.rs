//! Opening the pool, migrated before anything uses it.

use sqlx::PgPool;
use sqlx::postgres::PgPoolOptions;

use crate::error::StoreError;
use crate::url::DatabaseUrl;

/// Connects with at most `max_connections` and runs the embedded migrations.
pub(crate) async fn connect(url: &DatabaseUrl, max_connections: u32) -> Result<PgPool, StoreError> {
    let pool = PgPoolOptions::new()
        .max_connections(max_connections)
        // A request waits this long for a connection while the server is down or busy, then
        // fails as unavailable (the API's 503 to retry) rather than hanging for sqlx's 30 s.
        .acquire_timeout(std::time::Duration::from_secs(10))
        .connect(url.expose())
        .await
        .map_err(StoreError::Database)?;
    sqlx::migrate!("./migrations").run(&pool).await?;
    Ok(pool)
}

/// How much of a pool is in use, for metrics.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PoolUse {
    /// Connections open now (idle or in use).
    pub size: u32,
    /// Open connections waiting for work.
    pub idle: u32,
    /// The most the pool opens.
    pub max: u32,
}

pub(crate) fn pool_use(pool: &PgPool) -> PoolUse {
    PoolUse {
        size: pool.size(),
        idle: u32::try_from(pool.num_idle()).unwrap_or(u32::MAX),
        max: pool.options().get_max_connections(),
    }
}

/// One round trip to the server on a pooled connection, for readiness checks.
pub(crate) async fn ping(pool: &PgPool) -> Result<(), StoreError> {
    sqlx::query("SELECT 1")
        .execute(pool)
        .await
        .map(|_| ())
        .map_err(StoreError::Database)
}
