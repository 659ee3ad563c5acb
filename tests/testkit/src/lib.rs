//! Real Kubernetes clusters and PostgreSQL on loopback, for kubenest's tests and its local
//! environment (`kubenest-dev up`).
//!
//! Everything here is a real upstream process: etcd, kube-apiserver, kube-controller-manager,
//! kube-scheduler and kwok (which plays the kubelet for fake nodes), and Debian's PostgreSQL.
//! A real-node cluster ([`EnvironmentBuilder::real_node`], module [`node`]) has instead a real
//! kubelet with containerd, CNI networking, kube-proxy and CoreDNS, where pods really run.
//! The binaries come from `tools/build-k8s-bins.sh` (see [`Binaries`]); etcd comes from the
//! `etcd-bin-vendored-linux-amd64` crate.
//!
//! ```no_run
//! # async fn demo() -> Result<(), kubenest_testkit::Error> {
//! let env = kubenest_testkit::shared().await?;
//! let east = env.cluster("east").unwrap();
//! let ns = east.test_namespace("my-test").await?;
//! let client = ns.client();
//! # Ok(()) }
//! ```
//!
//! Clusters take seconds to start, so a test binary shares one [`Environment`] ([`shared`]) and
//! each test works in its own namespace. Every process runs in its own process group and is
//! stopped on drop; a reaper process stops whatever is left when the test binary exits, even
//! when it is killed.

pub mod bench;
mod bins;
mod charts;
mod cluster;
mod env;
mod etcd;
pub mod flux;
mod git;
pub mod hostile;
mod images;
pub mod machines;
mod namespace;
pub mod node;
mod pki;
mod postgres;
pub mod probes;
pub mod process;
mod proxy;
mod registry;
mod tls;
pub mod tools;
mod wait;

use std::path::PathBuf;

pub use bins::{Binaries, pinned_version};
pub use charts::{ChartRepository, package as package_chart};
pub use cluster::{Cluster, ClusterRole, NodePool};
pub use env::{
    Environment, EnvironmentBuilder, shared, shared_management, shared_postgres, shared_real_node,
};
pub use etcd::Etcd;
pub use flux::Flux;
pub use git::{GitServer, GitSsh, keygen as ssh_keygen};
pub use images::{IMAGE_NAMES, ImageArchive, Images};
pub use namespace::TestNamespace;
pub use pki::{NodeCerts, NodeIdentity, Pki, WebhookClient};
pub use postgres::{Postgres, TestDatabase};
pub use process::ManagedProcess;
pub use proxy::{LinkMode, TcpProxy};
pub use registry::Registry;
pub use tls::{ServerCa, ServingFiles};
pub use wait::free_port;

/// What went wrong starting or using the environment.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("{context}: {source}")]
    Io {
        context: String,
        source: std::io::Error,
    },
    #[error("{} not found: run `tools/setup.sh` (or `make test`, which runs it)", .0.display())]
    MissingBinary(PathBuf),
    #[error("image archive {} not found: run `make images` (tools/build-images.sh)", .0.display())]
    MissingImage(PathBuf),
    #[error("images: {0}")]
    ImageBuild(String),
    #[error("process: {0}")]
    Process(String),
    #[error("{name} exited ({status}); last log lines:\n{log_tail}")]
    Exited {
        name: String,
        status: String,
        log_tail: String,
    },
    #[error("cluster {name} did not start: {source}\n{logs}")]
    ClusterStart {
        name: String,
        source: Box<Error>,
        logs: String,
    },
    #[error("the real node cannot start here: {0}")]
    RealNodeUnavailable(String),
    /// Local machines ([`machines`]) cannot be made here, or are already made by another process.
    #[error("local machines: {0}")]
    Machines(String),
    #[error("another real node runs on this machine (lock {lock}): {holder}")]
    RealNodeBusy { lock: PathBuf, holder: String },
    #[error("cannot import image archive {}: {reason}", archive.display())]
    ImageImport { archive: PathBuf, reason: String },
    #[error("pki: {0}")]
    Pki(String),
    #[error("kubernetes: {0}")]
    Kube(#[from] kube::Error),
    #[error("kubeconfig: {0}")]
    Kubeconfig(String),
    #[error("postgres: {0}")]
    Postgres(String),
    #[error("timed out after {secs}s waiting for {what} (last: {last_observation})")]
    Timeout {
        what: String,
        secs: u64,
        last_observation: String,
    },
    #[error("the shared environment failed to start: {0}")]
    Shared(String),
}

impl Error {
    pub(crate) fn io(context: impl Into<String>, source: std::io::Error) -> Self {
        Self::Io {
            context: context.into(),
            source,
        }
    }
}
