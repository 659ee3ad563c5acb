//! The programs' logs: JSON lines for log collectors (the charts' default), or text for people
//! (`make dev`), chosen with `--log-format`.
//!
//! Either way each line carries the spans it was written in, so the fields a reconcile's or a
//! command's span records (the object's kind, namespace, name and revision) are on every line
//! written inside it: `grep` for a revision follows one App through the controllers', hub's and
//! agent's logs.

use tracing_subscriber::EnvFilter;

/// Logging could not be set up.
#[derive(Debug, thiserror::Error)]
#[error("set up logging: {0}")]
pub struct LogsError(String);

/// How log lines are written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum LogFormat {
    /// Human-readable lines with the spans' fields.
    Text,
    /// One JSON object per line, with the current span and the span list.
    #[default]
    Json,
}

/// Logs to standard output in `format`, filtered by `RUST_LOG`, else by `default` (e.g.
/// `info`). Fails if the process already has a global subscriber.
pub fn init(format: LogFormat, default: &str) -> Result<(), LogsError> {
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new(default));
    let builder = tracing_subscriber::fmt().with_env_filter(filter);
    let installed = match format {
        LogFormat::Text => builder.with_ansi(false).try_init(),
        LogFormat::Json => builder.json().with_span_list(true).try_init(),
    };
    installed.map_err(|e| LogsError(e.to_string()))
}

/// Logs JSON lines ([`init`] with [`LogFormat::Json`]).
pub fn init_json(default: &str) -> Result<(), LogsError> {
    init(LogFormat::Json, default)
}
