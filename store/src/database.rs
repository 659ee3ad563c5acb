//! The connection pool every repository shares, migrated before anything uses it.

use sqlx::PgPool;

use crate::alerts::Alerts;
use crate::error::StoreError;
use crate::events::EventLog;
use crate::history::History;
use crate::login_failures::LoginFailures;
use crate::pool;
use crate::refresh_tokens::RefreshTokens;
use crate::url::DatabaseUrl;
use crate::users::Users;

/// A migrated PostgreSQL database; cheap to clone. Hands out the repositories.
#[derive(Debug, Clone)]
pub struct Database {
    pool: PgPool,
}

impl Database {
    /// Connects with at most `max_connections` and runs the embedded migrations.
    pub async fn connect(url: &DatabaseUrl, max_connections: u32) -> Result<Self, StoreError> {
        Ok(Self {
            pool: pool::connect(url, max_connections).await?,
        })
    }

    /// Deployment history, addon revisions and the audit log. Starts the deployment recorder's
    /// writers: call once per process and clone the result.
    pub fn history(&self) -> History {
        History::start(self.pool.clone())
    }

    /// Users and their password hashes.
    pub fn users(&self) -> Users {
        Users::new(self.pool.clone())
    }

    /// Refresh-token families.
    pub fn refresh_tokens(&self) -> RefreshTokens {
        RefreshTokens::new(self.pool.clone())
    }

    /// Failed logins.
    pub fn login_failures(&self) -> LoginFailures {
        LoginFailures::new(self.pool.clone())
    }

    /// Alerts.
    pub fn alerts(&self) -> Alerts {
        Alerts::new(self.pool.clone())
    }

    /// The live stream's event log.
    pub fn event_log(&self) -> EventLog {
        EventLog::new(self.pool.clone())
    }
}
