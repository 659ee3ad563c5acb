//! Probes of a real node's pod network, for tests that prove who may connect to whom: a
//! busybox web server and client in a namespace (the kit's testbox image), a command run in a
//! pod through the kubelet (`kubectl exec`), and one HTTP request whose connect is bounded at
//! 2 s, so a dropped connection is an answer, not a hang.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, PostParams};
use serde_json::json;

use crate::{Binaries, Cluster, Error};

/// The testbox image (busybox), as the node knows it once imported.
pub fn testbox_image() -> String {
    format!(
        "localhost/kubenest/testbox:{}",
        crate::pinned_version("TESTBOX_VERSION").unwrap_or("unknown")
    )
}

/// Builds (or finds cached) the testbox image and imports it into the node.
pub async fn import_testbox(cluster: &Cluster) -> Result<PathBuf, Error> {
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/../../tools/build-testbox.sh");
    let out = tokio::process::Command::new(script)
        .output()
        .await
        .map_err(|e| Error::io("run build-testbox.sh", e))?;
    if !out.status.success() {
        return Err(Error::ImageBuild(format!(
            "build-testbox.sh: {}",
            String::from_utf8_lossy(&out.stderr)
        )));
    }
    let archive = PathBuf::from(String::from_utf8_lossy(&out.stdout).trim());
    cluster.import_image(&archive).await?;
    Ok(archive)
}

/// A testbox pod running `sh -c script`, non-root with every capability dropped (it passes
/// Pod Security's `restricted`).
pub fn testbox_pod(name: &str, labels: serde_json::Value, script: &str) -> Result<Pod, Error> {
    serde_json::from_value(json!({
        "metadata": { "name": name, "labels": labels },
        "spec": {
            "restartPolicy": "Never",
            "containers": [{
                "name": "main",
                "image": testbox_image(),
                "imagePullPolicy": "Never",
                "command": ["/bin/sh", "-c", script],
                "securityContext": {
                    "allowPrivilegeEscalation": false,
                    "runAsNonRoot": true,
                    "runAsUser": 65534,
                    "capabilities": { "drop": ["ALL"] },
                    "seccompProfile": { "type": "RuntimeDefault" }
                }
            }]
        }
    }))
    .map_err(|e| Error::Process(format!("the testbox pod: {e}")))
}

/// `sh -c script` run in `pod` of `namespace` (kubectl exec, through the kubelet); its stdout,
/// trimmed.
pub async fn exec(
    cluster: &Cluster,
    namespace: &str,
    pod: &str,
    script: &str,
) -> Result<String, Error> {
    let out = tokio::process::Command::new(Binaries::locate()?.kubectl)
        .arg(format!(
            "--kubeconfig={}",
            cluster.kubeconfig_path().display()
        ))
        .args(["-n", namespace, "exec", pod, "--", "sh", "-c", script])
        .output()
        .await
        .map_err(|e| Error::io("run kubectl exec", e))?;
    if !out.status.success() {
        return Err(Error::Process(format!(
            "kubectl exec {pod} -- {script}: {:?}\n{}{}",
            out.status,
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )));
    }
    Ok(String::from_utf8_lossy(&out.stdout).trim().to_owned())
}

/// A shell line: one HTTP request to `ip`:`port` with a connect bounded at 2 s (busybox `nc -w
/// 2`); prints `open` when a web pod answered, `closed` otherwise (refused, dropped, timed out).
pub fn http_request(ip: &str, port: u16) -> String {
    format!(
        "if printf 'GET / HTTP/1.0\\r\\n\\r\\n' | nc -w 2 {ip} {port} | grep -q '^hello from'; \
         then echo open; else echo closed; fi"
    )
}

/// Whether the web pod at `ip` answers `client` of `namespace` on 8080.
pub async fn reaches(
    cluster: &Cluster,
    namespace: &str,
    client: &str,
    ip: &str,
) -> Result<bool, Error> {
    Ok(exec(cluster, namespace, client, &http_request(ip, 8080)).await? == "open")
}

/// Creates a web server (`web`, busybox httpd on 8080, answering `hello from web`) and a client
/// (`client`) in `namespace`; returns their pod IPs once both run.
pub async fn web_and_client(cluster: &Cluster, namespace: &str) -> Result<(String, String), Error> {
    let pods: Api<Pod> = Api::namespaced(cluster.client().await?, namespace);
    let web = "mkdir -p /tmp/www && echo 'hello from web' > /tmp/www/index.html && \
               exec httpd -f -p 8080 -h /tmp/www";
    for (name, script) in [("web", web), ("client", "exec sleep 3600")] {
        pods.create(
            &PostParams::default(),
            &testbox_pod(name, json!({ "app": name }), script)?,
        )
        .await?;
    }
    let deadline = Instant::now() + Duration::from_secs(180);
    let mut ips = Vec::new();
    for name in ["web", "client"] {
        loop {
            let status = pods.get(name).await?.status;
            let ip = status
                .filter(|s| s.phase.as_deref() == Some("Running"))
                .and_then(|s| s.pod_ip);
            if let Some(ip) = ip {
                ips.push(ip);
                break;
            }
            if Instant::now() > deadline {
                return Err(Error::Process(format!(
                    "pod {namespace}/{name} not running\n{}",
                    cluster.log_tails(20)
                )));
            }
            tokio::time::sleep(Duration::from_millis(300)).await;
        }
    }
    let client = ips.pop().unwrap_or_default();
    let web = ips.pop().unwrap_or_default();
    Ok((web, client))
}

/// Polls `probe` (each try bounded by its own connect timeout) until it holds, for at most a
/// minute: a policy's controller applies a change within moments, not at a known instant.
pub async fn until<F>(what: &str, probe: impl Fn() -> F) -> Result<(), Error>
where
    F: std::future::Future<Output = Result<bool, Error>>,
{
    let deadline = Instant::now() + Duration::from_secs(60);
    while !probe().await? {
        if Instant::now() > deadline {
            return Err(Error::Process(format!("{what}: not after 60 s")));
        }
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
    Ok(())
}
