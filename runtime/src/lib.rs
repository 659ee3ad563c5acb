//! What every kubenest server program (hub, controllers, API server, agent) does before its own
//! work, in one place so the four `main.rs` files stay a few lines each:
//!
//! - [`shutdown::on_signal`]: one [`CancellationToken`](tokio_util::sync::CancellationToken),
//!   cancelled on SIGINT or SIGTERM, that the program fans out to every task;
//! - [`logs::init_json`]: JSON logs on standard output, filtered by `RUST_LOG`;
//! - [`kube::client`]: the Kubernetes client from a kubeconfig file, or the in-cluster (or
//!   `$KUBECONFIG`) configuration when none is given.
//!
//! The programs' settings and their `run` entry points live in each program's library; this
//! crate knows nothing of them.

pub mod kube;
pub mod logs;
pub mod shutdown;
