//! The demo App, for a cluster with a real node: the demo web app (`images/demo`) beside a
//! Postgres and a Redis addon from the catalog, their `dsn` and `url` exports wired into its
//! environment on the cluster. It answers HTTP with what it found (both backends connected, a
//! row it wrote and read back). The tour runs it on `make dev`'s real-node cluster;
//! `devenv/tests/install.rs` runs it on the agent that the chart installed.

use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, DeleteParams, LogParams, PostParams};
use serde_json::{Value, json};

/// The demo App `name` in project `project_id` running `image`, reporting `version`.
pub fn app(project_id: &str, name: &str, image: &str, version: &str, deadline: Duration) -> Value {
    json!({
        "project_id": project_id, "name": name,
        "progress_deadline_seconds": deadline.as_secs(),
        "components": [
            {"name": "db", "type": "addon", "addon_spec": {"definition": "postgres"}},
            {"name": "cache", "type": "addon", "addon_spec": {"definition": "redis"}},
            {"name": "web", "type": "workload", "workload_spec": {
                "image": image, "replicas": 1, "port": 8080,
                "env": [
                    {"name": "DATABASE_URL", "export_ref": {"component": "db", "export": "dsn"}},
                    {"name": "REDIS_URL", "export_ref": {"component": "cache", "export": "url"}},
                    {"name": "DEMO_VERSION", "value": version}
                ]}}
        ]
    })
}

/// The demo's JSON answer to a request from inside the cluster network: a pod in `default`
/// running the demo image's `kubenest-demo get` asks `url` (the App's Service by its DNS
/// name), again until the answer reports `version` or `within` has passed.
pub async fn ask(
    client: &kube::Client,
    image: &str,
    url: &str,
    version: &str,
    within: Duration,
) -> anyhow::Result<Value> {
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    let deadline = Instant::now() + within;
    let mut last = String::new();
    let mut attempt = 0u32;
    loop {
        attempt += 1;
        anyhow::ensure!(
            Instant::now() < deadline,
            "the demo never answered version {version} at {url} (last: {last})"
        );
        let suffix = &uuid::Uuid::new_v4().simple().to_string()[..6];
        let name = format!("ask-demo-{attempt}-{suffix}");
        let pod: Pod = serde_json::from_value(json!({
            "metadata": {"name": name},
            "spec": {
                "restartPolicy": "Never",
                "securityContext": {"runAsNonRoot": true, "seccompProfile": {"type": "RuntimeDefault"}},
                "containers": [{
                    "name": "ask", "image": image,
                    "imagePullPolicy": "Never",
                    "args": ["get", url],
                    "securityContext": {"allowPrivilegeEscalation": false,
                                        "capabilities": {"drop": ["ALL"]}}
                }]
            }
        }))?;
        pods.create(&PostParams::default(), &pod).await?;
        let phase = loop {
            let phase = pods
                .get(&name)
                .await?
                .status
                .and_then(|s| s.phase)
                .unwrap_or_default();
            if phase == "Succeeded" || phase == "Failed" || Instant::now() >= deadline {
                break phase;
            }
            tokio::time::sleep(Duration::from_millis(500)).await;
        };
        let log = pods
            .logs(&name, &LogParams::default())
            .await
            .unwrap_or_default();
        let _ = pods.delete(&name, &DeleteParams::background()).await;
        let answer: Value = serde_json::from_str(log.trim()).unwrap_or(Value::Null);
        if phase == "Succeeded" && answer["version"] == version {
            return Ok(answer);
        }
        last = format!("{phase}: {}", log.trim());
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
}
