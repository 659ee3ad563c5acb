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

/// What tracing set up; keep it for the process's life. Dropping it sends the spans not sent
/// yet.
#[derive(Debug, Default)]
#[must_use = "dropping it stops the export of traces"]
pub struct Telemetry {
    traces: Option<opentelemetry_sdk::trace::SdkTracerProvider>,
}

impl Telemetry {
    /// Whether spans are exported (an OTLP endpoint is set).
    pub fn exporting(&self) -> bool {
        self.traces.is_some()
    }
}

impl Drop for Telemetry {
    fn drop(&mut self) {
        if let Some(provider) = self.traces.take() {
            let _ = provider.shutdown();
        }
    }
}

/// Logs to standard output in `format`, filtered by `RUST_LOG`, else by `default` (e.g.
/// `info`), and exports the spans as traces of `service` when an OTLP endpoint is set
/// ([`crate::traces`]; call it on the tokio runtime). Fails if the process already has a
/// global subscriber.
pub fn init(format: LogFormat, default: &str, service: &str) -> Result<Telemetry, LogsError> {
    use tracing_subscriber::layer::SubscriberExt as _;
    use tracing_subscriber::util::SubscriberInitExt as _;

    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new(default));
    let (lines, json) = match format {
        LogFormat::Text => (
            Some(tracing_subscriber::fmt::layer().with_ansi(false)),
            None,
        ),
        LogFormat::Json => (
            None,
            Some(tracing_subscriber::fmt::layer().json().with_span_list(true)),
        ),
    };
    let (traces, exported) = match crate::traces::layer(service) {
        Some((provider, layer)) => (Some(provider), Some(layer)),
        None => (None, None),
    };
    tracing_subscriber::registry()
        .with(exported)
        .with(filter)
        .with(lines)
        .with(json)
        .try_init()
        .map_err(|e| LogsError(e.to_string()))?;
    Ok(Telemetry { traces })
}

/// Logs JSON lines ([`init`] with [`LogFormat::Json`]).
pub fn init_json(default: &str, service: &str) -> Result<Telemetry, LogsError> {
    init(LogFormat::Json, default, service)
}
