//! The install's stages, in order, against real machines: two local machines of the test kit
//! (their own network, mount, UTS and PID namespaces, each with its own sshd), reached over SSH
//! as any machine would be.
//!
//! - `preflight`: fit machines pass; a machine whose sshd is gone fails the stage with
//!   `ERR_MACHINE_UNREACHABLE` naming it, with ssh's own lines, and a retry passes once it
//!   answers again; a machine with a control plane port taken fails with `ERR_PREFLIGHT`
//!   naming the port.
//! - `bundle`: `make bundle`'s archive, unpacked, reaches each machine as its roles need it; a
//!   second run copies nothing, and a damaged file is the only one copied again.
//! - `pki`: kubeadm's layout under `/etc/kubernetes/pki`, the API server's certificate valid for
//!   its machine's address and signed by the cluster CA (as openssl on the machine sees it), keys
//!   readable by root only, a worker given the CA and kube-proxy's identity only; a second run
//!   keeps the CA and copies nothing.
//! - `etcd`: a member on the control plane machine, healthy to the API server's etcd client
//!   certificate, started through the service command; a second run leaves it running as it
//!   was.
//! - `control-plane`: the API server, controller manager and scheduler on the control plane
//!   machine; the API server ready to the cluster admin's certificate, both others holding
//!   their leases, their kubeconfigs readable by root only.
//!
//! Needs root (namespaces, cgroups, the bridge).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // a test fails by panicking

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use kubenest_install::bundle::{self, Bundle};
use kubenest_install::machines::{Machine as Entry, MachinesFile, Role};
use kubenest_install::pki::{self, ClusterPki};
use kubenest_install::{FailureCode, Stage, preflight};
use kubenest_install::{control_plane, etcd};
use kubenest_testkit::machines::{Machine, Machines};

/// sshd as the test kit starts it, started again without new host keys (a machine that comes
/// back is the same machine).
async fn restart_sshd(machine: &Machine) {
    let listen = format!("ListenAddress={}", machine.ip());
    machine
        .run(
            "/usr/sbin/sshd",
            &[
                "-o",
                &listen,
                "-o",
                "AuthorizedKeysFile=/etc/kubenest/ssh/authorized_keys",
                "-o",
                "PidFile=/run/sshd.pid",
            ],
        )
        .await
        .unwrap();
}

async fn until_answering(file: &MachinesFile, known_hosts: &Path) {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        match preflight::run(file, known_hosts).await {
            Ok(_) => return,
            Err(e) if e.code == FailureCode::MachineUnreachable && Instant::now() < deadline => {
                tokio::time::sleep(Duration::from_millis(300)).await;
            }
            Err(e) => panic!("{e}: {:?}", e.log),
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_stages_run_on_two_machines_and_name_what_stops_them() {
    let dir = tempfile::tempdir().unwrap();
    let made = Machines::make(2, &dir.path().join("logs")).await.unwrap();
    let [m1, m2] = made.machines() else {
        panic!("two machines")
    };
    let key = dir.path().join("id_ed25519");
    kubenest_testkit::ssh_keygen(&key).unwrap();
    let public = std::fs::read_to_string(key.with_extension("pub")).unwrap();
    for m in [m1, m2] {
        m.start_sshd(&public).await.unwrap();
    }
    let entry = |m: &Machine, role: Role| Entry {
        name: m.name().to_owned(),
        address: m.ip().to_string(),
        port: 22,
        user: "root".to_owned(),
        key_file: key.clone(),
        roles: vec![role],
    };
    let file = MachinesFile {
        machines: vec![entry(m1, Role::ControlPlane), entry(m2, Role::Worker)],
        known_hosts: None,
    };
    file.check().unwrap();
    let known_hosts = dir.path().join("known_hosts");

    until_answering(&file, &known_hosts).await;
    let facts = preflight::run(&file, &known_hosts).await.unwrap();
    assert_eq!(facts.len(), 2);
    assert_eq!(facts[m1.name()].os, "debian 12", "{facts:?}");
    assert!(facts[m2.name()].listening.contains(&22), "{facts:?}");

    // Machine 2's sshd gone: the stage names it, with ssh's own words, and a retry can help.
    m2.run("pkill", &["-x", "sshd"]).await.unwrap();
    let failed = preflight::run(&file, &known_hosts).await.unwrap_err();
    assert_eq!(
        (failed.stage, failed.code, failed.machine.as_deref()),
        (
            Stage::Preflight,
            FailureCode::MachineUnreachable,
            Some(m2.name())
        ),
        "{failed}"
    );
    assert!(failed.retryable());
    assert!(
        failed.log.iter().any(|l| l.contains("Connection refused")),
        "{:?}",
        failed.log
    );
    restart_sshd(m2).await;
    until_answering(&file, &known_hosts).await;

    // The API server's port taken on the control plane machine: unfit, named, no retry.
    m1.spawn(
        "squatter",
        "/bin/busybox",
        &["nc".into(), "-l".into(), "-p".into(), "6443".into()],
    )
    .unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    let unfit = loop {
        match preflight::run(&file, &known_hosts).await {
            Err(e) => break e,
            Ok(_) if Instant::now() < deadline => {
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
            Ok(_) => panic!("port 6443 was never seen taken"),
        }
    };
    assert_eq!(
        (unfit.code, unfit.machine.as_deref()),
        (FailureCode::Preflight, Some(m1.name())),
        "{unfit}"
    );
    assert!(
        unfit.message.contains("port 6443 is taken"),
        "{}",
        unfit.message
    );
    assert!(!unfit.retryable());
    m1.run("pkill", &["-f", "nc -l -p 6443"]).await.unwrap();

    // The bundle: every file for the control plane, the node's for the worker, then nothing
    // twice, and only what was damaged.
    kubenest_testkit::Images::build(&[]).await.unwrap();
    let built = Command::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../tools/bundle.sh"))
        .env("KUBENEST_BUNDLE_DIR", dir.path())
        .env("KUBENEST_BUNDLE_PREBUILT", "1")
        .output()
        .unwrap();
    assert!(built.status.success(), "{built:?}");
    let archive = String::from_utf8(built.stdout).unwrap();
    let unpacked = dir.path().join("bundle");
    std::fs::create_dir(&unpacked).unwrap();
    let started = Instant::now();
    let bundle = Bundle::unpack(Path::new(archive.trim()), &unpacked)
        .await
        .unwrap();
    let pushed = bundle::push(&bundle, &file, &known_hosts).await.unwrap();
    eprintln!(
        "bundle: unpacked and pushed to two machines in {:?}: {pushed:?}",
        started.elapsed()
    );
    let all = bundle.manifest.files.len();
    assert_eq!(pushed[m1.name()].copied, all, "{pushed:?}");
    let node_files = bundle.files_for(&[Role::Worker]).len();
    assert!(node_files < all);
    assert_eq!(pushed[m2.name()].copied, node_files, "{pushed:?}");
    assert!(m2.path("/var/lib/kubenest/bundle/bin/kubelet").is_file());
    assert!(!m2.path("/var/lib/kubenest/bundle/bin/etcd").exists());
    assert!(!Path::new("/var/lib/kubenest/bundle/bin/kubelet").exists());
    let again = bundle::push(&bundle, &file, &known_hosts).await.unwrap();
    assert!(
        again.values().all(|p| p.copied == 0 && p.bytes == 0),
        "{again:?}"
    );
    let damaged = m2.path("/var/lib/kubenest/bundle/bin/kubelet");
    let mut bytes = std::fs::read(&damaged).unwrap();
    bytes.truncate(bytes.len() / 2);
    std::fs::write(&damaged, bytes).unwrap();
    let mended = bundle::push(&bundle, &file, &known_hosts).await.unwrap();
    assert_eq!(
        (mended[m1.name()].copied, mended[m2.name()].copied),
        (0, 1),
        "{mended:?}"
    );

    // The PKI.
    let state = dir.path().join("pki");
    let cluster_pki = ClusterPki::ensure(&state, &file).unwrap();
    let pushed = pki::push(&cluster_pki, &file, &known_hosts).await.unwrap();
    assert!(
        pushed.values().all(|p| p.copied > 0 && p.kept == 0),
        "{pushed:?}"
    );
    let verified = m1
        .run(
            "openssl",
            &[
                "verify",
                "-CAfile",
                "/etc/kubernetes/pki/ca.crt",
                "/etc/kubernetes/pki/apiserver.crt",
            ],
        )
        .await
        .unwrap();
    assert!(verified.contains(": OK"), "{verified}");
    let names = m1
        .run(
            "openssl",
            &[
                "x509",
                "-noout",
                "-ext",
                "subjectAltName",
                "-in",
                "/etc/kubernetes/pki/apiserver.crt",
            ],
        )
        .await
        .unwrap();
    assert!(
        names.contains(&format!("IP Address:{}", m1.ip()))
            && names.contains("IP Address:10.96.0.1"),
        "{names}"
    );
    let etcd = m1
        .run(
            "openssl",
            &[
                "verify",
                "-CAfile",
                "/etc/kubernetes/pki/etcd/ca.crt",
                "/etc/kubernetes/pki/etcd/server.crt",
            ],
        )
        .await
        .unwrap();
    assert!(etcd.contains(": OK"), "{etcd}");
    let modes = m1
        .run(
            "stat",
            &[
                "-c",
                "%a %n",
                "/etc/kubernetes/pki/sa.key",
                "/etc/kubernetes/pki/ca.crt",
            ],
        )
        .await
        .unwrap();
    assert_eq!(
        modes,
        "600 /etc/kubernetes/pki/sa.key\n644 /etc/kubernetes/pki/ca.crt\n"
    );
    let worker = m2
        .run("find", &["/etc/kubernetes/pki", "-type", "f"])
        .await
        .unwrap();
    let mut worker: Vec<&str> = worker.lines().collect();
    worker.sort_unstable();
    assert_eq!(
        worker,
        [
            "/etc/kubernetes/pki/ca.crt",
            "/etc/kubernetes/pki/kube-proxy.crt",
            "/etc/kubernetes/pki/kube-proxy.key"
        ]
    );
    let ca = cluster_pki.ca_pem().unwrap();
    let again = ClusterPki::ensure(&state, &file).unwrap();
    assert_eq!(again.ca_pem().unwrap(), ca);
    let pushed = pki::push(&again, &file, &known_hosts).await.unwrap();
    assert!(pushed.values().all(|p| p.copied == 0), "{pushed:?}");

    // etcd.
    let started = Instant::now();
    etcd::run(&again, &file, &state, &known_hosts)
        .await
        .unwrap();
    eprintln!("etcd: healthy in {:?}", started.elapsed());
    let service = ["/etc/kubenest/bin/kubenest-service", "status", "etcd"];
    assert_eq!(m1.run("sh", &service).await.unwrap(), "running\n");
    assert!(m2.run("sh", &service).await.is_err());
    let pid = std::fs::read_to_string(m1.path("/run/kubenest/etcd.pid")).unwrap();
    etcd::run(&again, &file, &state, &known_hosts)
        .await
        .unwrap();
    assert_eq!(
        std::fs::read_to_string(m1.path("/run/kubenest/etcd.pid")).unwrap(),
        pid
    );

    // The control plane.
    let started = Instant::now();
    control_plane::run(&again, &file, &state, &known_hosts)
        .await
        .unwrap();
    eprintln!("control plane: ready in {:?}", started.elapsed());
    let modes = m1
        .run(
            "stat",
            &["-c", "%a", "/etc/kubenest/conf/controller-manager.conf"],
        )
        .await
        .unwrap();
    assert_eq!(modes, "600\n");
    let admin = again.admin_client().unwrap();
    let namespaces = admin
        .get(format!(
            "https://{}:6443/api/v1/namespaces/kube-system",
            m1.ip()
        ))
        .send()
        .await
        .unwrap();
    assert!(namespaces.status().is_success(), "{namespaces:?}");
    made.stop();
}
