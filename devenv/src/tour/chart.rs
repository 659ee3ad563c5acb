//! A chart workload on the real node: `make dev`'s sample chart (`crate::builds::HELLO`, a
//! Deployment and a CronJob) pulled from its registry with the project's registry credentials,
//! paused (the Deployment at zero replicas, the CronJob suspended, the App `Paused` only once
//! nothing of it runs) and resumed (both back as the chart says). Then it is deleted.

use std::collections::BTreeMap;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::batch::v1::CronJob;
use kube::api::Api;
use kubenest_cli::api;
use kubenest_cli::cmd::text;
use serde_json::json;

use super::demo::{deleted, edge_project};
use super::env::DevEnv;
use super::printer::Printer;
use super::watch::{STEP, eventually, running};

/// The chart's Deployment replicas and whether its CronJob is suspended, on the cluster.
async fn stopped_state(
    deployments: &Api<Deployment>,
    crons: &Api<CronJob>,
) -> anyhow::Result<(i32, bool)> {
    let replicas = deployments
        .get("hello-web")
        .await?
        .spec
        .and_then(|s| s.replicas)
        .unwrap_or(-1);
    let suspended = crons
        .get("hello-web-report")
        .await?
        .spec
        .and_then(|s| s.suspend)
        .unwrap_or(false);
    Ok((replicas, suspended))
}

/// Step `number`: the sample chart from `repository` as App `hello` on `edge`, paused and
/// resumed.
pub(super) async fn paused_and_resumed(
    client: &mut api::Client,
    env: &DevEnv,
    (number, edge): (usize, &str),
    repository: &str,
    projects: &BTreeMap<String, (String, String)>,
    out: &mut Printer,
) -> anyhow::Result<()> {
    out.step(
        number,
        &format!("a Helm chart workload on {edge}: paused and resumed"),
    );
    let (project_id, kubeconfig, namespace) = edge_project(client, env, edge, projects).await?;
    let created = client
        .post(
            "/api/v1/apps",
            &json!({"project_id": project_id, "name": "hello",
                "progress_deadline_seconds": STEP.as_secs(),
                "components": [{"name": "web", "type": "workload", "workload_spec": {
                    "helm": {"chart": {"repository": repository, "name": "hello",
                                       "version": "0.1.0"}}}}]}),
        )
        .await?;
    let app_id = text(&created["id"]);
    out.line(format!("   App hello from {repository}/hello 0.1.0"));
    running(client, &app_id, None, out).await?;
    let workload = kubenest_runtime::kube::client(Some(kubeconfig.as_path())).await?;
    let deployments: Api<Deployment> = Api::namespaced(workload.clone(), &namespace);
    let crons: Api<CronJob> = Api::namespaced(workload, &namespace);

    client
        .post(&format!("/api/v1/apps/{app_id}/pause"), &json!({}))
        .await?;
    let paused = eventually(
        "the chart Paused: no replicas, its CronJob suspended",
        async || {
            let app = client.get(&format!("/api/v1/apps/{app_id}")).await?;
            let (replicas, suspended) = stopped_state(&deployments, &crons).await?;
            Ok(if app["phase"] == "Paused" && replicas == 0 && suspended {
                Ok(app)
            } else {
                Err(format!(
                    "{} with {replicas} replicas, CronJob suspended: {suspended}",
                    text(&app["phase"])
                ))
            })
        },
    )
    .await?;
    out.line(format!(
        "   {}: hello-web has 0 replicas and hello-web-report is suspended on {edge}",
        text(&paused["phase"])
    ));
    client
        .post(&format!("/api/v1/apps/{app_id}/resume"), &json!({}))
        .await?;
    running(client, &app_id, Some(&paused), out).await?;
    let (replicas, suspended) = stopped_state(&deployments, &crons).await?;
    anyhow::ensure!(
        replicas == 2 && !suspended,
        "resumed, the chart runs as it says: {replicas} replicas, CronJob suspended: {suspended}"
    );
    out.line(format!(
        "   resumed: hello-web has {replicas} replicas, hello-web-report is scheduled again"
    ));
    deleted(client, &app_id, "hello", edge, out).await
}
