//! Deployment history: every deployment of every App (who, when, what, the full spec before and
//! after, the outcome), standalone addon revisions, and the audit log of mutating actions.
//!
//! The App controller records a deployment **before** it dispatches the command, keyed by an
//! intent key, so a controller restarted in between neither loses nor doubles it. Every query is
//! scoped to an organization: another organization's rows do not exist for the caller
//! ([`StoreError::NotFound`]).

mod addons;
mod audit;
mod deployments;
mod recorder;

use sqlx::PgPool;

use crate::error::StoreError;
use crate::pool;
use crate::url::DatabaseUrl;

pub use addons::{AddonOperation, AddonRevision, NewAddonRevision};
pub use audit::{AuditEntry, AuditFilter, AuditPath, NewAuditEntry, Outcome};
pub use deployments::{Deployment, DeploymentStatus, DeploymentWithDiff, NewDeployment, Operation};

/// The history store.
#[derive(Debug, Clone)]
pub struct History {
    pool: PgPool,
    recorder: recorder::Recorder,
}

impl History {
    /// Connects and runs the embedded migrations, as [`crate::Database::connect`] does.
    pub async fn connect(url: &DatabaseUrl, max_connections: u32) -> Result<Self, StoreError> {
        Ok(Self::start(pool::connect(url, max_connections).await?))
    }

    /// The alerts, on the history's connections (the controllers open and resolve them).
    pub fn alerts(&self) -> crate::Alerts {
        crate::Alerts::new(self.pool.clone())
    }

    /// One round trip to PostgreSQL, for readiness checks.
    pub async fn ping(&self) -> Result<(), StoreError> {
        pool::ping(&self.pool).await
    }

    /// How much of the connection pool is in use, for metrics.
    pub fn pool_use(&self) -> pool::PoolUse {
        pool::pool_use(&self.pool)
    }

    /// The history on `pool`, with its deployment recorder started.
    pub(crate) fn start(pool: PgPool) -> Self {
        // Half the connections write deployment batches; the rest stay free for everything else.
        let max_connections = pool.options().get_max_connections();
        let writers = usize::try_from(max_connections / 2).unwrap_or(1);
        let recorder = recorder::Recorder::start(pool.clone(), writers);
        Self { pool, recorder }
    }
}
