//! The whole release installed from a registry, on a real node: `tools/release.sh` pushes the
//! five images the charts run and both charts to a real OCI registry (`release.rs` says how),
//! `helm install oci://…/kubenest` puts the control plane on the node (its hub, controllers and
//! API server pods pulling their images from the registry, PostgreSQL on the host, the chart's
//! NetworkPolicies told the API server's and PostgreSQL's ports, as an operator tells them,
//! and the monitoring namespace that may scrape), and `helm test` finds every program ready.
//! The policies fence a tenant's pod out of every admin port and let it reach the hub's
//! WebSocket port. (This node does not police pods' packets to the host itself, where its API
//! server and PostgreSQL run: `tests/testkit/src/node/netpol.rs`.) Then, through that API: an organization, the
//! cluster registered, and the printed agent install (the published agent chart, at the
//! control plane's version) run exactly as printed; the agent dials the chart's hub through
//! its Service and the cluster turns connected, with the released agent image, and the agent's
//! own `helm test` passes.
//!
//! Needs root (the real node); the images are built (or found cached) by tools/build-images.sh.

use std::net::SocketAddr;

use crate::common::run;
use crate::release::{
    Workstation, agent_is_the_released_one, assert_ok, node_registry, release,
    restricted_namespace, wait_connected,
};
use k8s_openapi::api::core::v1::{Endpoints, Namespace, Pod};
use kube::api::{Api, ListParams, PostParams};
use kubenest_testkit::{Cluster, Environment, Images, TcpProxy, probes};
use serde_json::json;

/// Every image the two charts run.
const IMAGES: [&str; 5] = ["hub", "controllers", "apiserver", "agent", "builder"];

/// The control plane's namespace.
const PLANE: &str = "kubenest";

/// The namespace `networkPolicy.metricsFrom` admits to the programs' admin port.
const MONITORING: &str = "monitoring";

/// The chart's NetworkPolicies on the node, as an attacker meets them: a pod in a namespace
/// `metricsFrom` does not name (a tenant's) reaches the hub's WebSocket port (agents dial it
/// from anywhere) but no program's admin port; a pod of the monitoring namespace reaches the
/// admin port (and `helm test` did, from the release's namespace).
async fn fenced(edge: &Cluster, client: &kube::Client) {
    probes::import_testbox(edge).await.unwrap();
    let program_ip = async |name: &str| {
        Api::<Pod>::namespaced(client.clone(), PLANE)
            .list(&ListParams::default().labels(&format!("app.kubernetes.io/name={name}")))
            .await
            .unwrap()
            .items[0]
            .status
            .clone()
            .unwrap()
            .pod_ip
            .unwrap()
    };
    let hub = program_ip("hub").await;
    let controllers = program_ip("controllers").await;
    let apiserver = program_ip("apiserver").await;
    // One HTTP request with a bounded connect (busybox nc -w 2): `open` when the port
    // answered with HTTP at all, `closed` when refused or dropped.
    let connects = |ip: &str, port: u16| {
        format!(
            "if printf 'GET /healthz HTTP/1.0\\r\\n\\r\\n' | nc -w 2 {ip} {port} | grep -q '^HTTP/1'; \
             then echo open; else echo closed; fi"
        )
    };
    for namespace in [MONITORING, "tenant"] {
        Api::<Namespace>::all(client.clone())
            .create(
                &PostParams::default(),
                &serde_json::from_value(json!({"metadata": {"name": namespace}})).unwrap(),
            )
            .await
            .unwrap();
        let pods = Api::<Pod>::namespaced(client.clone(), namespace);
        pods.create(
            &PostParams::default(),
            &probes::testbox_pod("client", json!({"app": "client"}), "exec sleep 3600").unwrap(),
        )
        .await
        .unwrap();
        probes::until("the client pod runs", async || {
            let pod = pods.get("client").await.unwrap();
            Ok(pod.status.and_then(|s| s.phase).as_deref() == Some("Running"))
        })
        .await
        .unwrap();
    }
    let from = async |namespace: &str, ip: &str, port: u16| {
        probes::exec(edge, namespace, "client", &connects(ip, port))
            .await
            .unwrap()
            == "open"
    };
    // What is let through is let through once the policy controller knows the new pods.
    for (namespace, ip, port) in [
        (MONITORING, &hub, 9090),
        (MONITORING, &controllers, 9090),
        (MONITORING, &apiserver, 9090),
        ("tenant", &hub, 8443),
    ] {
        probes::until(&format!("{namespace} reaches {ip}:{port}"), async || {
            Ok(from(namespace, ip, port).await)
        })
        .await
        .unwrap();
    }
    for ip in [&hub, &controllers, &apiserver] {
        assert!(!from("tenant", ip, 9090).await, "a tenant scraped {ip}");
    }
}

#[test]
fn the_released_control_plane_installs_from_the_registry_and_its_printed_agent_install_connects() {
    run(async {
        let version = env!("CARGO_PKG_VERSION");
        Images::build(&IMAGES).await.unwrap();
        let env = Environment::builder()
            .real_node("edge")
            .postgres()
            .start()
            .await
            .unwrap();
        let edge = env.cluster("edge").unwrap();
        let host = edge.pod_reachable_host().unwrap();
        let dir = tempfile::tempdir().unwrap();
        let (ca, registry) = node_registry(edge, dir.path()).await;
        let helm = kubenest_testkit::Binaries::locate().unwrap().helm;
        release(&registry, &ca.path, &helm, &IMAGES);
        let user = Workstation {
            home: tempfile::tempdir().unwrap(),
            helm,
            ca: ca.path.clone(),
            kubeconfig: edge.kubeconfig_path().to_owned(),
        };
        assert_ok(
            "helm registry login",
            &user.helm(
                &[
                    "registry",
                    "login",
                    registry.address(),
                    "--username",
                    registry.username(),
                    "--password-stdin",
                ],
                registry.password(),
            ),
        );

        // PostgreSQL on the host, where the pods reach it.
        let postgres = env.postgres().unwrap();
        let database = postgres.fresh_database("plane").await.unwrap();
        let loopback = format!("127.0.0.1:{}", postgres.port());
        let proxy = TcpProxy::start(&format!("{host}:0"), vec![loopback.parse().unwrap()])
            .await
            .unwrap();
        let database_url = database
            .url
            .replace(&loopback, &proxy.address().to_string());
        // The management API server's port as pods reach it (the `kubernetes` Endpoints).
        let client = edge.client().await.unwrap();
        let endpoints = Api::<Endpoints>::namespaced(client.clone(), "default")
            .get("kubernetes")
            .await
            .unwrap();
        let api_port = endpoints.subsets.unwrap()[0].ports.as_ref().unwrap()[0].port;
        let signing = rcgen::KeyPair::generate_for(&rcgen::PKCS_ED25519).unwrap();
        let api_signing = rcgen::KeyPair::generate_for(&rcgen::PKCS_ED25519).unwrap();
        let password = kubenest_devenv::system::random_password();
        let hub_url = format!("ws://kubenest-hub.{PLANE}.svc:443/v1/connect");
        let values = json!({
            "postgres": {"url": database_url},
            "keys": {
                "signingKey": signing.serialize_pem(),
                "publicKey": signing.public_key_pem(),
                "apiSigningKey": api_signing.serialize_pem(),
            },
            "hub": {
                "replicas": 1,
                "insecurePlaintext": true,
                "publicUrl": hub_url,
                "service": {"type": "ClusterIP", "port": 443},
            },
            "controllers": {"replicas": 1},
            "apiserver": {"replicas": 1, "admin": {"password": password}},
            "networkPolicy": {
                "metricsFrom": [{"namespaceSelector": {"matchLabels": {
                    "kubernetes.io/metadata.name": MONITORING}}}],
                "kubeApiServer": {"ports": [api_port]},
                "postgres": {"port": proxy.address().port()},
            },
        });
        let values_file = user.home.path().join("values.json");
        std::fs::write(&values_file, values.to_string()).unwrap();
        restricted_namespace(edge, PLANE).await;
        let installed = user.helm(
            &[
                "install",
                "kubenest",
                &format!("oci://{}/kubenest/charts/kubenest", registry.address()),
                "--version",
                version,
                "--namespace",
                PLANE,
                "--values",
                &values_file.to_string_lossy(),
                "--wait",
                "--timeout",
                "300s",
            ],
            "",
        );
        if !installed.status.success() {
            let pods = Api::<Pod>::namespaced(client.clone(), PLANE);
            let mut logs = String::new();
            for pod in pods.list(&ListParams::default()).await.unwrap().items {
                let name = pod.metadata.name.clone().unwrap_or_default();
                let log = pods.logs(&name, &Default::default()).await;
                logs.push_str(&format!(
                    "pod {name}: {:?}\n{}\n",
                    pod.status.map(|s| s.container_statuses),
                    log.unwrap_or_default()
                ));
            }
            panic!(
                "helm install: {}\n{logs}\n{}",
                String::from_utf8_lossy(&installed.stderr),
                edge.log_tails(30)
            );
        }
        let tested = user.helm(
            &[
                "test",
                "kubenest",
                "--namespace",
                PLANE,
                "--logs",
                "--timeout",
                "180s",
            ],
            "",
        );
        let said = assert_ok("helm test", &tested);
        for program in ["hub", "controllers", "apiserver"] {
            assert!(
                said.lines()
                    .any(|l| l.starts_with(&format!("{program}: HTTP/1.")) && l.contains(" 200")),
                "{program} not ready: {said}"
            );
        }

        fenced(edge, &client).await;

        // The chart's API, at its pod's address (the node's pods are on the host's bridge),
        // through a loopback port as `kubectl port-forward` gives one: the CLI sends a
        // password over plain HTTP to loopback only.
        let api_pod = Api::<Pod>::namespaced(client.clone(), PLANE)
            .list(&ListParams::default().labels("app.kubernetes.io/name=apiserver"))
            .await
            .unwrap()
            .items
            .remove(0);
        let pod_ip = api_pod.status.unwrap().pod_ip.unwrap();
        let api: SocketAddr = format!("{pod_ip}:8080").parse().unwrap();
        let forward = TcpProxy::start("127.0.0.1:0", vec![api]).await.unwrap();
        let mut admin =
            kubenest_cli::api::Client::with_ca(&format!("http://{}", forward.address()), None)
                .unwrap();
        admin.login("admin", &password).await.unwrap();
        admin
            .post(
                "/api/v1/orgs",
                &json!({"name": "acme", "display_name": "Acme"}),
            )
            .await
            .unwrap();
        let registration = admin
            .post("/api/v1/orgs/acme/clusters", &json!({"name": "edge"}))
            .await
            .unwrap();
        let cluster_id = registration["cluster_id"].as_str().unwrap().to_owned();
        let command = registration["helm_install_command"].as_str().unwrap();
        assert!(
            command.starts_with(&format!(
                "helm install kubenest-agent oci://{}/kubenest/charts/kubenest-agent --version \
                 {version} --namespace kubenest-system --create-namespace --set hub.url={hub_url} ",
                registry.address()
            )),
            "{command}"
        );
        restricted_namespace(edge, "kubenest-system").await;
        assert_ok("the printed helm install", &user.shell(command));
        wait_connected(&mut admin, &cluster_id, edge).await;
        agent_is_the_released_one(edge, &registry, version, &user).await;
        drop((proxy, forward));
    });
}
