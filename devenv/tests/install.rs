//! The agent installed as a user installs it, on a real node: the release programs run as
//! processes (hub replicas, controllers, API server) beside a workload cluster `edge` with a
//! real kubelet and containerd; the cluster is registered through the REST API and the
//! `helm install` command the registration answers is run exactly as printed, by a shell, with
//! the chart from this repository and the images `make images` builds loaded on the node. The
//! agent pod dials the hub (on the host address pods reach), the Cluster turns `connected`, and
//! an App deployed through REST runs in a real container whose HTTP answer is read back.
//!
//! Needs root (the real node); the images are built (or found cached) by tools/build-images.sh.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::process::Command;
use std::time::Duration;

use common::{eventually, run, simple_app};
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, ListParams};
use kubenest_devenv::system::{Options, System};
use kubenest_testkit::{Environment, Images};
use serde_json::json;

/// Real pulls, starts and helm installs take longer than kwok's instant pods.
const REAL: Duration = Duration::from_secs(240);

#[test]
fn the_printed_helm_install_connects_an_agent_pod_and_an_app_really_runs() {
    run(async {
        let images = Images::build(&["agent", "demo"]).await.unwrap();
        let env = Environment::builder()
            .management("mgmt")
            .real_node("edge")
            .postgres()
            .start()
            .await
            .unwrap();
        let edge = env.cluster("edge").unwrap();
        for name in ["agent", "demo"] {
            edge.import_image(images.archive(name).unwrap())
                .await
                .unwrap();
        }
        let database = env
            .postgres()
            .unwrap()
            .fresh_database("install")
            .await
            .unwrap();
        let dir = tempfile::tempdir().unwrap();
        let options = Options {
            hubs: 1,
            controllers: 1,
            heartbeat_window_seconds: 60,
            public_hub_host: edge.pod_reachable_host(),
            ..Options::default()
        };
        let progress = |line: &str| eprintln!("system: {line}");
        let system = System::start(&env, &database.url, dir.path(), options, &progress)
            .await
            .unwrap();
        system.ensure_org().await.unwrap();
        let mut admin = system.admin().await.unwrap();
        let org = system.options().org.clone();
        let registration = admin
            .post(
                &format!("/api/v1/orgs/{org}/clusters"),
                &json!({"name": "edge"}),
            )
            .await
            .unwrap();
        let cluster_id = registration["cluster_id"].as_str().unwrap().to_owned();
        let command = registration["helm_install_command"].as_str().unwrap();

        // Exactly as printed, by a shell in the repository (the chart path is relative to it),
        // with helm on the PATH and the edge cluster as the current kubeconfig.
        let helm = kubenest_testkit::Binaries::locate().unwrap().helm;
        let path = format!(
            "{}:{}",
            helm.parent().unwrap().display(),
            std::env::var("PATH").unwrap_or_default()
        );
        let installed = Command::new("sh")
            .arg("-c")
            .arg(command)
            .current_dir(concat!(env!("CARGO_MANIFEST_DIR"), "/.."))
            .env("PATH", path)
            .env("KUBECONFIG", edge.kubeconfig_path())
            .output()
            .unwrap();
        assert!(
            installed.status.success(),
            "helm install: {}{}",
            String::from_utf8_lossy(&installed.stdout),
            String::from_utf8_lossy(&installed.stderr)
        );

        let edge_client = edge.client().await.unwrap();
        let agent_pods: Api<Pod> = Api::namespaced(edge_client.clone(), "kubenest-system");
        let mut state = String::new();
        let connected = async || {
            let cluster = admin
                .get(&format!("/api/v1/clusters/{cluster_id}"))
                .await
                .unwrap();
            state = cluster["state"].as_str().unwrap_or_default().to_owned();
            state == "connected"
        };
        let waited = tokio::time::timeout(REAL, async {
            let mut connected = connected;
            while !connected().await {
                tokio::time::sleep(Duration::from_millis(500)).await;
            }
        })
        .await;
        if waited.is_err() {
            let pods = agent_pods.list(&ListParams::default()).await.unwrap();
            let mut logs = String::new();
            for pod in &pods.items {
                let name = pod.metadata.name.clone().unwrap_or_default();
                let log = agent_pods
                    .logs(&name, &Default::default())
                    .await
                    .unwrap_or_default();
                logs.push_str(&format!(
                    "pod {name}: {:?}\n{log}\n",
                    pod.status.as_ref().map(|s| &s.container_statuses)
                ));
            }
            panic!(
                "the cluster is {state:?}, not connected:\n{logs}\n{}",
                edge.log_tails(20)
            );
        }

        // An App through REST, on the demo image: a real container answers HTTP.
        let project = admin
            .post(
                &format!("/api/v1/orgs/{org}/projects"),
                &json!({"name": "shop", "cluster_id": cluster_id}),
            )
            .await
            .unwrap();
        let project_id = project["id"].as_str().unwrap().to_owned();
        let mut body = simple_app(&project_id, "demo", "localhost/kubenest/demo:0.1.0");
        body["progress_deadline_seconds"] = json!(REAL.as_secs());
        let app = admin.post("/api/v1/apps", &body).await.unwrap();
        let path = format!("/api/v1/apps/{}", app["id"].as_str().unwrap());
        let mut last = serde_json::Value::Null;
        let running = tokio::time::timeout(REAL, async {
            loop {
                last = admin.get(&path).await.unwrap();
                if last["phase"] == "Running" {
                    break;
                }
                assert_ne!(last["phase"], "Failed", "{last}");
                tokio::time::sleep(Duration::from_millis(500)).await;
            }
        })
        .await;
        assert!(
            running.is_ok(),
            "not Running: {last}\n{}",
            edge.log_tails(20)
        );

        // The pod is a real process: its own HTTP answer, read through the API server's
        // proxy to the pod.
        let namespace = "shop"; // a project's namespace is its name
        let pods: Api<Pod> = Api::namespaced(edge_client, namespace);
        let pod = pods
            .list(&ListParams::default().labels("kubenest.io/component=web"))
            .await
            .unwrap()
            .items
            .into_iter()
            .next()
            .unwrap();
        let name = pod.metadata.name.unwrap();
        let mut answer = String::new();
        eventually("the demo answers", Duration::from_secs(60), async || {
            let request = http::Request::get(format!(
                "/api/v1/namespaces/{namespace}/pods/{name}:8080/proxy/"
            ))
            .body(Vec::new())
            .unwrap();
            match pods.clone().into_client().request_text(request).await {
                Ok(text) => {
                    answer = text;
                    true
                }
                Err(_) => false,
            }
        })
        .await;
        assert!(answer.contains('{'), "the demo's JSON answer: {answer}");
        eprintln!("the demo answered from pod {name}: {answer}");
        drop(system);
    });
}
