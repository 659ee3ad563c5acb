//! `kubenest-dev up`: the whole kubenest on loopback until Ctrl-C or SIGTERM — a management
//! cluster, workload clusters with kwok nodes and one with a real node (`edge`, when this
//! machine can run it: root), PostgreSQL, two hub replicas, two leader-elected
//! controllers replicas, the API server with a bootstrap admin, and one agent per workload
//! cluster registered through the API — and the `dev.env` that says where everything is.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::Context as _;
use k8s_openapi::api::core::v1::Node;
use kube::api::{Api, ListParams};
use kubenest_testkit::node::NodeBinaries;
use kubenest_testkit::{Binaries, Environment, Images, NodePool};
use sqlx::{Connection, Executor, PgConnection};
use tokio::signal::unix::{SignalKind, signal};

use crate::builds::BuildSite;
use crate::system::{Options, System};

/// The database kubenest's processes use.
const DATABASE: &str = "kubenest";
/// The user `kubenest` command, built next to `kubenest-dev`; `dev.env` points scripts at it.
const USER_CLI: &str = "kubenest";

/// Settings of `kubenest-dev up`.
#[derive(Debug, clap::Args)]
pub struct UpArgs {
    /// Where the environment keeps its state, logs and `dev.env`.
    #[arg(long, env = "KUBENEST_DEV_DIR", default_value = ".kubenest")]
    pub dir: PathBuf,
    /// Names of the workload clusters.
    #[arg(long, value_delimiter = ',', default_value = "east,west")]
    pub workloads: Vec<String>,
    /// Fake (kwok) nodes per workload cluster.
    #[arg(long, default_value_t = 3)]
    pub nodes: u32,
    /// Name of the workload cluster on a real node, where pods really run (empty: none). It
    /// needs root; without it `up` says why and goes on without that cluster.
    #[arg(long, default_value = "edge")]
    pub real_node: String,
    /// The bootstrap admin's password (default: a random one, written to `dev.env`).
    #[arg(long, env = "KUBENEST_ADMIN_PASSWORD", hide_env_values = true)]
    pub admin_password: Option<String>,
}

/// Starts the local environment in the foreground and stops it on Ctrl-C or SIGTERM.
pub async fn run(args: UpArgs) -> anyhow::Result<()> {
    let real_node = (!args.real_node.is_empty()).then_some(args.real_node.as_str());
    up(
        &args.dir,
        &args.workloads,
        real_node,
        args.nodes,
        args.admin_password,
    )
    .await
}

async fn up(
    dir: &Path,
    workloads: &[String],
    real_node: Option<&str>,
    nodes: u32,
    admin_password: Option<String>,
) -> anyhow::Result<()> {
    for name in workloads.iter().map(String::as_str).chain(real_node) {
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

    // The real node needs root, its packages and binaries: without them, say why and go on.
    let real_node = match real_node.map(|name| (name, NodeBinaries::locate(&bins))) {
        Some((name, Ok(_))) => Some(name),
        Some((name, Err(why))) => {
            eprintln!("no real-node cluster {name}: {why}");
            None
        }
        None => None,
    };
    let started = Instant::now();
    eprintln!(
        "starting etcd, PostgreSQL, cluster mgmt and {} workload cluster(s)...",
        workloads.len() + usize::from(real_node.is_some())
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
    if let Some(name) = real_node {
        builder = builder.real_node(name);
    }
    let env = builder.start().await?;
    eprintln!(
        "  clusters and PostgreSQL ready in {:.1}s",
        started.elapsed().as_secs_f64()
    );
    let demo_image = match real_node {
        Some(name) => Some(load_demo_images(&env, name).await?),
        None => None,
    };
    // Builds from Git on the real node: a registry and a Git server beside it.
    let build_site = match real_node {
        Some(name) => {
            let started = Instant::now();
            let site = BuildSite::start(&env, name, &run_dir).await?;
            eprintln!(
                "  image registry and Git server for builds on {name} ready in {:.1}s",
                started.elapsed().as_secs_f64()
            );
            Some((name, site))
        }
        None => None,
    };

    let postgres = env.postgres().context("postgres missing")?;
    let mut conn = PgConnection::connect(&postgres.url("postgres")).await?;
    conn.execute(format!("CREATE DATABASE {DATABASE}").as_str())
        .await?;
    let database_url = postgres.url(DATABASE);

    let mut options = Options {
        // HTTPS with a certificate made for this run (`KUBENEST_CA_FILE` in dev.env).
        api_tls: true,
        ..Options::default()
    };
    // `make dev` builds the console first; without a build the API runs without it.
    let console = crate::system::repository_root().join("console/dist");
    if console.join("index.html").is_file() {
        options.console_dir = Some(console);
    } else {
        eprintln!(
            "  no console build in {} (make dev builds it)",
            console.display()
        );
    }
    if let Some(password) = admin_password {
        options.admin_password = password;
    }
    let progress = |line: &str| eprintln!("  {line}");
    let mut system = System::start(
        &env,
        &database_url,
        &run_dir.join("kubenest"),
        options,
        &progress,
    )
    .await?;
    system.ensure_org().await?;
    if let Some((name, site)) = &build_site {
        system.set_agent_args(name, site.agent_args());
    }
    for cluster in env.workloads() {
        let id = system.register(cluster, &bins).await?;
        eprintln!(
            "  registered cluster {} ({id}); its agent is starting",
            cluster.name()
        );
    }
    system.wait_connected(Duration::from_secs(120)).await?;
    eprintln!(
        "  every agent connected; kubenest is up in {:.1}s",
        started.elapsed().as_secs_f64()
    );

    let mut contents = dev_env(&env, &bins, &system)?;
    if let (Some(edge), Some(image)) = (real_node, &demo_image) {
        writeln!(contents, "KUBENEST_REAL_NODE_CLUSTER={edge}")?;
        writeln!(contents, "KUBENEST_DEMO_IMAGE={image}")?;
    }
    if let Some((_, site)) = &build_site {
        site.dev_env(&mut contents)?;
    }
    std::fs::write(&env_file, contents).with_context(|| format!("write {}", env_file.display()))?;
    print_summary(&env, &bins, &system, &env_file).await?;
    println!("kubenest dev environment is ready");

    let outcome = wait_for_stop(&env, &mut system).await;
    eprintln!("stopping...");
    let _ = std::fs::remove_file(&env_file);
    drop(system);
    drop(build_site);
    drop(env);
    eprintln!("stopped");
    outcome
}

/// The images of the demo App (the web app, Postgres, Redis) and of the catalog's other addon
/// (Kafka), built if need be (`tools/build-images.sh`, cached) and loaded onto the real node of
/// cluster `name`, so every catalog addon runs there; returns the demo image's reference.
async fn load_demo_images(env: &Environment, name: &str) -> anyhow::Result<String> {
    let started = Instant::now();
    let names = ["demo", "postgres", "redis", "kafka"];
    let images = Images::build(&names).await?;
    let cluster = env
        .cluster(name)
        .context("the real-node cluster is missing")?;
    for image in names {
        cluster.import_image(images.archive(image)?).await?;
    }
    eprintln!(
        "  images {} loaded onto {name} in {:.1}s",
        names.join(", "),
        started.elapsed().as_secs_f64()
    );
    Ok(images.get("demo")?.reference.clone())
}

/// The `.kubenest/dev.env` lines: where everything is, for scripts and tests.
fn dev_env(env: &Environment, bins: &Binaries, system: &System) -> anyhow::Result<String> {
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
        if let Some(agent) = system.agents.get(cluster.name()) {
            writeln!(out, "KUBENEST_CLUSTER_ID_{key}={}", agent.cluster_id)?;
        }
    }
    writeln!(out, "KUBENEST_DATABASE_URL={}", system.database_url())?;
    writeln!(out, "KUBENEST_API={}", system.api_url())?;
    if let Some(ca) = system.api_ca() {
        writeln!(out, "KUBENEST_CA_FILE={}", absolute(ca)?)?;
    }
    if let Some(console) = system.console_url() {
        writeln!(out, "KUBENEST_CONSOLE={console}")?;
    }
    writeln!(out, "KUBENEST_HUB={}", system.public_hub_url())?;
    // Every program's admin endpoint (/metrics, /healthz, /readyz): all in one list, and one
    // key each (`KUBENEST_ADMIN_URL_HUB_0`, `..._CONTROLLERS_0`, `..._APISERVER`,
    // `..._AGENT_EAST`).
    let admins = system.admin_urls();
    let list: Vec<String> = admins.iter().map(|(n, u)| format!("{n}={u}")).collect();
    writeln!(out, "KUBENEST_ADMIN_URLS={}", list.join(","))?;
    for (name, url) in &admins {
        let key = name.to_uppercase().replace('-', "_");
        writeln!(out, "KUBENEST_ADMIN_URL_{key}={url}")?;
    }
    let options = system.options();
    writeln!(out, "KUBENEST_ADMIN_USER={}", options.admin_user)?;
    writeln!(out, "KUBENEST_ADMIN_PASSWORD={}", options.admin_password)?;
    writeln!(out, "KUBENEST_ORG={}", options.org)?;
    writeln!(out, "KUBENEST_KUBECTL={}", absolute(&bins.kubectl)?)?;
    writeln!(out, "KUBENEST_HELM={}", absolute(&bins.helm)?)?;
    // `kubenest-dev` and the user CLI are built into the same directory (`make dev`).
    if let Some(dir) = std::env::current_exe()?.parent() {
        writeln!(out, "KUBENEST_CLI={}", dir.join(USER_CLI).display())?;
    }
    Ok(out)
}

async fn print_summary(
    env: &Environment,
    bins: &Binaries,
    system: &System,
    env_file: &Path,
) -> anyhow::Result<()> {
    println!();
    for cluster in env.clusters() {
        let client = cluster.client().await?;
        let nodes = Api::<Node>::all(client)
            .list(&ListParams::default())
            .await?;
        let rss: u64 = cluster.resident_memory().iter().map(|(_, b)| b).sum();
        let agent = system
            .agents
            .get(cluster.name())
            .map(|a| format!("  agent: {}", a.cluster_id))
            .unwrap_or_default();
        println!(
            "  cluster {:<6} {}  nodes: {:<2} memory: {:>4} MiB{agent}",
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
    println!("  postgres       {}", system.database_url());
    for hub in &system.hubs {
        println!("  {:<14} {}", hub.service.name(), hub.url());
    }
    println!("  hub (agents)   {}", system.public_hub_url());
    for service in &system.controllers {
        println!(
            "  {:<14} log: {}",
            service.name(),
            service.log_path().display()
        );
    }
    for (name, url) in system.admin_urls() {
        println!("  {name:<14} admin: {url}/metrics  {url}/readyz");
    }
    println!(
        "  API            {}  (OpenAPI: {}/api/v1/openapi.json)",
        system.api_url(),
        system.api_url()
    );
    if let Some(ca) = system.api_ca() {
        println!("  API CA         {}  (KUBENEST_CA_FILE)", ca.display());
    }
    if let Some(console) = system.console_url() {
        println!("  console        {console}");
    }
    let options = system.options();
    println!(
        "  admin          {} / {}",
        options.admin_user, options.admin_password
    );
    println!("  organization   {}", options.org);
    println!("  logs           {}", env.dir().display());
    println!(
        "  environment    {}  (source it: set -a; . {}; set +a)",
        env_file.display(),
        env_file.display()
    );
    println!();
    println!("  try it:  set -a; . {}; set +a", env_file.display());
    println!(
        "           echo \"$KUBENEST_ADMIN_PASSWORD\" | $KUBENEST_CLI login -u admin --password-stdin"
    );
    println!("           $KUBENEST_CLI clusters list");
    println!("           make tour");
    println!();
    Ok(())
}

/// Waits for Ctrl-C or SIGTERM; fails if a process of the environment dies first.
async fn wait_for_stop(env: &Environment, system: &mut System) -> anyhow::Result<()> {
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
                system.check_running()?;
            }
        }
    }
}
