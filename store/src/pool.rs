//! Opening the pool, migrated before anything uses it.

use sqlx::PgPool;
use sqlx::postgres::PgPoolOptions;

use crate::error::StoreError;
use crate::url::DatabaseUrl;

/// Connects with at most `max_connections` and runs the embedded migrations.
pub(crate) async fn connect(url: &DatabaseUrl, max_connections: u32) -> Result<PgPool, StoreError> {
    let pool = PgPoolOptions::new()
        .max_connections(max_connections)
        .connect(url.expose())
        .await
        .map_err(StoreError::Database)?;
    sqlx::migrate!("./migrations").run(&pool).await?;
    Ok(pool)
}
