//! The demo App, for a cluster with a real node: the demo web app (`images/demo`) beside a
//! Postgres and a Redis addon from the catalog, their `dsn` and `url` exports wired into its
//! environment on the cluster. It answers HTTP with what it found (both backends connected, a
//! row it wrote and read back). The tour runs it on `make dev`'s real-node cluster;
//! `devenv/tests/real_node/install.rs` runs it on the agent that the chart installed.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use anyhow::Context as _;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, DeleteParams, LogParams, PostParams};
use kubenest_cli::api;
use kubenest_cli::cmd::text;
use serde_json::{Value, json};

use super::env::DevEnv;
use super::ingress;
use super::printer::Printer;
use super::watch::{STEP, running};

/// The demo App `name` in project `project_id` running `image`, reporting `version`. Its
/// Postgres and Redis keep their data on volumes: it runs on a real node, whose local-path
/// provisioner binds them, while `make dev`'s catalog turns persistence off by default for the
/// kwok clusters ([`crate::system`]'s catalog).
/// It is verified, with a `load` workload sending it requests ([`super::verified::verified`]).
pub fn app(project_id: &str, name: &str, image: &str, version: &str, deadline: Duration) -> Value {
    let persistent = json!({"persistence": {"enabled": true}});
    let mut app = json!({
        "project_id": project_id, "name": name,
        "progress_deadline_seconds": deadline.as_secs(),
        "components": [
            {"name": "db", "type": "addon",
             "addon_spec": {"definition": "postgres", "values": persistent}},
            {"name": "cache", "type": "addon",
             "addon_spec": {"definition": "redis", "values": persistent}},
            {"name": "web", "type": "workload", "workload_spec": {
                "image": image, "replicas": 1, "port": 8080,
                "env": [
                    {"name": "DATABASE_URL", "export_ref": {"component": "db", "export": "dsn"}},
                    {"name": "REDIS_URL", "export_ref": {"component": "cache", "export": "url"}},
                    {"name": "DEMO_VERSION", "value": version}
                ]}}
        ]
    });
    super::verified::verified(&mut app, image);
    app
}

/// The demo's JSON answer to a request from inside the cluster network: a pod in the App's own
/// project `namespace` (an isolated project takes no connection from another namespace)
/// running the demo image's `kubenest-demo get` asks `url` (the App's Service by its DNS
/// name), again until the answer reports `version` or `within` has passed.
pub async fn ask(
    client: &kube::Client,
    namespace: &str,
    image: &str,
    url: &str,
    version: &str,
    within: Duration,
) -> anyhow::Result<Value> {
    let pods: Api<Pod> = Api::namespaced(client.clone(), namespace);
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

/// The tour's project on `edge`: (its id, the cluster's kubeconfig, its namespace).
pub(super) async fn edge_project(
    client: &mut api::Client,
    env: &DevEnv,
    edge: &str,
    projects: &BTreeMap<String, (String, String)>,
) -> anyhow::Result<(String, std::path::PathBuf, String)> {
    let (project_id, _) = projects
        .get(edge)
        .with_context(|| format!("no tour project on {edge}"))?;
    let (_, kubeconfig) = &env.clusters[edge];
    let project = client
        .get(&format!("/api/v1/projects/{project_id}"))
        .await?;
    Ok((
        project_id.clone(),
        kubeconfig.clone(),
        text(&project["namespace"]),
    ))
}

/// Deletes App `name` (`app_id`) and waits until it is gone from `edge`.
pub(super) async fn deleted(
    client: &mut api::Client,
    app_id: &str,
    name: &str,
    edge: &str,
    out: &mut Printer,
) -> anyhow::Result<()> {
    client.delete(&format!("/api/v1/apps/{app_id}")).await?;
    kubenest_cli::cmd::wait_deleted(client, app_id, STEP).await?;
    out.line(format!("   App {name} deleted from {edge}"));
    Ok(())
}

/// The demo App (web app, Postgres, Redis) in `edge`'s tour project, in real containers: its
/// HTTP answer from inside the cluster network says what it reached. Its id, for the next step.
pub(super) async fn on_real_node(
    client: &mut api::Client,
    env: &DevEnv,
    edge: &str,
    image: &str,
    projects: &BTreeMap<String, (String, String)>,
    out: &mut Printer,
) -> anyhow::Result<String> {
    out.step(
        9,
        &format!(
            "the demo App on {edge}, a real node: a web app, Postgres and Redis in containers"
        ),
    );
    let (project_id, kubeconfig, namespace) = edge_project(client, env, edge, projects).await?;
    let project_id = &project_id;
    let ca = ingress::set_ca(client, project_id, out).await?;
    let mut demo = app(project_id, "demo", image, "tour", STEP);
    ingress::with_ingress(&mut demo);
    let created = client.post("/api/v1/apps", &demo).await?;
    let app_id = text(&created["id"]);
    running(client, &app_id, None, out).await?;
    let url = format!("http://demo-web.{namespace}.svc:8080/");
    let workload = kubenest_runtime::kube::client(Some(kubeconfig.as_path())).await?;
    let answer = ask(&workload, &namespace, image, &url, "tour", STEP).await?;
    out.line(format!(
        "   GET {url} from a pod on {edge}, answered by {}:",
        text(&answer["hostname"])
    ));
    for backend in ["postgres", "redis"] {
        let found = &answer[backend];
        out.line(format!(
            "   {backend:<8} {}: connected {}, wrote and read back {}",
            text(&found["target"]),
            text(&found["connected"]),
            text(&found["read_back"])
        ));
    }
    anyhow::ensure!(
        answer["ok"] == true,
        "the demo did not reach both backends: {answer}"
    );
    let served = ingress::ask(&ca, "tour", STEP).await?;
    let address = client.get(&format!("/api/v1/apps/{app_id}")).await?["ingress_address"].clone();
    out.line(format!(
        "   GET https://{}/ through {edge}'s ingress controller (the App's ingress address {}), \
         trusting only the project's CA: answered by {}",
        ingress::HOST,
        text(&address),
        text(&served["hostname"])
    ));
    Ok(app_id)
}

/// The tour's sample repository built on `edge`: the project's registry credentials and the
/// App's Git credentials through the API, a Git workload whose build (the builder image, in a
/// Job) pushes to the registry, and the pod running what it pushed, which answers with the
/// version its Dockerfile set. Then it is deleted.
pub(super) async fn built_from_git(
    client: &mut api::Client,
    env: &DevEnv,
    (step, edge): (usize, &str),
    image: &str,
    builds: &super::env::BuildEnv,
    projects: &BTreeMap<String, (String, String)>,
    out: &mut Printer,
) -> anyhow::Result<()> {
    out.step(
        step,
        &format!("a Git workload on {edge}: built, pushed to a private registry, run"),
    );
    let (project_id, kubeconfig, namespace) = edge_project(client, env, edge, projects).await?;
    let project_id = &project_id;
    let registry = &builds.registry;
    client
        .call(
            reqwest::Method::PUT,
            &format!("/api/v1/projects/{project_id}/registry-credentials"),
            Some(&json!({"registries": {registry: {
                "username": builds.registry_username, "password": builds.registry_password}}})),
        )
        .await?;
    out.line(format!(
        "   project registry credentials for {registry} set on {edge} (Secret kubenest-registry)"
    ));
    let created = client
        .post(
            "/api/v1/apps",
            &json!({"project_id": project_id, "name": "site",
                "progress_deadline_seconds": STEP.as_secs(),
                "components": [{"name": "web", "type": "workload", "workload_spec": {
                    "git": {"repository": builds.sample, "ref": "main", "mode": "dockerfile"},
                    "replicas": 1, "port": 8080}}]}),
        )
        .await?;
    let app_id = text(&created["id"]);
    client
        .call(
            reqwest::Method::PUT,
            &format!("/api/v1/apps/{app_id}/components/web/git-credentials"),
            Some(&json!({"username": builds.git_username, "password": builds.git_password})),
        )
        .await?;
    out.line(format!(
        "   App site from {} (Git credentials set)",
        builds.sample
    ));
    running(client, &app_id, None, out).await?;
    let workload = kubenest_runtime::kube::client(Some(kubeconfig.as_path())).await?;
    let deployment =
        Api::<k8s_openapi::api::apps::v1::Deployment>::namespaced(workload.clone(), &namespace)
            .get("site-web")
            .await?;
    let built = deployment
        .spec
        .and_then(|s| s.template.spec)
        .and_then(|s| s.containers.into_iter().next())
        .and_then(|c| c.image)
        .unwrap_or_default();
    out.line(format!("   built and pushed {built}"));
    let url = format!("http://site-web.{namespace}.svc:8080/");
    let answer = ask(
        &workload,
        &namespace,
        image,
        &url,
        crate::builds::SAMPLE_VERSION,
        STEP,
    )
    .await?;
    out.line(format!(
        "   GET {url} from a pod on {edge}: version {}",
        text(&answer["version"])
    ));
    deleted(client, &app_id, "site", edge, out).await?;
    Ok(())
}
