//! The agent installed as a user installs it, on a real node: the release programs run as
//! processes (hub replicas, controllers, API server) beside a workload cluster `edge` with a
//! real kubelet and containerd; the cluster is registered through the REST API and the
//! `helm install` command the registration answers is run exactly as printed, by a shell, with
//! the chart from this repository and the images `make images` builds loaded on the node. The
//! agent pod dials the hub (on the host address pods reach), the Cluster turns `connected`; the
//! demo App deployed through REST runs its web app, Postgres and Redis in real containers, the
//! addons' exports wired in (its HTTP answer says both backends answered), and a change and a
//! rollback (a new image tag and version, then back) roll out on the node. The demo is asked through its Service from a pod, and the
//! agent's namespace enforces Pod Security `restricted`; the web container's own log lines come
//! back through the hub (`GET /api/v1/apps/{id}/logs`). The demo is verified: a bad change
//! rolls itself back (the tour's step), and then a rollback that fails too stops kubenest's
//! automation with a critical alert (`verified.rs`).
//!
//! In another project at the same time, the catalog's Kafka, Postgres and Redis keep what was
//! written across their pods' deletion (`addons_real.rs`): one real node and one control plane
//! serve both, as they serve a user's projects.
//!
//! Needs root (the real node); the images are built (or found cached) by tools/build-images.sh.

use std::process::Command;
use std::time::Duration;

use crate::addons_real;
use crate::common::run;
use crate::verified;
use k8s_openapi::api::core::v1::Namespace;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::rbac::v1::RoleBinding;
use kube::api::{Api, ListParams, PostParams};
use kubenest_devenv::system::{Options, System};
use kubenest_devenv::tour::{self, Printer, demo};
use kubenest_testkit::{Cluster, Environment, Images};
use serde_json::{Value, json};

const DEMO: &str = "localhost/kubenest/demo:0.1.0";
const DEMO_NEXT: &str = "localhost/kubenest/demo:0.1.0-next";

/// Real pulls, starts and helm installs take longer than kwok's instant pods.
const REAL: Duration = Duration::from_secs(240);

/// The images loaded on the node: the agent, the demo, and the catalog's addons (Postgres and
/// Redis for the demo, Kafka too for `addons_real.rs`).
const IMAGES: [&str; 5] = ["agent", "demo", "postgres", "redis", "kafka"];

#[test]
fn the_printed_helm_install_connects_an_agent_pod_and_the_demo_app_runs_with_its_addons() {
    run(async {
        let images = Images::build(&IMAGES).await.unwrap();
        let env = Environment::builder()
            .management("mgmt")
            .real_node("edge")
            .postgres()
            .start()
            .await
            .unwrap();
        let edge = env.cluster("edge").unwrap();
        for name in IMAGES {
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

        // The agent's namespace enforces Pod Security `restricted`: its pod must pass it.
        let namespaces: Api<Namespace> = Api::all(edge.client().await.unwrap());
        let restricted: Namespace = serde_json::from_value(json!({"metadata": {
            "name": "kubenest-system",
            "labels": {"pod-security.kubernetes.io/enforce": "restricted"}}}))
        .unwrap();
        namespaces
            .create(&PostParams::default(), &restricted)
            .await
            .unwrap();

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

        // Two projects on the node at once: the demo App, and the catalog's addons keeping
        // their data (`addons_real.rs`). The demo's verification windows are mostly waiting.
        let (demo, addons) = tokio::join!(
            the_demo(&system, &mut admin, edge, &cluster_id),
            addons_real::keep_what_was_written(&system, edge, &cluster_id),
        );
        let ((), ()) = (demo, addons);
        drop(system);
    });
}

/// The demo App through REST: Postgres and Redis addons from the catalog (their images loaded on
/// the node), and the demo web app with their `dsn` and `url` exports wired in on the cluster.
/// Every part is a real process. Then a change, a rollback, and its verification.
async fn the_demo(
    system: &System,
    admin: &mut kubenest_cli::api::Client,
    edge: &Cluster,
    cluster_id: &str,
) {
    let org = system.options().org.clone();
    let edge_client = edge.client().await.unwrap();
    let project = admin
        .post(
            &format!("/api/v1/orgs/{org}/projects"),
            &json!({"name": "shop", "cluster_id": cluster_id}),
        )
        .await
        .unwrap();
    let project_id = project["id"].as_str().unwrap().to_owned();
    let body = demo::app(&project_id, "demo", DEMO, "one", REAL);
    let app = admin.post("/api/v1/apps", &body).await.unwrap();
    let app_id = app["id"].as_str().unwrap().to_owned();
    let path = format!("/api/v1/apps/{app_id}");
    let first = running(admin, &path, edge, |_| true).await;
    // It ran with namespaced powers: the chart gives the agent none in project namespaces
    // but the role it binds there itself.
    let binding = Api::<RoleBinding>::namespaced(edge_client.clone(), "shop")
        .get("kubenest-agent")
        .await
        .unwrap();
    assert_eq!(binding.role_ref.name, "kubenest-agent-project");
    let answer = ask(&edge_client, "one").await;
    assert_eq!(answer["ok"], true, "{answer}");
    assert_eq!(answer["postgres"]["connected"], true, "{answer}");
    assert_eq!(answer["redis"]["connected"], true, "{answer}");
    eprintln!("the demo answered: {answer}");
    fenced(admin, &edge_client, &project_id).await;

    // The web container's own log lines (a real process's stdout) reach a REST reader
    // through the agent pod and the hub, tagged with pod and container.
    let token = admin.session().unwrap().access_token.clone();
    let text = reqwest::Client::new()
        .get(format!(
            "{}{path}/logs?component=web&tail=100",
            system.api_url()
        ))
        .bearer_auth(token)
        .header("Accept", "text/plain")
        .send()
        .await
        .unwrap();
    assert_eq!(text.status(), 200);
    let text = text.text().await.unwrap();
    let serving = text
        .lines()
        .find(|l| l.contains("serving") && l.contains("one"))
        .unwrap_or_else(|| panic!("no startup line of the demo in its log:\n{text}"));
    assert!(
        serving.starts_with("demo-web-"),
        "tagged with its pod: {serving}"
    );
    assert!(
        text.lines()
            .last()
            .is_some_and(|l| l.starts_with("# end of logs")),
        "{text}"
    );

    // A change rolls out on the node; a rollback to the first deployment brings it back.
    let mut components = first["components"].clone();
    let web = components
        .as_array_mut()
        .unwrap()
        .iter_mut()
        .find(|c| c["name"] == "web")
        .unwrap();
    // A new release: a new image tag (of the same content here) and its version.
    edge.tag_image(DEMO, DEMO_NEXT).await.unwrap();
    web["workload_spec"]["image"] = json!(DEMO_NEXT);
    web["workload_spec"]["env"][2]["value"] = json!("two");
    admin
        .patch(&path, &json!({"components": components}))
        .await
        .unwrap();
    let first_revision = first["revision"].clone();
    running(admin, &path, edge, |r| *r != first_revision).await;
    assert_eq!(ask(&edge_client, "two").await["version"], "two");
    assert_eq!(web_image(&edge_client).await, DEMO_NEXT);
    let history = admin.get(&format!("{path}/deployments")).await.unwrap();
    let original = history
        .as_array()
        .unwrap()
        .iter()
        .find(|d| d["revision"] == first["revision"])
        .unwrap()["id"]
        .as_str()
        .unwrap()
        .to_owned();
    admin
        .post(
            &format!("{path}/rollback"),
            &json!({"deployment_id": original}),
        )
        .await
        .unwrap();
    // The rollback restores the first spec, hence its revision.
    running(admin, &path, edge, |r| *r == first_revision).await;
    assert_eq!(ask(&edge_client, "one").await["version"], "one");
    assert_eq!(web_image(&edge_client).await, DEMO);

    // Verified: the tour's step (a bad change judged on the node and rolled back by
    // kubenest, the rollback passing), then a rollback that fails too.
    let mut out = Printer::quiet();
    let rolled =
        tour::verified::rolls_itself_back(admin, &system.api_url(), &app_id, &mut out).await;
    eprintln!("{}", out.lines.join("\n"));
    let rolled = rolled.unwrap();
    eprintln!(
        "from the bad change: Failed after {:.1}s, rolled back after {:.1}s, the rollback \
         Passed after {:.1}s",
        rolled.judged.as_secs_f64(),
        rolled.rolled_back.as_secs_f64(),
        rolled.passed.as_secs_f64()
    );
    verified::a_broken_rollback_stops_the_automation(verified::Verified {
        admin,
        api_url: system.api_url(),
        org: org.clone(),
        app_id: app_id.clone(),
        edge,
        namespace: project["namespace"].as_str().unwrap().to_owned(),
    })
    .await;
}

/// The image the demo's web Deployment runs.
async fn web_image(client: &kube::Client) -> String {
    let deployments: Api<k8s_openapi::api::apps::v1::Deployment> =
        Api::namespaced(client.clone(), "shop");
    let web = deployments.get("demo-web").await.unwrap();
    web.spec.unwrap().template.spec.unwrap().containers[0]
        .image
        .clone()
        .unwrap_or_default()
}

/// Waits until the App at `path` runs its current revision and that revision is the one `want`
/// accepts; returns the App.
async fn running(
    admin: &mut kubenest_cli::api::Client,
    path: &str,
    edge: &Cluster,
    want: impl Fn(&Value) -> bool,
) -> Value {
    let mut last = Value::Null;
    let done = tokio::time::timeout(REAL, async {
        loop {
            last = admin.get(path).await.unwrap();
            if last["phase"] == "Running"
                && last["observed_revision"] == last["revision"]
                && want(&last["revision"])
            {
                break;
            }
            assert_ne!(last["phase"], "Failed", "{last}");
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
    })
    .await;
    assert!(done.is_ok(), "not Running: {last}\n{}", edge.log_tails(20));
    last
}

/// The demo's answer from inside the cluster network, once it reports `version`.
async fn ask(client: &kube::Client, version: &str) -> Value {
    demo::ask(
        client,
        "shop",
        DEMO,
        "http://demo-web.shop.svc:8080/",
        version,
        REAL,
    )
    .await
    .unwrap()
}

/// The demo's project fenced through REST: the agent the chart installed (with its project
/// role only) keeps the quota in the namespace, the cluster counts the demo's pods, and the
/// count comes back through the hub and the controllers to the project's use.
async fn fenced(admin: &mut kubenest_cli::api::Client, edge: &kube::Client, project_id: &str) {
    use k8s_openapi::api::core::v1::ResourceQuota;
    let path = format!("/api/v1/projects/{project_id}/fences");
    admin
        .call(
            reqwest::Method::PUT,
            &path,
            Some(&json!({"quota": {"pods": 100}})),
        )
        .await
        .unwrap();
    let quotas: Api<ResourceQuota> = Api::namespaced(edge.clone(), "shop");
    let usage = format!("/api/v1/projects/{project_id}/usage");
    let deadline = std::time::Instant::now() + REAL;
    loop {
        let kept = quotas.get_opt("kubenest-quota").await.unwrap().is_some();
        let answer = admin.get(&usage).await.unwrap();
        let counted = answer["reported"]["pods"]
            .as_str()
            .and_then(|p| p.parse::<u32>().ok())
            .unwrap_or(0);
        if kept && counted > 0 {
            eprintln!("the demo's project reports {counted} pods against its quota");
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the quota kept: {kept}; the project's use: {answer}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(500)).await;
    }
}
