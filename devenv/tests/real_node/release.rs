//! A release to a registry, and what an installer does with it, for `release_plane.rs`:
//! `tools/release.sh` (what `make release` runs) pushes the images and both charts to a real OCI
//! registry (the distribution registry, TLS from a private CA, one account, its password given
//! on standard input); a user's machine that trusts the registry's CA and ran `helm registry
//! login` runs the registration's printed `helm install` exactly as printed, by a shell, in an
//! empty folder (nothing of this repository within reach). The node trusts the CA too and pulls
//! with node-wide credentials: the agent image comes from the registry, under the name the
//! published chart gives it, and `helm test` asks its readiness from a pod.

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::Duration;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::Namespace;
use kube::api::{Api, PostParams};

use kubenest_testkit::{Cluster, Registry, ServerCa};
use serde_json::json;

/// Real pulls, starts and helm installs take longer than kwok's instant pods.
pub const REAL: Duration = Duration::from_secs(240);

fn root() -> PathBuf {
    PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/.."))
}

/// A user's machine: helm on the PATH with homes of its own, the registry's CA trusted (Go
/// reads SSL_CERT_FILE for its roots), a kubeconfig, and the folder commands run in.
pub struct Workstation {
    pub home: tempfile::TempDir,
    pub helm: PathBuf,
    pub ca: PathBuf,
    pub kubeconfig: PathBuf,
}

impl Workstation {
    fn command(&self, program: &Path) -> Command {
        let home = self.home.path();
        let path = format!(
            "{}:{}",
            self.helm.parent().unwrap().display(),
            std::env::var("PATH").unwrap_or_default()
        );
        let mut command = Command::new(program);
        command
            .current_dir(home)
            .env("PATH", path)
            .env("HOME", home)
            .env("KUBECONFIG", &self.kubeconfig)
            .env("SSL_CERT_FILE", &self.ca)
            .env("HELM_CACHE_HOME", home.join("cache"))
            .env("HELM_CONFIG_HOME", home.join("config"))
            .env("HELM_DATA_HOME", home.join("data"));
        command
    }

    /// `helm ARGS`, with `stdin` written to its standard input.
    pub fn helm(&self, args: &[&str], stdin: &str) -> Output {
        let mut child = self
            .command(&self.helm)
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        child
            .stdin
            .take()
            .unwrap()
            .write_all(stdin.as_bytes())
            .unwrap();
        child.wait_with_output().unwrap()
    }

    /// `command` as a POSIX shell runs it.
    pub fn shell(&self, command: &str) -> Output {
        self.command(Path::new("sh"))
            .arg("-c")
            .arg(command)
            .output()
            .unwrap()
    }
}

pub fn assert_ok(what: &str, out: &Output) -> String {
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "{what}: {stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
}

/// `tools/release.sh` to `registry`, as `make release` runs it with an account and a CA: the
/// password on standard input, the archives `Images::build` left.
pub fn release(registry: &Registry, ca: &Path, helm: &Path, names: &[&str]) {
    let mut child = Command::new("bash")
        .arg(root().join("tools/release.sh"))
        .arg(registry.address())
        .args(names)
        .env("KUBENEST_REGISTRY_USER", registry.username())
        .env("KUBENEST_REGISTRY_PASSWORD_FILE", "-")
        .env("KUBENEST_REGISTRY_CA", ca)
        .env("KUBENEST_RELEASE_PREBUILT", "1")
        .env("KUBENEST_HELM", helm)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    writeln!(stdin, "{}", registry.password()).unwrap();
    drop(stdin);
    let out = child.wait_with_output().unwrap();
    let said = assert_ok("tools/release.sh", &out);
    eprintln!("release: {said}{}", String::from_utf8_lossy(&out.stderr));
}

/// A registry on the address `edge`'s pods reach, with a CA of its own under `dir`; the node
/// trusts the CA and its kubelet pulls with the registry's account, before any pull.
pub async fn node_registry(edge: &Cluster, dir: &Path) -> (ServerCa, Registry) {
    let host = edge.pod_reachable_host().unwrap();
    let ca = ServerCa::generate(&std::path::absolute(dir.join("ca")).unwrap()).unwrap();
    let registry = Registry::start(host, &ca).await.unwrap();
    edge.trust_registry(registry.address(), &ca.path).unwrap();
    edge.pull_credentials(&registry.docker_config_json())
        .unwrap();
    (ca, registry)
}

/// Waits until the REST API reports cluster `cluster_id` connected.
pub async fn wait_connected(
    admin: &mut kubenest_cli::api::Client,
    cluster_id: &str,
    edge: &Cluster,
) {
    let mut state = String::new();
    let connected = tokio::time::timeout(REAL, async {
        loop {
            let cluster = admin
                .get(&format!("/api/v1/clusters/{cluster_id}"))
                .await
                .unwrap();
            state = cluster["state"].as_str().unwrap_or_default().to_owned();
            if state == "connected" {
                break;
            }
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
    })
    .await;
    assert!(
        connected.is_ok(),
        "the cluster is {state:?}, not connected:\n{}",
        edge.log_tails(30)
    );
}

/// The agent's namespace, enforcing Pod Security `restricted`: its pod and the test's pass.
pub async fn restricted_namespace(edge: &Cluster, name: &str) {
    let namespaces: Api<Namespace> = Api::all(edge.client().await.unwrap());
    let restricted: Namespace = serde_json::from_value(json!({"metadata": {
        "name": name,
        "labels": {"pod-security.kubernetes.io/enforce": "restricted"}}}))
    .unwrap();
    namespaces
        .create(&PostParams::default(), &restricted)
        .await
        .unwrap();
}

/// The connected agent is the released one: the image (and builder image) the published chart
/// names, pulled from `registry`; and `helm test` asks its readiness from a pod, through its
/// Service, past the chart's NetworkPolicy.
pub async fn agent_is_the_released_one(
    edge: &Cluster,
    registry: &Registry,
    version: &str,
    user: &Workstation,
) {
    let deployments: Api<Deployment> =
        Api::namespaced(edge.client().await.unwrap(), "kubenest-system");
    let agent = deployments.get("kubenest-agent").await.unwrap();
    let container = &agent.spec.unwrap().template.spec.unwrap().containers[0];
    assert_eq!(
        container.image.as_deref(),
        Some(format!("{}/kubenest/agent:{version}", registry.address()).as_str())
    );
    let builder = container
        .env
        .iter()
        .flatten()
        .find(|e| e.name == "KUBENEST_BUILDER_IMAGE")
        .and_then(|e| e.value.clone());
    assert_eq!(
        builder,
        Some(format!("{}/kubenest/builder:{version}", registry.address()))
    );

    // `helm test`: a pod of the agent's image asks its /readyz through its Service, past
    // the chart's NetworkPolicy.
    let tested = user.helm(
        &[
            "test",
            "kubenest-agent",
            "--namespace",
            "kubenest-system",
            "--logs",
            "--timeout",
            "180s",
        ],
        "",
    );
    let said = assert_ok("helm test", &tested);
    assert!(
        said.lines()
            .any(|l| l.starts_with("agent: HTTP/1.") && l.contains(" 200")),
        "{said}"
    );
}
