//! The real node is harmless on a machine that runs another cluster: stopping it removes what it
//! made (the nftables tables of kube-proxy and kube-network-policies, its CNI network's iptables
//! rules, the bridge) and nothing else. A foreign cluster's rules planted before the node starts
//! — a `KUBE-*` chain and the rule that jumps to it, a CNI rule of another network, an nftables
//! table — are all there after the node has run a pod behind a Service and stopped. Needs root;
//! its own node, not the shared one, since the cleanup runs when the node stops.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // a test fails by panicking

use std::process::Command;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{Pod, Service};
use kube::Api;
use kube::api::PostParams;
use kubenest_testkit::node::{BRIDGE, NETWORK_POLICY_TABLE};
use kubenest_testkit::{Environment, pinned_version};
use serde_json::json;

/// Runs `program args`; its stdout when it succeeds, `None` when it fails.
fn run(program: &str, args: &[&str]) -> Option<String> {
    let out = Command::new(program).args(args).output().ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).into_owned())
}

/// A foreign cluster's rules, as a laptop's k3s or kubeadm would leave them; removed on drop
/// (also when the test fails).
struct Foreign;

/// `(table, rule)` of each foreign iptables rule, in the order they are added.
const FOREIGN_RULES: [(&str, &[&str]); 4] = [
    (
        "filter",
        &["KUBE-FOREIGN-TEST", "-s", "192.0.2.1/32", "-j", "RETURN"],
    ),
    (
        "filter",
        &["INPUT", "-s", "192.0.2.1/32", "-j", "KUBE-FOREIGN-TEST"],
    ),
    (
        "nat",
        &[
            "CNI-FOREIGN-TEST",
            "-d",
            "192.0.2.0/24",
            "-m",
            "comment",
            "--comment",
            "name: \"other\" id: \"c0ffee\"",
            "-j",
            "ACCEPT",
        ],
    ),
    (
        "nat",
        &[
            "POSTROUTING",
            "-s",
            "192.0.2.2/32",
            "-m",
            "comment",
            "--comment",
            "name: \"other\" id: \"c0ffee\"",
            "-j",
            "CNI-FOREIGN-TEST",
        ],
    ),
];
const FOREIGN_CHAINS: [(&str, &str); 2] =
    [("filter", "KUBE-FOREIGN-TEST"), ("nat", "CNI-FOREIGN-TEST")];
const FOREIGN_TABLE: &str = "kubenest-foreign-test";

impl Foreign {
    fn plant() -> Self {
        let foreign = Foreign;
        foreign.remove();
        for (table, chain) in FOREIGN_CHAINS {
            run("iptables", &["-t", table, "-N", chain]).expect("iptables -N");
        }
        for (table, rule) in FOREIGN_RULES {
            let args = [&["-t", table, "-A"], rule].concat();
            run("iptables", &args).expect("iptables -A");
        }
        run("nft", &["add", "table", "inet", FOREIGN_TABLE]).expect("nft add table");
        foreign
    }

    /// Which of the foreign rules, chains and table are missing.
    fn missing(&self) -> Vec<String> {
        let mut missing: Vec<String> = FOREIGN_RULES
            .iter()
            .filter(|(table, rule)| {
                run("iptables", &[&["-t", table, "-C"], *rule].concat()).is_none()
            })
            .map(|(table, rule)| format!("{table}: {}", rule.join(" ")))
            .collect();
        if run("nft", &["list", "table", "inet", FOREIGN_TABLE]).is_none() {
            missing.push(format!("nftables table inet {FOREIGN_TABLE}"));
        }
        missing
    }

    fn remove(&self) {
        for (table, rule) in FOREIGN_RULES.iter().rev() {
            run("iptables", &[&["-t", table, "-D"], *rule].concat());
        }
        for (table, chain) in FOREIGN_CHAINS {
            run("iptables", &["-t", table, "-X", chain]);
        }
        run("nft", &["delete", "table", "inet", FOREIGN_TABLE]);
    }
}

impl Drop for Foreign {
    fn drop(&mut self) {
        self.remove();
    }
}

/// What iptables holds of the node's own CNI network (rules tagged with its name).
fn cni_rules_of_the_node() -> Vec<String> {
    run("iptables-save", &[])
        .unwrap_or_default()
        .lines()
        .filter(|line| line.contains(r#"name: \"kubenest\""#))
        .map(str::to_owned)
        .collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn stopping_the_node_removes_its_own_rules_and_leaves_a_foreign_clusters() {
    let foreign = Foreign::plant();
    let env = Environment::builder()
        .real_node("edge")
        .start()
        .await
        .expect("real node");
    let cluster = env.cluster("edge").expect("edge");
    // The node imports its storage helper's image, the kit's busybox, at start.
    let image = format!(
        "localhost/kubenest/testbox:{}",
        pinned_version("TESTBOX_VERSION").expect("testbox version")
    );
    let ns = cluster.test_namespace("clean").await.expect("namespace");
    let pods: Api<Pod> = Api::namespaced(ns.client(), ns.name());
    let pod: Pod = serde_json::from_value(json!({
        "metadata": {"name": "web", "labels": {"app": "web"}},
        "spec": {"containers": [{
            "name": "web", "image": image, "imagePullPolicy": "Never",
            "command": ["/bin/sh", "-c", "exec sleep 3600"],
        }]},
    }))
    .expect("pod");
    pods.create(&PostParams::default(), &pod)
        .await
        .expect("create pod");
    let service: Service = serde_json::from_value(json!({
        "metadata": {"name": "web"},
        "spec": {"selector": {"app": "web"}, "ports": [{"port": 80}]},
    }))
    .expect("service");
    let service = Api::<Service>::namespaced(ns.client(), ns.name())
        .create(&PostParams::default(), &service)
        .await
        .expect("create service");
    let cluster_ip = service
        .spec
        .and_then(|spec| spec.cluster_ip)
        .expect("cluster IP");

    // While the pod runs behind its Service, the node's own rules are on the host.
    let deadline = Instant::now() + Duration::from_secs(180);
    loop {
        let running = pods
            .get("web")
            .await
            .ok()
            .and_then(|p| p.status?.phase)
            .is_some_and(|phase| phase == "Running");
        let proxied = run("nft", &["list", "table", "ip", "kube-proxy"])
            .is_some_and(|table| table.contains(&cluster_ip));
        if running && proxied && !cni_rules_of_the_node().is_empty() {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the node's rules never appeared (running {running}, kube-proxy has the Service \
             {proxied}, CNI rules {:?})\n{}",
            cni_rules_of_the_node(),
            cluster.log_tails(20)
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    assert_eq!(
        foreign.missing(),
        Vec::<String>::new(),
        "the running node removed foreign rules"
    );
    assert!(
        run("nft", &["list", "table", "inet", NETWORK_POLICY_TABLE]).is_some(),
        "kube-network-policies' table is missing while the node runs"
    );

    cluster.stop();
    assert_eq!(
        foreign.missing(),
        Vec::<String>::new(),
        "the node's cleanup removed foreign rules"
    );
    assert_eq!(
        cni_rules_of_the_node(),
        Vec::<String>::new(),
        "the node's CNI rules outlived it"
    );
    for family in ["ip", "ip6"] {
        assert!(
            run("nft", &["list", "table", family, "kube-proxy"]).is_none(),
            "kube-proxy's {family} table outlived the node"
        );
    }
    assert!(
        run("nft", &["list", "table", "inet", NETWORK_POLICY_TABLE]).is_none(),
        "kube-network-policies' table outlived the node"
    );
    assert!(
        run("ip", &["link", "show", BRIDGE]).is_none(),
        "the bridge outlived the node"
    );
}
