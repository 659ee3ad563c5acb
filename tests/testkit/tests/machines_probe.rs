//! Issue 39's probe: can several kubelets share this host as the `local` provider's machines?
//!
//! Two local machines ([`kubenest_testkit::machines`]), each its own network, mount, UTS and PID
//! namespace on the host bridge, each with its own containerd, kubelet (own root dir, cgroup
//! root, pod network), kube-proxy and sshd, both joined to one API server on the bridge. One HTTP
//! server pod on each machine; a client pod on each machine reaches the other machine's server by
//! pod IP, through the routes over the bridge (no NAT), and through its Service (the client
//! machine's kube-proxy, its nftables rules in the machine's own network namespace); each sshd
//! answers on its own address with the machine's own hostname. Then everything is stopped and the host is checked clean.
//!
//! Needs root and the real node's binaries (tools/setup.sh). Runs beside the real node (its own
//! lock, bridge, subnets, cgroups and folders). Prints the measured times and memory.
//!
//!   cargo test -p kubenest-testkit --test machines_probe -- --nocapture
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // a test fails by panicking

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{Node, Pod, Service};
use kube::Api;
use kube::api::{LogParams, PostParams};
use kubenest_testkit::machines::{self, ControlPlane, Machine, Machines};
use kubenest_testkit::node::NodeBinaries;
use kubenest_testkit::{Binaries, NodeIdentity};
use serde_json::json;

const TIMEOUT: Duration = Duration::from_secs(180);

fn node_ready(node: &Node) -> bool {
    node.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|cs| cs.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
}

/// The end of each machine's logs and the API server's, for a failure's message.
fn logs(dir: &Path) -> String {
    let mut out = String::new();
    for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let path = entry.path();
        if path.extension().is_some_and(|e| e == "log") {
            let tail = kubenest_testkit::process::tail(&path, 8);
            out.push_str(&format!("--- {}\n{tail}\n", path.display()));
        }
    }
    out
}

fn server_pod(machine: &Machine, image: &str) -> Pod {
    serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": format!("server-{}", machine.index()),
                     "labels": {"app": format!("server-{}", machine.index())}},
        "spec": {
            "nodeName": machine.name(),
            "containers": [{
                "name": "httpd", "image": image, "imagePullPolicy": "Never",
                "command": ["sh", "-c",
                    "mkdir -p /tmp/www && echo \"served on $NODE\" > /tmp/www/index.html \
                     && exec httpd -f -p 8080 -h /tmp/www"],
                "env": [{"name": "NODE", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}}],
            }],
        },
    }))
    .unwrap()
}

/// Service `server-N` in front of machine N's server pod.
fn service(machine: &Machine) -> Service {
    let name = format!("server-{}", machine.index());
    serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "Service",
        "metadata": {"name": name},
        "spec": {"selector": {"app": name}, "ports": [{"port": 8080, "targetPort": 8080}]},
    }))
    .unwrap()
}

/// A pod on `machine` that asks each of `targets` (addresses) for its page over HTTP, retrying
/// until each answers, and prints `TARGET ANSWER` lines.
fn client_pod(machine: &Machine, image: &str, targets: &[&str]) -> Pod {
    serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": format!("client-{}", machine.index())},
        "spec": {
            "nodeName": machine.name(),
            "restartPolicy": "Never",
            "containers": [{
                "name": "wget", "image": image, "imagePullPolicy": "Never",
                // nc, not wget: a static glibc's getaddrinfo cannot load NSS modules, so
                // busybox's wget crashes (as in the real node's tests).
                "command": ["sh", "-c", format!(
                    "for t in {}; do ok=; for i in $(seq 30); do \
                       a=$(printf 'GET / HTTP/1.0\\r\\n\\r\\n' | nc -w 3 $t 8080 | tail -n 1) \
                       && [ -n \"$a\" ] && echo \"$t $a\" && ok=1 && break; sleep 1; done; \
                       [ -n \"$ok\" ] || exit 1; done", targets.join(" "))],
            }],
        },
    }))
    .unwrap()
}

/// Waits until pod `name` is in one of `phases`; its status.
async fn phase(pods: &Api<Pod>, name: &str, phases: &[&str], dir: &Path) -> Pod {
    let deadline = Instant::now() + TIMEOUT;
    loop {
        let pod = pods.get(name).await.expect("get pod");
        let now = pod
            .status
            .as_ref()
            .and_then(|s| s.phase.clone())
            .unwrap_or_default();
        if phases.contains(&now.as_str()) {
            return pod;
        }
        assert!(
            Instant::now() < deadline,
            "pod {name} still {now:?}: {:?}\n{}",
            pod.status,
            logs(dir)
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

fn mib(bytes: u64) -> f64 {
    bytes as f64 / (1024.0 * 1024.0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_kubelets_share_the_host_as_local_machines() {
    let bins = Binaries::locate().expect("the binaries (tools/setup.sh)");
    let node_bins = NodeBinaries::locate(&bins).expect("the real node's binaries");
    let dir = tempfile::tempdir().unwrap();
    let logs_dir = dir.path().to_owned();

    let started = Instant::now();
    let set = Machines::make(2, &logs_dir)
        .await
        .expect("make the machines");
    let made = started.elapsed();
    let [m1, m2] = set.machines() else {
        panic!("two machines")
    };

    // Each machine is its own: hostname, network, /etc, processes.
    for m in [m1, m2] {
        assert_eq!(m.run("hostname", &[]).await.unwrap().trim(), m.name());
        let links = m.run("ip", &["-o", "link"]).await.unwrap();
        assert!(
            links.contains("eth0") && !links.contains(machines::BRIDGE),
            "{links}"
        );
        m.write("/etc/kubenest-probe", m.name()).unwrap();
        let pid1 = m
            .run("sh", &["-c", "cat /proc/1/cmdline | tr '\\0' ' '"])
            .await
            .unwrap();
        assert!(
            pid1.starts_with("sh ") && pid1.contains(" init "),
            "{}: PID 1 is {pid1}",
            m.name()
        );
    }
    assert!(
        !Path::new("/etc/kubenest-probe").exists(),
        "a machine wrote the host's /etc"
    );
    assert_eq!(
        m1.run("cat", &["/etc/kubenest-probe"]).await.unwrap(),
        m1.name(),
        "machine 1 sees machine 2's /etc"
    );

    let identities: Vec<NodeIdentity> = set
        .machines()
        .iter()
        .map(|m| NodeIdentity {
            name: m.name().to_owned(),
            ip: m.ip().into(),
        })
        .collect();
    let plane = ControlPlane::start("machines", &bins, &logs_dir.join("plane"), &identities)
        .await
        .expect("the control plane");
    let client = plane.client().await.unwrap();

    let containerd_started = Instant::now();
    for m in [m1, m2] {
        m.start_containerd(&node_bins).await.expect("containerd");
        m.import_image(&node_bins, &node_bins.helper_archive)
            .await
            .expect("import the test image");
    }
    let containerd_time = containerd_started.elapsed();

    let kubelets_started = Instant::now();
    for m in [m1, m2] {
        m.start_kubelet(&plane, &node_bins).expect("kubelet");
        m.start_kube_proxy(&plane, &node_bins).expect("kube-proxy");
    }
    let nodes: Api<Node> = Api::all(client.clone());
    let deadline = Instant::now() + TIMEOUT;
    loop {
        let ready = nodes
            .list(&Default::default())
            .await
            .unwrap()
            .items
            .iter()
            .filter(|n| node_ready(n))
            .count();
        if ready == 2 {
            break;
        }
        for m in [m1, m2] {
            m.check_running()
                .unwrap_or_else(|e| panic!("{e}\n{}", logs(&logs_dir)));
        }
        assert!(
            Instant::now() < deadline,
            "{ready} of 2 nodes Ready\n{}",
            logs(&logs_dir)
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let ready_time = kubelets_started.elapsed();

    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    let pods_started = Instant::now();
    let mut server_ips = Vec::new();
    for m in [m1, m2] {
        pods.create(
            &PostParams::default(),
            &server_pod(m, &node_bins.helper_image),
        )
        .await
        .unwrap();
    }
    for m in [m1, m2] {
        let name = format!("server-{}", m.index());
        let pod = phase(&pods, &name, &["Running"], &logs_dir).await;
        let ip = pod.status.and_then(|s| s.pod_ip).unwrap_or_default();
        assert!(
            ip.starts_with(&format!("10.251.{}.", m.index())),
            "{name} has IP {ip:?}, not one of {}",
            m.pod_cidr()
        );
        server_ips.push(ip);
    }
    let running_time = pods_started.elapsed();

    // The pods' cgroups are under each machine's own cgroup root.
    for m in [m1, m2] {
        let kubepods = format!("/sys/fs/cgroup/memory{}/kubepods", m.cgroup());
        let pod_dirs = std::fs::read_dir(&kubepods)
            .unwrap_or_else(|e| panic!("{kubepods}: {e}"))
            .flatten()
            .flat_map(|e| std::fs::read_dir(e.path()).into_iter().flatten().flatten())
            .filter(|e| e.file_name().to_string_lossy().starts_with("pod"))
            .count();
        assert!(pod_dirs >= 1, "no pod cgroup under {kubepods}");
    }

    // Each machine's client reaches the other machine's server by pod IP (routes over the
    // bridge) and through its Service's ClusterIP (the client machine's kube-proxy).
    let services: Api<Service> = Api::namespaced(client.clone(), "default");
    let mut cluster_ips = Vec::new();
    for m in [m1, m2] {
        let created = services
            .create(&PostParams::default(), &service(m))
            .await
            .unwrap();
        cluster_ips.push(created.spec.and_then(|s| s.cluster_ip).unwrap_or_default());
    }
    for (m, other) in [(m1, 1), (m2, 0)] {
        let targets = [server_ips[other].as_str(), cluster_ips[other].as_str()];
        pods.create(
            &PostParams::default(),
            &client_pod(m, &node_bins.helper_image, &targets),
        )
        .await
        .unwrap();
    }
    for (m, other) in [(m1, 1), (m2, 0)] {
        let name = format!("client-{}", m.index());
        let pod = phase(&pods, &name, &["Succeeded", "Failed"], &logs_dir).await;
        let log = pods
            .logs(&name, &LogParams::default())
            .await
            .expect("pods/log");
        let ended = pod.status.and_then(|s| s.phase).unwrap_or_default();
        assert_eq!(ended, "Succeeded", "{name}: {log}\n{}", logs(&logs_dir));
        let served = format!("served on {}", set.machines()[other].name());
        assert_eq!(
            log.trim(),
            format!(
                "{} {served}\n{} {served}",
                server_ips[other], cluster_ips[other]
            ),
            "{name}"
        );
    }

    // Each kube-proxy's rules are in its machine's network namespace.
    for m in [m1, m2] {
        let table = m
            .run("nft", &["list", "table", "ip", "kube-proxy"])
            .await
            .unwrap();
        assert!(table.contains("services"), "{}: {table}", m.name());
    }

    // sshd on each machine's own address, answering with the machine's hostname.
    let key = logs_dir.join("probe_key");
    let keygen = Command::new("ssh-keygen")
        .args([
            "-q",
            "-t",
            "ed25519",
            "-N",
            "",
            "-C",
            "kubenest-probe",
            "-f",
        ])
        .arg(&key)
        .status()
        .unwrap();
    assert!(keygen.success());
    let public = std::fs::read_to_string(key.with_extension("pub")).unwrap();
    for m in [m1, m2] {
        m.start_sshd(&public).await.expect("sshd");
    }
    for m in [m1, m2] {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let out = Command::new("ssh")
                .arg("-i")
                .arg(&key)
                .args([
                    "-o",
                    "BatchMode=yes",
                    "-o",
                    "StrictHostKeyChecking=no",
                    "-o",
                    "UserKnownHostsFile=/dev/null",
                    "-o",
                    "ConnectTimeout=3",
                    "-o",
                    "LogLevel=ERROR",
                ])
                .arg(format!("root@{}", m.ip()))
                // Its hostname, its own /etc, its own /var (containerd's socket there).
                .args([
                    "--",
                    "hostname && cat /etc/kubenest-probe && echo && \
                     test -S /var/lib/kubenest/containerd/containerd.sock && echo socket",
                ])
                .output()
                .unwrap();
            if out.status.success() {
                let name = m.name();
                assert_eq!(
                    String::from_utf8_lossy(&out.stdout).trim(),
                    format!("{name}\n{name}\nsocket")
                );
                break;
            }
            assert!(
                Instant::now() < deadline,
                "ssh {}: {}\n{}",
                m.ip(),
                String::from_utf8_lossy(&out.stderr),
                logs(&logs_dir)
            );
            tokio::time::sleep(Duration::from_millis(300)).await;
        }
    }

    println!(
        "machines made in {:.2} s (bridge, 2 namespaces, veths, routes)",
        made.as_secs_f64()
    );
    println!(
        "containerd up with 2 images imported, both machines: {:.2} s",
        containerd_time.as_secs_f64()
    );
    println!(
        "kubelets started to both nodes Ready: {:.2} s",
        ready_time.as_secs_f64()
    );
    println!(
        "server pods created to both Running: {:.2} s",
        running_time.as_secs_f64()
    );
    for m in [m1, m2] {
        let memory = m.resident_memory();
        let total: u64 = memory.iter().map(|(_, b)| b).sum();
        let parts: Vec<String> = memory
            .iter()
            .map(|(name, bytes)| format!("{name} {:.1}", mib(*bytes)))
            .collect();
        println!(
            "{} RSS outside pods: {:.1} MiB ({}); the machine's cgroup, pods included: {:.1} MiB",
            m.name(),
            mib(total),
            parts.join(", "),
            mib(m.cgroup_rss())
        );
        for program in ["containerd", "kubelet", "kube-proxy"] {
            assert!(
                memory.iter().any(|(name, _)| name == program),
                "{program} is not in {}'s cgroup: {memory:?}",
                m.name()
            );
        }
    }

    // The machines' CPU at rest (containerd, kubelet, kube-proxy, sshd and the idle pods), as
    // their cgroups count it; printed, not asserted.
    let cpu = |m: &Machine| {
        let path = format!("/sys/fs/cgroup/cpuacct{}/cpuacct.usage", m.cgroup());
        std::fs::read_to_string(path)
            .unwrap_or_default()
            .trim()
            .parse::<u64>()
            .unwrap_or(0)
    };
    let before: Vec<u64> = [m1, m2].iter().map(|m| cpu(m)).collect();
    let window = Duration::from_secs(5);
    tokio::time::sleep(window).await;
    for (m, start) in [m1, m2].iter().zip(before) {
        let used = cpu(m).saturating_sub(start) as f64 / 1e9;
        println!(
            "{} CPU at rest: {:.1} % of one core over {} s",
            m.name(),
            100.0 * used / window.as_secs_f64(),
            window.as_secs()
        );
    }

    let bridge = machines::BRIDGE;
    set.stop();
    drop(set);
    drop(plane);
    assert!(
        !Path::new(&format!("/sys/class/net/{bridge}")).exists(),
        "the bridge is left"
    );
    assert!(
        !Path::new(machines::STATE_DIR).exists(),
        "the machines' files are left"
    );
    for hierarchy in std::fs::read_dir("/sys/fs/cgroup").unwrap().flatten() {
        for i in [1, 2] {
            let cgroup = hierarchy
                .path()
                .join(format!("{}{i}", machines::CGROUP_PREFIX));
            assert!(!cgroup.exists(), "{} is left", cgroup.display());
        }
    }
}
