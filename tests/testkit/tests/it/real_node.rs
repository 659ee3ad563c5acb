//! The real node: pods from locally built images really run, their logs come through the API
//! (`pods/log`), and a pod reaches another through its Service's DNS name (CoreDNS, kube-proxy,
//! the CNI bridge). Needs root; the image is tools/build-testbox.sh's busybox.

use std::path::PathBuf;
use std::process::Command;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Pod;
use kube::Api;
use kube::api::{LogParams, PostParams};
use kubenest_testkit::{Cluster, shared_real_node};
use serde_json::json;

const IMAGE: &str = "localhost/kubenest/testbox:1.1";

/// Builds (or finds cached) the test image and imports it into the node.
async fn testbox(cluster: &Cluster) -> PathBuf {
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/../../tools/build-testbox.sh");
    let out = Command::new(script).output().expect("run build-testbox.sh");
    assert!(
        out.status.success(),
        "build-testbox.sh: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let archive = PathBuf::from(String::from_utf8_lossy(&out.stdout).trim());
    cluster.import_image(&archive).await.expect("import image");
    archive
}

fn pod(name: &str, labels: serde_json::Value, script: &str) -> Pod {
    serde_json::from_value(json!({
        "metadata": { "name": name, "labels": labels },
        "spec": {
            "restartPolicy": "Never",
            "containers": [{
                "name": "main",
                "image": IMAGE,
                "imagePullPolicy": "Never",
                "command": ["/bin/sh", "-c", script],
                "securityContext": {
                    "allowPrivilegeEscalation": false,
                    "runAsNonRoot": true,
                    "capabilities": { "drop": ["ALL"] },
                    "seccompProfile": { "type": "RuntimeDefault" }
                }
            }]
        }
    }))
    .expect("pod manifest")
}

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
    testbox(cluster).await;
    let ns = cluster.test_namespace("hello").await.expect("namespace");
    let pods: Api<Pod> = Api::namespaced(ns.client(), ns.name());
    let script = "echo \"hello from a real container in $(cat /etc/hostname)\"";
    pods.create(&PostParams::default(), &pod("hello", json!({}), script))
        .await
        .expect("create pod");
    let (phase, log) = finished(&pods, "hello", cluster).await;
    assert_eq!(phase, "Succeeded", "log: {log}");
    assert_eq!(log.trim(), "hello from a real container in hello");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_pod_reaches_another_through_its_service_name() {
    let cluster = shared_real_node().await.expect("real node");
    testbox(cluster).await;
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
                    "name": "web", "image": IMAGE, "imagePullPolicy": "Never",
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
    pods.create(&PostParams::default(), &pod("client", json!({}), &script))
        .await
        .expect("create client");
    let (phase, log) = finished(&pods, "client", cluster).await;
    assert_eq!(phase, "Succeeded", "log: {log}\n{}", cluster.log_tails(20));
    assert!(log.contains("short: 10.96."), "log: {log}");
    assert!(log.contains("answer: hello from web-"), "log: {log}");
}
