//! The real node: pods from locally built images really run, their logs come through the API
//! (`pods/log`), a pod reaches another through its Service's DNS name (CoreDNS, kube-proxy, the
//! CNI bridge), and NetworkPolicies are enforced (kube-network-policies). Needs root; the image
//! is tools/build-testbox.sh's busybox.

use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{Pod, Service};
use k8s_openapi::api::networking::v1::NetworkPolicy;
use kube::Api;
use kube::api::{LogParams, PostParams};
use kubenest_testkit::{Cluster, probes, shared_real_node};
use serde_json::json;

/// Waits until the pod has ended, then returns its phase and its log read through the API.
async fn finished(pods: &Api<Pod>, name: &str, cluster: &Cluster) -> (String, String) {
    let deadline = Instant::now() + Duration::from_secs(180);
    loop {
        let phase = pods
            .get(name)
            .await
            .expect("get pod")
            .status
            .and_then(|s| s.phase)
            .unwrap_or_default();
        if phase == "Succeeded" || phase == "Failed" {
            let log = pods
                .logs(name, &LogParams::default())
                .await
                .expect("pods/log");
            return (phase, log);
        }
        assert!(
            Instant::now() < deadline,
            "pod {name} still {phase:?}\n{}",
            cluster.log_tails(20)
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_pod_from_a_local_image_runs_and_its_log_is_read_through_the_api() {
    let start = Instant::now();
    let cluster = shared_real_node().await.expect("real node");
    // A figure for the report, not a pass/fail criterion.
    eprintln!(
        "real node ready after {:.1}s",
        start.elapsed().as_secs_f64()
    );
    probes::import_testbox(cluster).await.expect("testbox");
    let ns = cluster.test_namespace("hello").await.expect("namespace");
    let pods: Api<Pod> = Api::namespaced(ns.client(), ns.name());
    let script = "echo \"hello from a real container in $(cat /etc/hostname)\"";
    pods.create(
        &PostParams::default(),
        &probes::testbox_pod("hello", json!({}), script).expect("pod"),
    )
    .await
    .expect("create pod");
    let (phase, log) = finished(&pods, "hello", cluster).await;
    assert_eq!(phase, "Succeeded", "log: {log}");
    assert_eq!(log.trim(), "hello from a real container in hello");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_pod_reaches_another_through_its_service_name() {
    let cluster = shared_real_node().await.expect("real node");
    probes::import_testbox(cluster).await.expect("testbox");
    let ns = cluster.test_namespace("svc").await.expect("namespace");
    let client = ns.client();
    let namespace = ns.name();
    let deployment = json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": { "name": "web" },
        "spec": {
            "replicas": 1,
            "selector": { "matchLabels": { "app": "web" } },
            "template": {
                "metadata": { "labels": { "app": "web" } },
                "spec": { "containers": [{
                    "name": "web", "image": probes::testbox_image(), "imagePullPolicy": "Never",
                    "command": ["/bin/sh", "-c",
                        "mkdir -p /tmp/www && echo \"hello from $(hostname)\" > /tmp/www/index.html && exec httpd -f -p 8080 -h /tmp/www"],
                    "ports": [{ "containerPort": 8080 }],
                    "readinessProbe": { "tcpSocket": { "port": 8080 }, "periodSeconds": 1 }
                }]}
            }
        }
    });
    let service = json!({
        "apiVersion": "v1", "kind": "Service",
        "metadata": { "name": "web" },
        "spec": { "selector": { "app": "web" }, "ports": [{ "port": 80, "targetPort": 8080 }] }
    });
    for object in [deployment, service] {
        let object: kube::api::DynamicObject = serde_json::from_value(object).expect("object");
        let (gvk, plural) = if object.types.as_ref().is_some_and(|t| t.kind == "Service") {
            (
                kube::api::GroupVersionKind::gvk("", "v1", "Service"),
                "services",
            )
        } else {
            (
                kube::api::GroupVersionKind::gvk("apps", "v1", "Deployment"),
                "deployments",
            )
        };
        let resource = kube::api::ApiResource::from_gvk_with_plural(&gvk, plural);
        Api::<kube::api::DynamicObject>::namespaced_with(client.clone(), namespace, &resource)
            .create(&PostParams::default(), &object)
            .await
            .expect("create");
    }
    // Short name (search domains) and the fully qualified name, retried until the endpoint is
    // ready; the log shows each answer. busybox's nslookup has its own resolver (a static
    // glibc's getaddrinfo cannot load NSS modules, so busybox's wget crashes); nc then sends
    // an HTTP request to the Service's address.
    let fqdn = format!("web.{namespace}.svc.cluster.local");
    let script = format!(
        "ip() {{ nslookup \"$1\" 2>/dev/null | awk '/^Address: / {{ a = $2 }} END {{ print a }}'; }}; \
         for i in $(seq 120); do \
           s=$(ip web) && f=$(ip {fqdn}) && [ -n \"$s\" ] && [ \"$s\" = \"$f\" ] && \
           a=$(printf 'GET / HTTP/1.0\\r\\n\\r\\n' | nc -w 2 \"$s\" 80 | tail -n 1) && [ -n \"$a\" ] && \
           echo \"short: $s\" && echo \"answer: $a\" && exit 0; sleep 1; \
         done; nslookup web; nslookup {fqdn}; exit 1"
    );
    let pods: Api<Pod> = Api::namespaced(client, namespace);
    pods.create(
        &PostParams::default(),
        &probes::testbox_pod("client", json!({}), &script).expect("pod"),
    )
    .await
    .expect("create client");
    let (phase, log) = finished(&pods, "client", cluster).await;
    assert_eq!(phase, "Succeeded", "log: {log}\n{}", cluster.log_tails(20));
    assert!(log.contains("short: 10.96."), "log: {log}");
    assert!(log.contains("answer: hello from web-"), "log: {log}");
}

/// Whether `web` at `ip` answers a process on the host itself (this test's, root) run as `uid`.
async fn host_reaches(uid: u32, ip: &str) -> bool {
    let out = tokio::process::Command::new("setpriv")
        .args([
            &format!("--reuid={uid}"),
            &format!("--regid={uid}"),
            "--clear-groups",
            "--",
            "sh",
            "-c",
            &probes::http_request(ip, 8080).replace("nc -w", "busybox nc -w"),
        ])
        .output()
        .await
        .expect("run setpriv");
    String::from_utf8_lossy(&out.stdout).trim() == "open"
}

/// The pod IPs kube-network-policies polices (its nftables set), as `nft` lists them.
async fn policed_ips() -> String {
    let table = kubenest_testkit::node::NETWORK_POLICY_TABLE;
    let out = tokio::process::Command::new("nft")
        .args(["list", "set", "inet", table, "podips-v4"])
        .output()
        .await
        .expect("run nft");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[tokio::test(flavor = "multi_thread")]
async fn a_network_policy_isolates_a_namespace_until_it_admits_another() {
    let cluster = shared_real_node().await.expect("real node");
    probes::import_testbox(cluster).await.expect("testbox");
    let a = cluster.test_namespace("np-a").await.expect("namespace a");
    let b = cluster.test_namespace("np-b").await.expect("namespace b");
    let (a_web, _) = probes::web_and_client(cluster, a.name())
        .await
        .expect("web and client");
    let (b_web, b_client) = probes::web_and_client(cluster, b.name())
        .await
        .expect("web and client");
    let service = json!({
        "apiVersion": "v1", "kind": "Service", "metadata": { "name": "web" },
        "spec": { "selector": { "app": "web" }, "ports": [{ "port": 80, "targetPort": 8080 }] }
    });
    Api::<Service>::namespaced(b.client(), b.name())
        .create(
            &PostParams::default(),
            &serde_json::from_value(service).expect("service"),
        )
        .await
        .expect("create service");

    // Open before the policy: the server is up, and what follows is the policy's doing.
    probes::until("A reaches B before any policy", || {
        probes::reaches(cluster, a.name(), "client", &b_web)
    })
    .await
    .expect("A reaches B before any policy");

    // Every pod of B: ingress from B only; egress to B and to DNS (53, UDP and TCP) anywhere.
    let policy = |extra_ingress: Option<serde_json::Value>| {
        let mut from = vec![json!({ "podSelector": {} })];
        from.extend(extra_ingress);
        json!({
            "apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy",
            "metadata": { "name": "isolate" },
            "spec": {
                "podSelector": {},
                "policyTypes": ["Ingress", "Egress"],
                "ingress": [{ "from": from }],
                "egress": [
                    { "to": [{ "podSelector": {} }] },
                    { "ports": [{ "protocol": "UDP", "port": 53 }, { "protocol": "TCP", "port": 53 }] }
                ]
            }
        })
    };
    let policies: Api<NetworkPolicy> = Api::namespaced(b.client(), b.name());
    let apply = |object: serde_json::Value| {
        let policies = policies.clone();
        async move {
            policies
                .patch(
                    "isolate",
                    &kube::api::PatchParams::apply("real-node-test").force(),
                    &kube::api::Patch::Apply(object),
                )
                .await
                .expect("apply policy")
        }
    };
    apply(policy(None)).await;
    // Enforced once B's pods are in the controller's set; each probe below is then one try.
    probes::until("B's pods policed", || async {
        let set = policed_ips().await;
        Ok(set.contains(&b_web) && set.contains(&b_client))
    })
    .await
    .expect("B's pods policed");

    assert!(
        !probes::reaches(cluster, a.name(), "client", &b_web)
            .await
            .expect("probe"),
        "A reached isolated B"
    );
    assert!(
        probes::reaches(cluster, b.name(), "client", &b_web)
            .await
            .expect("probe"),
        "B did not reach itself"
    );
    assert!(
        !probes::reaches(cluster, b.name(), "client", &a_web)
            .await
            .expect("probe"),
        "B's egress reached A"
    );
    // DNS (CoreDNS, a host process on the gateway) by the Service's name, then the Service.
    let resolved = probes::exec(
        cluster,
        b.name(),
        "client",
        "nslookup web 2>/dev/null | awk '/^Address: / { a = $2 } END { print a }'",
    )
    .await
    .expect("exec");
    assert!(
        resolved.starts_with("10.96."),
        "B resolved web as {resolved:?}"
    );
    assert_eq!(
        probes::exec(
            cluster,
            b.name(),
            "client",
            &probes::http_request(&resolved, 80)
        )
        .await
        .expect("exec"),
        "open",
        "B did not reach its own Service"
    );
    // The host's own sockets: root's pass (the kubelet's probes, Traefik, this test); others'
    // are policed like any peer outside the namespace.
    assert!(
        host_reaches(0, &b_web).await,
        "root on the host was refused"
    );
    assert!(
        !host_reaches(65534, &b_web).await,
        "a non-root host process reached isolated B"
    );
    // B's egress to the host itself is not policed (it never reaches `postrouting`): B still
    // reaches the API server on the gateway, though its policy allows only B and DNS.
    let api = cluster.url().trim_start_matches("https://");
    let (host, port) = api.rsplit_once(':').expect("host:port");
    let script =
        format!("printf 'GET /healthz HTTP/1.0\\r\\n\\r\\n' | nc -w 2 {host} {port} | head -n 1");
    let answer = probes::exec(cluster, b.name(), "client", &script)
        .await
        .expect("exec");
    assert!(answer.starts_with("HTTP/"), "B to the host: {answer:?}");

    let admit_a = json!({ "namespaceSelector": { "matchLabels": {
        "kubernetes.io/metadata.name": a.name() } } });
    apply(policy(Some(admit_a))).await;
    probes::until("A reaches B once admitted", || {
        probes::reaches(cluster, a.name(), "client", &b_web)
    })
    .await
    .expect("A reaches B once admitted");
    assert!(
        !probes::reaches(cluster, b.name(), "client", &a_web)
            .await
            .expect("probe"),
        "B's egress reached A"
    );
}
