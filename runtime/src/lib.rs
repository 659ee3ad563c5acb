//! What every kubenest server program (hub, controllers, API server, agent) does before its own
//! work, in one place so the four `main.rs` files stay a few lines each:
//!
//! - [`shutdown::on_signal`]: one [`CancellationToken`](tokio_util::sync::CancellationToken),
//!   cancelled on SIGINT or SIGTERM, that the program fans out to every task;
//! - [`logs::init`]: JSON (default) or text logs on standard output, filtered by `RUST_LOG`
//!   (`--log-format`, [`logs::LogFormat`]);
//! - [`kube::client`]: the Kubernetes client from a kubeconfig file, or the in-cluster (or
//!   `$KUBECONFIG`) configuration when none is given;
//! - [`admin::Admin`]: the admin endpoint (`/healthz`, `/readyz` with the program's dependency
//!   checks, `/metrics`) on its own port; [`http_metrics::HttpMetrics`] counts an axum
//!   server's requests by route template and status; [`reconciles::Reconciles`] measures and
//!   traces every controller's reconciles; [`events::EventSink`] writes Kubernetes Events off
//!   the reconcile path; [`finalizer`]: the one way a controller holds and releases its
//!   finalizer (guarded JSON patches); [`exec::Program`]: the one way an external program
//!   (helm, git) is started, user values never where a flag can be; [`backoff::Backoff`]: the
//!   one retry backoff (backon's capped exponential, full jitter); [`leader::Election`]: leader
//!   election over a Lease, expiry judged on the local monotonic clock.
//!
//! The programs' settings and their `run` entry points live in each program's library; this
//! crate knows nothing of them.

pub mod admin;
pub mod backoff;
pub mod events;
pub mod exec;
pub mod finalizer;
pub mod http_metrics;
pub mod kube;
pub mod leader;
pub mod logs;
pub mod reconciles;
pub mod shutdown;
pub mod traces;
