//! The programs' logs: one JSON object per line, for log collectors.

use tracing_subscriber::EnvFilter;

/// Logging could not be set up.
#[derive(Debug, thiserror::Error)]
#[error("set up logging: {0}")]
pub struct LogsError(String);

/// Logs JSON lines to standard output, filtered by `RUST_LOG`, else by `default` (e.g. `info`).
/// Fails if the process already has a global subscriber.
pub fn init_json(default: &str) -> Result<(), LogsError> {
    tracing_subscriber::fmt()
        .with_env_filter(
            EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new(default)),
        )
        .json()
        .try_init()
        .map_err(|e| LogsError(e.to_string()))
}
