//! `kubenest-dev machines up | list | down` on this host, through the binary: machines that
//! outlive the command, reached over SSH each as itself, listed alive or not, and removed without
//! a trace — also when they died without `down`. Needs root (namespaces, cgroups, the bridge).
//!
//!   cargo test -p kubenest-devenv --test machines
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // a test fails by panicking

use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::{Command, Output};
use std::time::{Duration, Instant};

use kubenest_domain::machines::{MachinesFile, Role};
use kubenest_machines::host::Lock;
use kubenest_machines::{
    BRIDGE, CGROUP_PREFIX, Error, LOCK_FILE, Machine, PERSISTENT_HOLDER, STATE_DIR,
};

fn dev(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_kubenest-dev"))
        .arg("machines")
        .args(args)
        .env("RUST_LOG", "warn")
        .output()
        .unwrap()
}

/// Runs `kubenest-dev machines ARGS`, which must succeed; its stdout.
fn dev_ok(args: &[&str]) -> String {
    let out = dev(args);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "machines {args:?}: {stderr}");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Runs `kubenest-dev machines ARGS`, which must fail; its stderr.
fn dev_fails(args: &[&str]) -> String {
    let out = dev(args);
    assert!(!out.status.success(), "machines {args:?} succeeded");
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// `kubenest-dev machines up ARGS`, which must succeed; while another test binary's machines
/// hold the lock (they live seconds; `make test` runs binaries two at a time), it waits for them.
async fn up(args: &[&str]) -> String {
    let deadline = Instant::now() + Duration::from_secs(300);
    loop {
        let out = dev(&[&["up"][..], args].concat());
        let stderr = String::from_utf8_lossy(&out.stderr);
        if out.status.success() {
            return String::from_utf8_lossy(&out.stdout).into_owned();
        }
        let a_test = stderr.contains("is held by process");
        assert!(
            a_test && Instant::now() < deadline,
            "machines up {args:?}: {stderr}"
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

/// `ssh root@ADDRESS COMMAND` with the key `up` made; its stdout.
fn ssh(key: &Path, known_hosts: &str, checking: &str, address: &str, command: &str) -> String {
    let out = Command::new("ssh")
        .arg("-i")
        .arg(key)
        .args(["-o", &format!("StrictHostKeyChecking={checking}")])
        .args(["-o", &format!("UserKnownHostsFile={known_hosts}")])
        .args(["-o", "BatchMode=yes", "-o", "ConnectTimeout=5"])
        .args(["-o", "LogLevel=ERROR"])
        .arg(format!("root@{address}"))
        .args(["--", command])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "ssh {address} {command}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).trim().to_owned()
}

/// Asserts that nothing of the machines is left on the host.
fn assert_nothing_left(machines: &[Machine]) {
    assert!(!Path::new(STATE_DIR).exists(), "{STATE_DIR} is left");
    assert!(
        !Path::new(&format!("/sys/class/net/{BRIDGE}")).exists(),
        "the bridge is left"
    );
    for link in std::fs::read_dir("/sys/class/net").unwrap().flatten() {
        let name = link.file_name().to_string_lossy().into_owned();
        let veth = name.strip_prefix("knm").is_some_and(|n| {
            n.trim_end_matches('c').chars().all(|c| c.is_ascii_digit()) && !n.is_empty()
        });
        assert!(!veth, "veth {name} is left");
    }
    for hierarchy in std::fs::read_dir("/sys/fs/cgroup").unwrap().flatten() {
        for cgroup in std::fs::read_dir(hierarchy.path())
            .into_iter()
            .flatten()
            .flatten()
        {
            let name = cgroup.file_name().to_string_lossy().into_owned();
            assert!(
                !name.starts_with(CGROUP_PREFIX),
                "cgroup {} is left",
                cgroup.path().display()
            );
        }
    }
    for machine in machines {
        assert!(!machine.alive(), "{}'s first process is left", machine.name);
    }
}

#[test]
fn a_count_outside_one_to_fifty_is_refused_naming_the_rule() {
    for (given, said) in [
        ("0", "count: 0 machines asked for; from 1 to 50"),
        ("51", "count: 51 machines asked for; from 1 to 50"),
        ("two", "\"two\" is not a whole number from 1 to 50"),
        ("--", "required"),
    ] {
        let stderr = dev_fails(&["up", given]);
        assert!(stderr.contains(said), "up {given}: {stderr}");
    }
}

#[test]
fn a_user_without_root_can_neither_make_nor_remove_machines() {
    // The binary's folder is root's alone: nobody runs it through a link in a folder it may
    // enter (a link, not a copy: a copy being written while another test forks cannot run).
    let dir = tempfile::tempdir().unwrap();
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let copy = dir.path().join("kubenest-dev");
    std::fs::hard_link(env!("CARGO_BIN_EXE_kubenest-dev"), &copy).unwrap();
    for args in [&["up", "1"][..], &["down"]] {
        let out = Command::new("setpriv")
            .args(["--reuid=65534", "--regid=65534", "--clear-groups", "--"])
            .arg(&copy)
            .arg("machines")
            .args(args)
            .current_dir(dir.path())
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            !out.status.success(),
            "machines {args:?} as nobody succeeded"
        );
        assert!(
            stderr.contains("local machines need root"),
            "{args:?}: {stderr}"
        );
    }
    assert!(!dir.path().join(".kubenest").exists());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn machines_outlive_up_answer_over_ssh_as_themselves_and_down_leaves_nothing() {
    kubenest_machines::require_root().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("machines.yaml");
    let said = up(&["2", "--file", file.to_str().unwrap()]).await;
    assert!(said.contains("kn-machine-2 10.250.0.12 up"), "{said}");

    // The machines file: root with the key made for this `up`, the first the control plane.
    let machines = MachinesFile::parse(&std::fs::read_to_string(&file).unwrap()).unwrap();
    let roles: Vec<Role> = machines.machines.iter().map(|m| m.roles[0]).collect();
    assert_eq!(roles, [Role::ControlPlane, Role::Worker]);
    let key = machines.machines[0].key_file.clone();
    let mode = std::fs::metadata(&key).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600, "{}", key.display());
    let recorded = Machine::recorded().unwrap();
    assert_eq!(recorded.len(), 2);

    // They hold the machines' lock after `up` has exited: another `up` is refused naming them,
    // and a test's machines (the test kit's guard takes the same lock) cannot take it.
    let again = dev_fails(&["up", "1"]);
    assert!(
        again.contains("already up") && again.contains("machines down"),
        "{again}"
    );
    match Lock::take("the machines test") {
        Err(Error::Busy { holder }) => assert!(holder.starts_with(PERSISTENT_HOLDER), "{holder}"),
        taken => panic!("the lock is not the machines': {taken:?}"),
    }
    assert!(recorded.iter().all(Machine::alive));
    // Of what `up` was given, the machines keep the lock alone (no caller's pipe held open).
    for machine in &recorded {
        let state = Path::new(STATE_DIR).join(&machine.name);
        let allowed = [
            "/dev/null".into(),
            state.join("machine.log"),
            state.join("machine.sh"),
            LOCK_FILE.into(),
        ];
        for fd in std::fs::read_dir(format!("/proc/{}/fd", machine.pid))
            .unwrap()
            .flatten()
        {
            let target = std::fs::read_link(fd.path()).unwrap();
            assert!(
                allowed.contains(&target),
                "{} holds {}",
                machine.name,
                target.display()
            );
        }
    }

    // Each answers over SSH as itself; a file in one machine's /etc is in neither the other's
    // nor the host's. Machine 1's host key is the one `up` recorded.
    let known = dir.path().join("known_hosts");
    let known = known.to_str().unwrap();
    let recorded_hosts = machines.known_hosts.as_ref().unwrap().to_str().unwrap();
    for (entry, (checking, hosts)) in machines
        .machines
        .iter()
        .zip([("yes", recorded_hosts), ("accept-new", known)])
    {
        let address = entry.address.to_string();
        assert_eq!(ssh(&key, hosts, checking, &address, "hostname"), entry.name);
    }
    let [first, second] = [0, 1].map(|i| machines.machines[i].address.to_string());
    ssh(
        &key,
        known,
        "accept-new",
        &first,
        "echo one > /etc/kubenest-machines-test",
    );
    let elsewhere = ssh(
        &key,
        known,
        "accept-new",
        &second,
        "ls /etc/kubenest-machines-test || true",
    );
    assert_eq!(elsewhere, "");
    assert!(!Path::new("/etc/kubenest-machines-test").exists());
    let listed = dev_ok(&["list"]);
    assert_eq!(
        listed.matches("running, sshd answers").count(),
        2,
        "{listed}"
    );

    // Machine 1's sshd killed (waited for until it is gone): `list` says so of it alone.
    let script = "p=$(cat /run/sshd.pid) && kill -KILL $p && \
                  while grep -qs '^State:.*[RSDT]' /proc/$p/status; do sleep 0.05; done";
    recorded[0].run("sh", &["-c", script]).await.unwrap();
    let listed = dev_ok(&["list"]);
    assert!(
        listed.contains("kn-machine-1 10.250.0.11")
            && listed.contains("running, sshd does not answer")
            && listed.contains("running, sshd answers"),
        "{listed}"
    );

    dev_ok(&["down"]);
    assert_nothing_left(&recorded);
    assert_eq!(
        dev_ok(&["down"]).trim(),
        "machines removed: 0; nothing of them is left"
    );
    assert_eq!(dev_ok(&["list"]).trim(), "no machines");

    // A machine that died without `down` (as in a crash) frees the lock; `list` says it is
    // dead and `down` removes what it left.
    up(&["1", "--file", file.to_str().unwrap()]).await;
    let crashed = Machine::recorded().unwrap();
    crashed[0].kill();
    let freed = Lock::wait("the machines test", Duration::from_secs(30)).await;
    freed.unwrap().release();
    let listed = dev_ok(&["list"]);
    assert!(listed.contains("kn-machine-1 10.250.0.11"), "{listed}");
    assert!(listed.contains("dead, sshd does not answer"), "{listed}");
    assert!(
        Path::new(STATE_DIR).exists() && Path::new(&format!("/sys/class/net/{BRIDGE}")).exists()
    );
    assert_eq!(
        dev_ok(&["down"]).trim(),
        "machines removed: 1; nothing of them is left"
    );
    assert_nothing_left(&crashed);
}
