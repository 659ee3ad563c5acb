//! `kubenest-store`: every PostgreSQL table kubenest keeps, its migrations and a repository type
//! per table. No other crate writes SQL.
//!
//! # Tables and their repositories
//!
//! - [`History`]: deployments of Apps, revisions of standalone addons and the audit log
//!   (`migrations/0001_history.sql`). The controllers write it; the API server reads it and
//!   writes the audit log.
//! - [`Users`], [`RefreshTokens`], [`LoginFailures`]: what the REST facade keeps about people
//!   and their sessions (`migrations/0002_api.sql`, `0007_login_failures_per_address.sql`).
//!   Password hashing, token minting and the limits stay in the API server; these types store
//!   and count what it hands them.
//! - [`EventLog`]: the live event stream's log, for clients that resume (also `0002_api.sql`).
//! - [`Alerts`]: alerts the controllers open and resolve and users list and acknowledge
//!   (`migrations/0004_alerts.sql`).
//!
//! # Connecting
//!
//! [`Database::connect`] opens the pool and runs the embedded migrations before anything else
//! uses it, so every process that connects (controllers, API server) migrates; PostgreSQL's
//! migration lock keeps concurrent starts apart. The [`Database`] hands out the repositories,
//! which share its pool and are cheap to clone. [`DatabaseUrl`] keeps the password out of logs.
//!
//! # Errors
//!
//! One [`StoreError`] for every repository: [`StoreError::NotFound`] for a row that does not
//! exist (or belongs to another organization), and the schema's constraints mapped to typed
//! variants ([`StoreError::UserExists`], [`StoreError::Conflict`] naming the constraint) so that
//! the API server can answer with a 4xx without reading driver errors.

mod alerts;
mod database;
mod error;
mod events;
mod history;
mod login_failures;
mod pool;
mod refresh_tokens;
mod url;
mod users;

pub use alerts::{Alert, AlertState, Alerts, NewAlert};
pub use database::Database;
pub use error::StoreError;
pub use events::{Event, EventLog};
pub use history::{
    AddonOperation, AddonRevision, AuditEntry, AuditFilter, AuditPath, Deployment,
    DeploymentStatus, DeploymentWithDiff, History, NewAddonRevision, NewAuditEntry, NewDeployment,
    Operation, Outcome,
};
pub use login_failures::{FailureCounts, FailureTally, LoginFailures};
pub use pool::PoolUse;
pub use refresh_tokens::{RefreshTokens, Rotation};
pub use url::DatabaseUrl;
pub use users::{User, Users};
