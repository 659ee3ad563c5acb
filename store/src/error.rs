//! What can go wrong with the store, for every repository alike.

/// The constraint that refuses a second user of the same name.
pub(crate) const USERS_PKEY: &str = "users_pkey";

/// What went wrong with the store.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// No such row (for this organization, where rows belong to one).
    #[error("not found")]
    NotFound,
    /// A user of that name exists already.
    #[error("the user exists")]
    UserExists,
    /// The write broke a rule of the schema; names the constraint (mapped to a 4xx by the API).
    #[error("conflicts with existing history ({constraint})")]
    Conflict { constraint: String },
    /// A state change the history does not allow (e.g. a finished deployment changing outcome).
    #[error("invalid transition: {0}")]
    InvalidTransition(String),
    /// The database failed or could not be reached.
    #[error("database: {0}")]
    Database(sqlx::Error),
    /// The history store is shutting down.
    #[error("the history store is closed")]
    Closed,
    /// The embedded migrations could not be applied.
    #[error("migration: {0}")]
    Migration(#[from] sqlx::migrate::MigrateError),
}

impl StoreError {
    /// Whether the database could not be reached or answer in time (down, restarting, the
    /// pool's wait over): an outage a caller may retry, not a wrong request.
    pub fn unavailable(&self) -> bool {
        match self {
            Self::Closed => true,
            Self::Database(error) => match error {
                sqlx::Error::PoolTimedOut
                | sqlx::Error::PoolClosed
                | sqlx::Error::Io(_)
                | sqlx::Error::Tls(_)
                | sqlx::Error::WorkerCrashed => true,
                // Class 08 (connection exception) and 57P01..57P03 (the server shutting down or
                // starting up).
                sqlx::Error::Database(db) => db
                    .code()
                    .is_some_and(|code| code.starts_with("08") || code.starts_with("57P")),
                _ => false,
            },
            _ => false,
        }
    }
}

impl From<sqlx::Error> for StoreError {
    fn from(error: sqlx::Error) -> Self {
        match &error {
            sqlx::Error::RowNotFound => Self::NotFound,
            sqlx::Error::Database(db) => match db.constraint() {
                Some(USERS_PKEY) => Self::UserExists,
                Some(constraint) => Self::Conflict {
                    constraint: constraint.to_owned(),
                },
                None => Self::Database(error),
            },
            _ => Self::Database(error),
        }
    }
}
