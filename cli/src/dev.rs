//! `kubenest dev up`: a management cluster, workload clusters with kwok nodes and PostgreSQL, all
//! real processes on loopback, until Ctrl-C or SIGTERM.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::Context as _;
use clap::Subcommand;
use k8s_openapi::api::core::v1::Node;
use kube::api::{Api, ListParams};
use kubenest_testkit::{Binaries, Environment, NodePool};
use sqlx::{Connection, Executor, PgConnection};
use tokio::signal::unix::{SignalKind, signal};

/// The database kubenest's processes use.
const DATABASE: &str = "kubenest";

#[derive(Debug, Subcommand)]
pub enum DevCommand {
    /// Start the local environment in the foreground and stop it on Ctrl-C.
    Up {
        /// Where the environment keeps its state, logs and `dev.env`.
        #[arg(long, env = "KUBENEST_DEV_DIR", default_value = ".kubenest")]
        dir: PathBuf,
        /// Names of the workload clusters.
        #[arg(long, value_delimiter = ',', default_value = "east,west")]
        workloads: Vec<String>,
        /// Fake (kwok) nodes per workload cluster.
        #[arg(long, default_value_t = 3)]
        nodes: u32,
    },
}

pub async fn run(command: DevCommand) -> anyhow::Result<()> {
    match command {
        DevCommand::Up {
            dir,
            workloads,
            nodes,
        } => up(&dir, &workloads, nodes).await,
    }
}

async fn up(dir: &Path, workloads: &[String], nodes: u32) -> anyhow::Result<()> {
    for name in workloads {
        anyhow::ensure!(
            !name.is_empty()
                && name
                    .chars()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit()),
            "workload cluster name {name:?} must be lowercase letters and digits"
        );
    }
    let bins = Binaries::locate()?;
    let run_dir = dir.join("run");
    let env_file = dir.join("dev.env");
    // Each run starts from empty state: stale etcd or PostgreSQL data would outlive its PKI.
    let _ = std::fs::remove_file(&env_file);
    if run_dir.exists() {
        std::fs::remove_dir_all(&run_dir)
            .with_context(|| format!("clear {}", run_dir.display()))?;
    }

    let started = Instant::now();
    eprintln!(
        "starting etcd, PostgreSQL, cluster mgmt and {} workload cluster(s)...",
        workloads.len()
    );
    let mut builder = Environment::builder()
        .dir(&run_dir)
        .management("mgmt")
        .postgres();
    let pool = NodePool {
        count: nodes,
        ..NodePool::default()
    };
    for name in workloads {
        builder = builder.workload(name, pool.clone());
    }
    let env = builder.start().await?;
    eprintln!(
        "  clusters and PostgreSQL ready in {:.1}s",
        started.elapsed().as_secs_f64()
    );

    let postgres = env.postgres().context("postgres missing")?;
    let mut conn = PgConnection::connect(&postgres.url("postgres")).await?;
    conn.execute(format!("CREATE DATABASE {DATABASE}").as_str())
        .await?;
    let database_url = postgres.url(DATABASE);

    let contents = dev_env(&env, &bins, &database_url)?;
    std::fs::write(&env_file, contents).with_context(|| format!("write {}", env_file.display()))?;
    print_summary(&env, &bins, &env_file, &database_url).await?;
    println!("kubenest dev environment is ready");

    let outcome = wait_for_stop(&env).await;
    eprintln!("stopping...");
    let _ = std::fs::remove_file(&env_file);
    drop(env);
    eprintln!("stopped");
    outcome
}

/// The `.kubenest/dev.env` lines: where everything is, for scripts and tests.
fn dev_env(env: &Environment, bins: &Binaries, database_url: &str) -> anyhow::Result<String> {
    let absolute = |p: &Path| std::path::absolute(p).map(|p| p.display().to_string());
    let mut out = String::new();
    let mgmt = env.management().context("management cluster missing")?;
    writeln!(
        out,
        "KUBENEST_MGMT_KUBECONFIG={}",
        absolute(mgmt.kubeconfig_path())?
    )?;
    let names: Vec<&str> = env.workloads().map(|c| c.name()).collect();
    writeln!(out, "KUBENEST_CLUSTERS={}", names.join(","))?;
    for cluster in env.workloads() {
        let key = cluster.name().to_uppercase();
        writeln!(
            out,
            "KUBENEST_KUBECONFIG_{key}={}",
            absolute(cluster.kubeconfig_path())?
        )?;
    }
    writeln!(out, "KUBENEST_DATABASE_URL={database_url}")?;
    writeln!(out, "KUBENEST_KUBECTL={}", absolute(&bins.kubectl)?)?;
    writeln!(out, "KUBENEST_HELM={}", absolute(&bins.helm)?)?;
    Ok(out)
}

async fn print_summary(
    env: &Environment,
    bins: &Binaries,
    env_file: &Path,
    database_url: &str,
) -> anyhow::Result<()> {
    println!();
    for cluster in env.clusters() {
        let client = cluster.client().await?;
        let nodes = Api::<Node>::all(client)
            .list(&ListParams::default())
            .await?;
        let rss: u64 = cluster.resident_memory().iter().map(|(_, b)| b).sum();
        println!(
            "  cluster {:<6} {}  nodes: {:<2} memory: {:>4} MiB",
            cluster.name(),
            cluster.url(),
            nodes.items.len(),
            rss / (1024 * 1024)
        );
        println!(
            "    {} --kubeconfig {} get nodes",
            bins.kubectl.display(),
            cluster.kubeconfig_path().display()
        );
    }
    println!("  postgres       {database_url}");
    println!("  logs           {}", env.dir().display());
    println!(
        "  environment    {}  (source it: set -a; . {}; set +a)",
        env_file.display(),
        env_file.display()
    );
    println!();
    Ok(())
}

/// Waits for Ctrl-C or SIGTERM; fails if a process of the environment dies first.
async fn wait_for_stop(env: &Environment) -> anyhow::Result<()> {
    let mut term = signal(SignalKind::terminate())?;
    let mut check = tokio::time::interval(std::time::Duration::from_secs(2));
    loop {
        tokio::select! {
            _ = tokio::signal::ctrl_c() => return Ok(()),
            _ = term.recv() => return Ok(()),
            _ = check.tick() => {
                for cluster in env.clusters() {
                    cluster.check_running()?;
                }
            }
        }
    }
}
