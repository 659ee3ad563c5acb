//! An environment: one etcd, any number of clusters on it, and optionally PostgreSQL.

use std::path::{Path, PathBuf};

use futures::future::try_join_all;
use tokio::sync::OnceCell;

use crate::{Binaries, Cluster, ClusterRole, Error, Etcd, NodePool, Postgres};

/// What to start.
#[derive(Debug, Default)]
pub struct EnvironmentBuilder {
    dir: Option<PathBuf>,
    clusters: Vec<(String, ClusterRole)>,
    postgres: bool,
}

impl EnvironmentBuilder {
    /// Adds a management cluster (API server and controller manager).
    pub fn management(mut self, name: &str) -> Self {
        self.clusters
            .push((name.to_owned(), ClusterRole::Management));
        self
    }

    /// Adds a workload cluster with kwok nodes.
    pub fn workload(mut self, name: &str, nodes: NodePool) -> Self {
        self.clusters
            .push((name.to_owned(), ClusterRole::Workload(nodes)));
        self
    }

    /// Adds a workload cluster with one real node, where pods really run (see [`crate::node`]:
    /// root only, one per machine; its images come from [`Cluster::import_image`]).
    pub fn real_node(mut self, name: &str) -> Self {
        self.clusters.push((name.to_owned(), ClusterRole::RealNode));
        self
    }

    /// Adds a PostgreSQL server.
    pub fn postgres(mut self) -> Self {
        self.postgres = true;
        self
    }

    /// Keeps every file (data, PKI, kubeconfigs, logs) under `dir` instead of a temporary
    /// directory removed on drop.
    pub fn dir(mut self, dir: impl Into<PathBuf>) -> Self {
        self.dir = Some(dir.into());
        self
    }

    /// Starts everything and waits until it is ready. Clusters start concurrently.
    pub async fn start(self) -> Result<Environment, Error> {
        let dir = match self.dir {
            Some(path) => {
                std::fs::create_dir_all(&path)
                    .map_err(|e| Error::io("create environment dir", e))?;
                // Absolute, because processes (PostgreSQL) run in directories of their own.
                let path = std::path::absolute(&path).map_err(|e| Error::io("resolve dir", e))?;
                EnvDir::Kept(path)
            }
            None => EnvDir::Temp(
                tempfile::Builder::new()
                    .prefix("kubenest-env-")
                    .tempdir()
                    .map_err(|e| Error::io("create environment dir", e))?,
            ),
        };
        let root = dir.path().to_owned();
        if let EnvDir::Temp(_) = &dir {
            crate::process::remove_at_exit(&root)?;
        }
        let postgres = async {
            if self.postgres {
                Postgres::start(&root).await.map(Some)
            } else {
                Ok(None)
            }
        };
        let clusters = async {
            if self.clusters.is_empty() {
                return Ok((None, Vec::new()));
            }
            let bins = Binaries::locate()?;
            let etcd = Etcd::start(&bins, &root).await?;
            let (bins, endpoint) = (&bins, etcd.endpoint());
            let starts = self.clusters.iter().map(|(name, role)| {
                let dir = root.join(name);
                async move { Cluster::start(name, role.clone(), bins, endpoint, &dir).await }
            });
            let clusters = try_join_all(starts).await?;
            Ok::<_, Error>((Some(etcd), clusters))
        };
        let (postgres, (etcd, clusters)) = tokio::try_join!(postgres, clusters)?;
        Ok(Environment {
            clusters,
            postgres,
            etcd,
            dir,
        })
    }
}

#[derive(Debug)]
enum EnvDir {
    Temp(tempfile::TempDir),
    Kept(PathBuf),
}

impl EnvDir {
    fn path(&self) -> &Path {
        match self {
            Self::Temp(t) => t.path(),
            Self::Kept(p) => p,
        }
    }
}

/// Running clusters and PostgreSQL. Dropping it stops everything (clusters before etcd).
#[derive(Debug)]
pub struct Environment {
    // Field order is drop order: API servers go before the etcd they write to.
    clusters: Vec<Cluster>,
    postgres: Option<Postgres>,
    etcd: Option<Etcd>,
    dir: EnvDir,
}

impl Environment {
    /// Describes an environment to start.
    pub fn builder() -> EnvironmentBuilder {
        EnvironmentBuilder::default()
    }

    /// The cluster named `name`.
    pub fn cluster(&self, name: &str) -> Option<&Cluster> {
        self.clusters.iter().find(|c| c.name() == name)
    }

    /// Every cluster, in the order they were added.
    pub fn clusters(&self) -> &[Cluster] {
        &self.clusters
    }

    /// The first management cluster.
    pub fn management(&self) -> Option<&Cluster> {
        self.clusters
            .iter()
            .find(|c| *c.role() == ClusterRole::Management)
    }

    /// The workload clusters (kwok and real-node ones).
    pub fn workloads(&self) -> impl Iterator<Item = &Cluster> {
        self.clusters.iter().filter(|c| c.role().is_workload())
    }

    /// The PostgreSQL server, if one was asked for.
    pub fn postgres(&self) -> Option<&Postgres> {
        self.postgres.as_ref()
    }

    /// The shared etcd, if any cluster runs.
    pub fn etcd(&self) -> Option<&Etcd> {
        self.etcd.as_ref()
    }

    /// Where the environment keeps its files and logs.
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// Every process id the environment started.
    pub fn pids(&self) -> Vec<u32> {
        let mut pids: Vec<u32> = self.clusters.iter().flat_map(Cluster::pids).collect();
        pids.extend(self.postgres.iter().map(|p| p.process().pid()));
        pids.extend(self.etcd.iter().map(|e| e.process().pid()));
        pids
    }

    /// Resident memory of every process (name, bytes).
    pub fn resident_memory(&self) -> Vec<(String, u64)> {
        let mut all: Vec<(String, u64)> = self
            .clusters
            .iter()
            .flat_map(Cluster::resident_memory)
            .collect();
        for p in self
            .postgres
            .iter()
            .map(Postgres::process)
            .chain(self.etcd.iter().map(Etcd::process))
        {
            all.push((p.name().to_owned(), p.resident_bytes()));
        }
        all
    }
}

impl Drop for Environment {
    fn drop(&mut self) {
        // Everything exits in parallel; the fields then wait for each process in drop order.
        self.clusters.iter().for_each(Cluster::terminate);
        self.postgres.iter().for_each(|p| p.process().terminate());
        self.etcd.iter().for_each(|e| e.process().terminate());
    }
}

/// A started environment kept in `cell` for the rest of the test binary. A failed start is kept
/// too, so that every later test reports it at once instead of trying again.
async fn shared_in(
    cell: &'static OnceCell<Result<Environment, String>>,
    describe: impl FnOnce() -> EnvironmentBuilder,
) -> Result<&'static Environment, Error> {
    let env = cell
        .get_or_init(|| async { describe().start().await.map_err(|e| e.to_string()) })
        .await;
    env.as_ref().map_err(|e| Error::Shared(e.clone()))
}

/// The environment shared by every test of one test binary: a management cluster `mgmt`, two
/// workload clusters `east` and `west` (two kwok nodes each) and PostgreSQL. Started on first
/// use; the processes end with the test binary.
pub async fn shared() -> Result<&'static Environment, Error> {
    static SHARED: OnceCell<Result<Environment, String>> = OnceCell::const_new();
    shared_in(&SHARED, || {
        Environment::builder()
            .management("mgmt")
            .workload("east", NodePool::default())
            .workload("west", NodePool::default())
            .postgres()
    })
    .await
}

/// A management cluster (`mgmt`) shared by every test of one test binary, for tests that need
/// no workload cluster and no database.
pub async fn shared_management() -> Result<&'static Cluster, Error> {
    static SHARED: OnceCell<Result<Environment, String>> = OnceCell::const_new();
    let env = shared_in(&SHARED, || Environment::builder().management("mgmt")).await?;
    env.management()
        .ok_or_else(|| Error::Shared("mgmt missing".into()))
}

/// A PostgreSQL server shared by every test of one test binary, for tests that need no cluster.
pub async fn shared_postgres() -> Result<&'static Postgres, Error> {
    static SHARED: OnceCell<Result<Environment, String>> = OnceCell::const_new();
    let env = shared_in(&SHARED, || Environment::builder().postgres()).await?;
    env.postgres()
        .ok_or_else(|| Error::Shared("postgres missing".into()))
}

/// A real-node cluster `edge` shared by every test of one test binary (see
/// [`EnvironmentBuilder::real_node`]). Started on first use; it ends, and the host is cleaned,
/// when the test binary exits.
pub async fn shared_real_node() -> Result<&'static Cluster, Error> {
    static SHARED: OnceCell<Result<Environment, String>> = OnceCell::const_new();
    let env = shared_in(&SHARED, || Environment::builder().real_node("edge")).await?;
    env.cluster("edge")
        .ok_or_else(|| Error::Shared("edge missing".into()))
}
