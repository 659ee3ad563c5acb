//! kubenest's demo web app: the App that proves a delivery really works. It reads
//! `DATABASE_URL` (a PostgreSQL addon's `dsn` export) and `REDIS_URL` (a Redis addon's `url`),
//! and answers every `GET /` with what it found: PostgreSQL reached, a row written and read
//! back; Redis reached, a key set and read back; and its own version (`DEMO_VERSION`, else the
//! build's), so that an image change shows in the answer. `GET /healthz` answers while the
//! process serves. The same binary is its own HTTP client, `kubenest-demo get URL`, which tests
//! run in a pod to ask a Service from inside the cluster network.

mod args;
pub mod client;
mod http;
mod probe;
mod report;

use std::future::Future;

pub use args::{Args, Command, GetArgs, ServeArgs};
pub use http::router;
pub use probe::Backends;
pub use report::{PostgresCheck, RedisCheck, Report, Row, redact};

/// Why the app could not serve.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// `DATABASE_URL` is not a PostgreSQL URL.
    #[error("DATABASE_URL: {0}")]
    DatabaseUrl(#[source] sqlx::Error),
    /// `REDIS_URL` is not a Redis URL.
    #[error("REDIS_URL: {0}")]
    RedisUrl(#[source] redis::RedisError),
    /// The listener failed.
    #[error("serving HTTP: {0}")]
    Serve(#[from] std::io::Error),
}

/// Serves the app on `listener` until `shutdown` completes. The backends are reached on each
/// request, not at start: the app comes up (and says what is missing) before its addons do.
pub async fn run(
    args: ServeArgs,
    listener: tokio::net::TcpListener,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<(), Error> {
    let backends = Backends::new(&args)?;
    tracing::info!(
        addr = %listener.local_addr()?,
        version = %args.demo_version,
        postgres = %args.database_url.as_deref().map(redact).unwrap_or_default(),
        redis = %args.redis_url.as_deref().map(redact).unwrap_or_default(),
        "serving"
    );
    axum::serve(listener, router(backends))
        .with_graceful_shutdown(shutdown)
        .await?;
    Ok(())
}

/// Completes on SIGTERM (the kubelet stopping the pod) or Ctrl-C.
pub async fn shutdown_signal() {
    let ctrl_c = tokio::signal::ctrl_c();
    match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
        Ok(mut term) => {
            tokio::select! {
                _ = ctrl_c => {}
                _ = term.recv() => {}
            }
        }
        Err(_) => {
            let _ = ctrl_c.await;
        }
    }
}
