//! PostgreSQL history: every deployment of every App (who, when, what, the full spec before and
//! after, the outcome), standalone addon revisions, and the audit log of mutating actions.
//!
//! The App controller records a deployment **before** it dispatches the command, keyed by an
//! intent key, so a controller restarted in between neither loses nor doubles it. Every query is
//! scoped to an organization: another organization's rows do not exist for the caller
//! ([`HistoryError::NotFound`]). Migrations are embedded and run at connect.

mod addons;
mod audit;
mod deployments;
mod recorder;
mod url;

use sqlx::PgPool;
use sqlx::postgres::PgPoolOptions;

pub use addons::{AddonOperation, AddonRevision, NewAddonRevision};
pub use audit::{AuditEntry, NewAuditEntry};
pub use deployments::{Deployment, DeploymentStatus, DeploymentWithDiff, NewDeployment, Operation};
pub use url::DatabaseUrl;

/// What went wrong with the history store.
#[derive(Debug, thiserror::Error)]
pub enum HistoryError {
    /// No such row for this organization.
    #[error("not found")]
    NotFound,
    /// The write broke a rule of the schema; names the constraint (mapped to a 4xx by the API).
    #[error("conflicts with existing history ({constraint})")]
    Conflict { constraint: String },
    /// A state change the history does not allow (e.g. a finished deployment changing outcome).
    #[error("invalid transition: {0}")]
    InvalidTransition(String),
    #[error("database: {0}")]
    Database(sqlx::Error),
    /// The history store is shutting down.
    #[error("the history store is closed")]
    Closed,
    #[error("migration: {0}")]
    Migration(#[from] sqlx::migrate::MigrateError),
}

impl From<sqlx::Error> for HistoryError {
    fn from(error: sqlx::Error) -> Self {
        match &error {
            sqlx::Error::RowNotFound => Self::NotFound,
            sqlx::Error::Database(db) if db.constraint().is_some() => Self::Conflict {
                constraint: db.constraint().unwrap_or_default().to_owned(),
            },
            _ => Self::Database(error),
        }
    }
}

/// The history store.
#[derive(Debug, Clone)]
pub struct History {
    pool: PgPool,
    recorder: recorder::Recorder,
}

impl History {
    /// Connects and runs the embedded migrations.
    pub async fn connect(url: &DatabaseUrl, max_connections: u32) -> Result<Self, HistoryError> {
        let pool = PgPoolOptions::new()
            .max_connections(max_connections)
            .connect(url.expose())
            .await
            .map_err(HistoryError::Database)?;
        sqlx::migrate!("./migrations").run(&pool).await?;
        // Half the connections write deployment batches; the rest stay free for everything else.
        let writers = usize::try_from(max_connections / 2).unwrap_or(1);
        let recorder = recorder::Recorder::start(pool.clone(), writers);
        Ok(Self { pool, recorder })
    }

    /// The connection pool (for health checks).
    pub fn pool(&self) -> &PgPool {
        &self.pool
    }
}
