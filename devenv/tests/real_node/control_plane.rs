//! The control plane installs as a platform team installs it: `helm install` of
//! `charts/kubenest` on the real-node cluster (its own CRDs, the images `make images` builds
//! loaded on the node, an external PostgreSQL — the test kit's, reached from the pods through
//! the host address they see), exactly the README's install section. The hub, controllers and
//! API server pods become Ready (their readiness probes are `/readyz`, which names each
//! dependency), the API answers a login through its Service, and a kubectl write meets the
//! API's rules through the admission webhook the chart registers.
//!
//! Needs root (the real node).

use std::process::Command;
use std::time::{Duration, Instant};

use crate::common::run;
use k8s_openapi::api::core::v1::{Endpoints, Pod};
use kube::api::{Api, ListParams};
use kubenest_testkit::{Binaries, Environment, Images, TcpProxy};
use serde_json::{Value, json};

const NAMESPACE: &str = "kubenest";
const PASSWORD: &str = "correct horse battery staple";

fn ed25519_pem() -> (String, String) {
    let key = rcgen::KeyPair::generate_for(&rcgen::PKCS_ED25519).unwrap();
    (key.serialize_pem(), key.public_key_pem())
}

/// Pods of the release and whether each is Ready, with their container states for a failure.
async fn pod_states(pods: &Api<Pod>) -> (bool, String) {
    let listed = pods
        .list(&ListParams::default().labels("app.kubernetes.io/instance=kubenest"))
        .await
        .unwrap()
        .items;
    let mut all_ready = listed.len() >= 3;
    let mut report = String::new();
    for pod in &listed {
        let status = pod.status.clone().unwrap_or_default();
        let ready = status
            .conditions
            .iter()
            .flatten()
            .any(|c| c.type_ == "Ready" && c.status == "True");
        all_ready &= ready;
        report.push_str(&format!(
            "{} ready={ready} {:?}\n",
            pod.metadata.name.clone().unwrap_or_default(),
            status.container_statuses
        ));
    }
    (all_ready, report)
}

#[test]
fn helm_install_of_the_control_plane_brings_every_program_to_ready_and_the_api_answers() {
    run(async {
        let images = Images::build(&["apiserver", "controllers", "hub"])
            .await
            .unwrap();
        let env = Environment::builder()
            .real_node("edge")
            .postgres()
            .start()
            .await
            .unwrap();
        let edge = env.cluster("edge").unwrap();
        for name in ["apiserver", "controllers", "hub"] {
            edge.import_image(images.archive(name).unwrap())
                .await
                .unwrap();
        }
        // The external PostgreSQL, reached by the pods at the host address they see.
        let postgres = env.postgres().unwrap();
        let database = postgres.fresh_database("control_plane").await.unwrap();
        let host = edge.pod_reachable_host().unwrap();
        let upstream = std::net::SocketAddr::from(([127, 0, 0, 1], postgres.port()));
        let link = TcpProxy::start(&format!("{host}:0"), vec![upstream])
            .await
            .unwrap();
        let url = database.url.replace(
            &format!("127.0.0.1:{}", postgres.port()),
            &link.address().to_string(),
        );

        // The chart's NetworkPolicies open the management API server's and PostgreSQL's
        // ports: this cluster's are not the defaults (443 or 6443, 5432), so name them, as
        // the README's install section says, from the `kubernetes` Endpoints. (This node does
        // not police pods' packets to the host, where both run: tests/testkit/src/node/netpol.rs;
        // a cluster whose API server and database are elsewhere does.)
        let client = edge.client().await.unwrap();
        let endpoints = Api::<Endpoints>::namespaced(client.clone(), "default")
            .get("kubernetes")
            .await
            .unwrap();
        let api_port = endpoints.subsets.unwrap()[0].ports.as_ref().unwrap()[0].port;

        let (signing, public) = ed25519_pem();
        let (api_signing, _) = ed25519_pem();
        let values = json!({
            "images": {"pullPolicy": "Never"},
            "postgres": {"url": url, "maxConnections": 4},
            "keys": {"signingKey": signing, "publicKey": public, "apiSigningKey": api_signing},
            "hub": {
                "replicas": 1,
                "insecurePlaintext": true,
                "publicUrl": format!("ws://{host}:8443/v1/connect"),
                "service": {"type": "ClusterIP", "port": 443},
            },
            "controllers": {"replicas": 1},
            "apiserver": {"replicas": 1, "admin": {"user": "admin", "password": PASSWORD}},
            "networkPolicy": {
                "kubeApiServer": {"ports": [api_port]},
                "postgres": {"port": link.address().port()},
            },
        });
        let dir = tempfile::tempdir().unwrap();
        let values_file = dir.path().join("values.yaml");
        std::fs::write(&values_file, serde_yaml::to_string(&values).unwrap()).unwrap();
        let helm = Binaries::locate().unwrap().helm;
        let installed = Command::new(&helm)
            .args([
                "install",
                "kubenest",
                "charts/kubenest",
                "--namespace",
                NAMESPACE,
            ])
            .arg("--create-namespace")
            .arg("--values")
            .arg(&values_file)
            .current_dir(concat!(env!("CARGO_MANIFEST_DIR"), "/.."))
            .env("KUBECONFIG", edge.kubeconfig_path())
            .output()
            .unwrap();
        assert!(
            installed.status.success(),
            "helm install: {}{}",
            String::from_utf8_lossy(&installed.stdout),
            String::from_utf8_lossy(&installed.stderr)
        );

        let pods: Api<Pod> = Api::namespaced(client.clone(), NAMESPACE);
        let started = Instant::now();
        let deadline = started + Duration::from_secs(240);
        loop {
            let (ready, report) = pod_states(&pods).await;
            if ready {
                break;
            }
            if Instant::now() > deadline {
                let mut logs = String::new();
                for pod in pods.list(&ListParams::default()).await.unwrap() {
                    let name = pod.metadata.name.unwrap_or_default();
                    let log = pods.logs(&name, &Default::default()).await;
                    logs.push_str(&format!("--- {name}\n{}\n", log.unwrap_or_default()));
                }
                panic!("not every pod is Ready:\n{report}{logs}");
            }
            tokio::time::sleep(Duration::from_secs(1)).await;
        }
        eprintln!(
            "the control plane was Ready {:.0}s after helm install",
            started.elapsed().as_secs_f64()
        );

        // A login through the API's Service (the API server's service proxy).
        let login = http::Request::post(format!(
            "/api/v1/namespaces/{NAMESPACE}/services/kubenest-api:http/proxy/api/v1/login"
        ))
        .header("content-type", "application/json")
        .body(serde_json::to_vec(&json!({"username": "admin", "password": PASSWORD})).unwrap())
        .unwrap();
        let answer: Value =
            serde_json::from_str(&client.request_text(login).await.unwrap()).unwrap();
        assert!(
            answer["access_token"]
                .as_str()
                .is_some_and(|t| !t.is_empty()),
            "{answer}"
        );

        // kubectl writes meet the API's rules: the cluster's API server calls the API server's
        // admission webhook through the release's Service, with the CA the chart generated.
        let apps: Api<kubenest_crds::App> = Api::namespaced(client.clone(), NAMESPACE);
        let app: kubenest_crds::App = serde_json::from_value(json!({
            "apiVersion": "kubenest.io/v1alpha1", "kind": "App",
            "metadata": {"name": "not-in-a-project"},
            "spec": {"project": "nowhere", "components": [
                {"name": "web", "workload": {"image": "nginx:1.27"}}]},
        }))
        .unwrap();
        // The webhook is called at the Service's cluster IP, which works once the node's
        // kube-proxy has programmed it; that can trail the pods' readiness by seconds.
        let programmed = Instant::now() + Duration::from_secs(90);
        let refused = loop {
            let refused = apps.create(&Default::default(), &app).await.unwrap_err();
            let unreachable = refused.to_string().contains("failed to call webhook")
                && refused.to_string().contains("connection refused");
            if !unreachable || Instant::now() > programmed {
                break refused;
            }
            tokio::time::sleep(Duration::from_secs(1)).await;
        };
        assert!(
            refused.to_string().contains(
                "admission webhook \"rules.kubenest.io\" denied the request: spec.project: no such \
                 project in this organization"
            ),
            "{refused}"
        );
        drop(link);
    });
}
