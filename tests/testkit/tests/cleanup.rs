//! No process of the kit outlives its test binary: not when a test panics, not when the binary
//! is killed outright. Each test runs this same binary as a child (the ignored helper below),
//! lets it start an environment and die, then checks every pid the child reported.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // a test fails by panicking

use std::path::Path;
use std::process::{Child, Command};
use std::time::{Duration, Instant};

use kubenest_testkit::Environment;
use kubenest_testkit::process::is_alive;

const PID_FILE: &str = "KUBENEST_TESTKIT_PID_FILE";
const DEATH: &str = "KUBENEST_TESTKIT_DEATH";

#[tokio::test]
#[ignore = "helper: started as a child process by the tests below"]
async fn helper_starts_an_environment_then_dies() {
    let pid_file = std::env::var(PID_FILE).unwrap();
    let env = Environment::builder()
        .management("doomed")
        .postgres()
        .start()
        .await
        .unwrap();
    let pids: Vec<String> = env.pids().iter().map(u32::to_string).collect();
    let tmp = format!("{pid_file}.tmp");
    std::fs::write(&tmp, pids.join("\n")).unwrap();
    std::fs::rename(&tmp, &pid_file).unwrap();
    if std::env::var(DEATH).as_deref() == Ok("panic") {
        panic!("deliberate panic while the environment runs");
    }
    // Otherwise wait to be killed with SIGKILL, which runs no destructor at all.
    tokio::time::sleep(Duration::from_secs(600)).await;
}

/// Starts the helper with its output in `dir/helper.log`: its own deliberate failure report
/// must not read as this binary's result.
fn start_helper(death: &str, dir: &Path) -> Child {
    let log = std::fs::File::create(dir.join("helper.log")).unwrap();
    Command::new(std::env::current_exe().unwrap())
        .args([
            "helper_starts_an_environment_then_dies",
            "--exact",
            "--ignored",
            "--nocapture",
        ])
        .env(PID_FILE, dir.join("pids"))
        .env(DEATH, death)
        .stdout(log.try_clone().unwrap())
        .stderr(log)
        .spawn()
        .unwrap()
}

fn helper_log(dir: &Path) -> String {
    kubenest_testkit::process::tail(&dir.join("helper.log"), 40)
}

fn wait_for(what: &str, timeout: Duration, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + timeout;
    while !done() {
        assert!(
            Instant::now() < deadline,
            "timed out after {timeout:?}: {what}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn read_pids(dir: &Path) -> Vec<u32> {
    let pids: Vec<u32> = std::fs::read_to_string(dir.join("pids"))
        .unwrap_or_else(|e| panic!("no pid file ({e}); helper log:\n{}", helper_log(dir)))
        .lines()
        .map(|l| l.parse().unwrap())
        .collect();
    // etcd, kube-apiserver, kube-controller-manager and postgres.
    assert_eq!(pids.len(), 4, "unexpected pid list {pids:?}");
    pids
}

fn assert_all_gone(pids: &[u32]) {
    wait_for("every process to be gone", Duration::from_secs(15), || {
        pids.iter().all(|pid| !is_alive(*pid))
    });
}

#[test]
fn no_process_survives_a_panicking_test() {
    let dir = tempfile::tempdir().unwrap();
    let mut child = start_helper("panic", dir.path());
    let status = child.wait().unwrap();
    assert!(!status.success(), "the helper was meant to fail");
    assert_all_gone(&read_pids(dir.path()));
}

#[test]
fn no_process_survives_a_killed_test_binary() {
    let dir = tempfile::tempdir().unwrap();
    let mut child = start_helper("kill", dir.path());
    wait_for(
        "the helper to start its environment",
        Duration::from_secs(180),
        || dir.path().join("pids").exists() || child.try_wait().unwrap().is_some(),
    );
    let pids = read_pids(dir.path());
    assert!(
        pids.iter().all(|pid| is_alive(*pid)),
        "the environment was not running"
    );
    child.kill().unwrap();
    child.wait().unwrap();
    assert_all_gone(&pids);
}
