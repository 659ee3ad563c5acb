//! The web console end to end in a real browser: the system `make dev` runs (hub replicas,
//! controllers, the API server serving the built console, an agent per workload cluster, real
//! clusters and PostgreSQL), and `console/e2e/run.mjs` driving Debian's Chromium through it
//! with playwright-core. The scenario and its screenshots (`console/test-results/`) are in that
//! script; this test starts the system, tells the script where everything is and wants it to
//! pass.
//!
//! It needs what `tools/setup.sh` installs: Node, Chromium (`/usr/bin/chromium`) and the
//! console's npm packages (`npm ci` in `console/`). The console is built when it is not.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // a test fails by panicking

// A System of its own, on a management cluster of its own: a binary of its own (see
// tests/it/main.rs).
#[path = "it/common/mod.rs"]
mod common;

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use kubenest_devenv::system::{Options, System, repository_root};
use kubenest_testkit::Binaries;

const CONVERGE: Duration = Duration::from_secs(120);

/// Runs `program` in `dir`, failing the test with `what` if it does not succeed.
fn run(what: &str, dir: &Path, command: &mut Command) {
    let status = command
        .current_dir(dir)
        .status()
        .unwrap_or_else(|e| panic!("{what}: could not start ({e}); run tools/setup.sh"));
    assert!(status.success(), "{what} failed: {status}");
}

#[test]
fn the_console_operates_the_fleet_in_chromium() {
    let console = repository_root().join("console");
    assert!(
        console.join("node_modules/playwright-core").is_dir(),
        "the console's npm packages are missing: run tools/setup.sh (npm ci in console/)"
    );
    if !console.join("dist/index.html").is_file() {
        run(
            "npm run build",
            &console,
            Command::new("npm").args(["run", "build"]),
        );
    }
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let env = kubenest_testkit::shared().await.unwrap();
        let database = env
            .postgres()
            .unwrap()
            .fresh_database("console")
            .await
            .unwrap();
        let dir = tempfile::tempdir().unwrap();
        let options = Options {
            heartbeat_seconds: 2,
            backoff_max_seconds: 2,
            reconnect_spread_seconds: 1,
            console_dir: Some(console.join("dist")),
            ..Options::default()
        };
        let progress = |line: &str| eprintln!("system: {line}");
        let mut system = System::start(env, &database.url, dir.path(), options, &progress)
            .await
            .unwrap();
        system.ensure_org().await.unwrap();
        let bins = Binaries::locate().unwrap();
        let mut cluster_ids = Vec::new();
        for cluster in env.workloads() {
            cluster_ids.push(system.register(cluster, &bins).await.unwrap());
        }
        system.wait_connected(CONVERGE).await.unwrap();

        // Where the system is, for both browser scripts.
        let node = |script: &str| {
            let mut command = Command::new("node");
            command
                .arg(script)
                .env("KUBENEST_CONSOLE", system.console_url().unwrap())
                .env("KUBENEST_API", system.api_url())
                .env("KUBENEST_ADMIN_USER", &system.options().admin_user)
                .env("KUBENEST_ADMIN_PASSWORD", &system.options().admin_password)
                .env("KUBENEST_ORG", &system.options().org)
                .env("KUBENEST_KUBECTL", &bins.kubectl);
            command
        };
        let mut script = node("e2e/run.mjs");
        script.env(
            "KUBENEST_CLUSTERS",
            env.workloads()
                .map(|c| c.name())
                .collect::<Vec<_>>()
                .join(","),
        );
        for cluster in env.workloads() {
            script.env(
                format!("KUBENEST_KUBECONFIG_{}", cluster.name().to_uppercase()),
                cluster.kubeconfig_path(),
            );
            // The log viewer's step writes a line every kwok container shows.
            if let Some(log) = cluster.kwok_log_file() {
                script.env(
                    format!("KUBENEST_KWOK_LOG_{}", cluster.name().to_uppercase()),
                    log,
                );
            }
        }
        // The console's benchmark (bench/console), at a tiny size: that every step of it still
        // runs, so that it cannot break unseen (its figures mean nothing here).
        let mut bench = node("../bench/console/measure.mjs");
        bench
            .env("KUBENEST_BENCH_TINY", "1")
            .env("KUBENEST_CLUSTER_ID_EAST", &cluster_ids[0])
            .env(
                "KUBENEST_MGMT_KUBECONFIG",
                env.management().unwrap().kubeconfig_path(),
            );
        // The system's proxies run on this runtime's workers; the browser is waited for
        // beside them.
        tokio::task::spawn_blocking(move || {
            run("the console's browser test", &console, &mut script);
            run("the console's benchmark, tiny", &console, &mut bench);
        })
        .await
        .unwrap();
        system.stop();
    });
}
