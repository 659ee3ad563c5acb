//! kubenest's demo web app: the App that proves a delivery really works. It reads
//! `DATABASE_URL` (a PostgreSQL addon's `dsn` export) and `REDIS_URL` (a Redis addon's `url`),
//! and answers every `GET /` with what it found: PostgreSQL reached, a row written and read
//! back; Redis reached, a key set and read back; and its own version (`DEMO_VERSION`, else the
//! build's), so that an image change shows in the answer. `GET /healthz` answers while the
//! process serves. The same binary is its own HTTP client, `kubenest-demo get URL`, which tests
//! run in a pod to ask a Service from inside the cluster network.
//!
//! A deployment platform judges a revision by its pods and by its metrics, so the app can
//! misbehave on purpose, each way off unless asked:
//! - `DEMO_ERROR_RATIO` (0 to 1): that share of the requests to `/` is answered `500`, spread
//!   evenly, not at random (at 0.3, exactly 30 of every 100); `/healthz` and `/metrics` never
//!   fail on purpose;
//! - `DEMO_LEAK_MB_PER_S`: that many MiB are taken, written and kept every second, until the
//!   container passes its memory limit and is OOM-killed;
//! - `DEMO_EXIT_AFTER_S`: the process exits with status 1 after that many seconds, a crash
//!   after warm-up.
//!
//! And it can make the traffic such a judgement needs: with `DEMO_LOAD_URL`, it GETs that URL
//! `DEMO_LOAD_PER_SECOND` times a second (another workload's Service).
//!
//! `GET /metrics` reports, in the Prometheus text format, `http_requests_total{code, method}`
//! and `http_request_duration_seconds{method}` of the requests to `/` (probes of `/healthz`
//! are not counted: an idle app must look idle): the error rate and latency a platform's
//! analysis compares between revisions.

mod args;
pub mod client;
mod faults;
mod http;
mod load;
mod metrics;
mod probe;
mod report;

use std::future::{Future, IntoFuture as _};
use std::time::Duration;

pub use args::{Args, Command, GetArgs, ServeArgs, SettingError};
pub use faults::ErrorSchedule;
pub use http::router;
pub use probe::Backends;
pub use report::{PostgresCheck, RedisCheck, Report, Row, redact};

/// Why the app could not serve, or stopped.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A setting is out of its range.
    #[error(transparent)]
    Setting(#[from] SettingError),
    /// `DATABASE_URL` is not a PostgreSQL URL.
    #[error("DATABASE_URL: {0}")]
    DatabaseUrl(#[source] sqlx::Error),
    /// `REDIS_URL` is not a Redis URL.
    #[error("REDIS_URL: {0}")]
    RedisUrl(#[source] redis::RedisError),
    /// The listener failed.
    #[error("serving HTTP: {0}")]
    Serve(#[from] std::io::Error),
    /// `DEMO_EXIT_AFTER_S` passed: the app stops as if it had crashed.
    #[error("DEMO_EXIT_AFTER_S: exiting after {} s on purpose", .0.as_secs())]
    ExitedOnPurpose(Duration),
}

/// Serves the app on `listener` until `shutdown` completes, or until `DEMO_EXIT_AFTER_S` has
/// passed ([`Error::ExitedOnPurpose`]: the binary then exits with status 1). The backends are
/// reached on each request, not at start: the app comes up (and says what is missing) before
/// its addons do.
pub async fn run(
    args: ServeArgs,
    listener: tokio::net::TcpListener,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<(), Error> {
    args.validate()?;
    let backends = Backends::new(&args)?;
    tracing::info!(
        addr = %listener.local_addr()?,
        version = %args.demo_version,
        postgres = %args.database_url.as_deref().map(redact).unwrap_or_default(),
        redis = %args.redis_url.as_deref().map(redact).unwrap_or_default(),
        error_ratio = args.error_ratio,
        leak_mib_per_s = args.leak_mb_per_s,
        exit_after_s = args.exit_after().map(|after| after.as_secs()),
        "serving"
    );
    let _leak = (args.leak_mb_per_s > 0)
        .then(|| AbortOnDrop(tokio::spawn(faults::leak(args.leak_mb_per_s))));
    let _load = args
        .load_url
        .clone()
        .map(|url| AbortOnDrop(tokio::spawn(load::load(url, args.load_per_second))));
    let serve = axum::serve(
        listener,
        router(backends, ErrorSchedule::new(args.error_ratio)),
    )
    .with_graceful_shutdown(shutdown)
    .into_future();
    let Some(after) = args.exit_after() else {
        serve.await?;
        return Ok(());
    };
    tokio::select! {
        served = serve => Ok(served?),
        () = tokio::time::sleep(after) => {
            tracing::error!(after_s = after.as_secs(), "exiting on purpose (DEMO_EXIT_AFTER_S)");
            Err(Error::ExitedOnPurpose(after))
        }
    }
}

/// A spawned task that ends with the app: tests run many apps in one process.
#[derive(Debug)]
struct AbortOnDrop(tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
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
