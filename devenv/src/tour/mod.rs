//! The tour: a scripted walk through kubenest on a running local environment, each step
//! printing what happened. `make tour` runs it against `make dev` (through `.kubenest/dev.env`);
//! the end-to-end test runs the same function on a system of its own.
//!
//! Steps: the registered clusters (and a registration's answer); a project on each cluster; the
//! reference App (a Postgres addon and a web workload reading `DATABASE_URL` from it) Running;
//! its history; an image change as a new deployment; a rollback; the Deployment scaled and the
//! Service's port changed behind kubenest's back, each drift reported on the event stream and
//! healed; pause and resume; on a
//! cluster with a real node, the demo App answering HTTP from real containers ([`demo`]), and
//! HTTPS through the node's ingress controller with a certificate from the project's CA, and a
//! bad change of it judged on the cluster and rolled back by kubenest ([`verified`]); a Git
//! workload built there; a Helm chart workload paused and resumed there ([`chart`]); delete.
//! Every step checks the workload cluster itself too, not only what the API says.

use std::collections::BTreeMap;
use std::time::Instant;

use anyhow::Context as _;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::Service;
use kube::api::{Api, Patch, PatchParams};
use serde_json::{Value, json};

use kubenest_cli::api;
use kubenest_cli::cmd::{Table, text};

mod chart;
pub mod demo;
mod env;
mod events;
mod ingress;
mod printer;
pub mod verified;
mod watch;

pub use env::DevEnv;
pub use events::{Event, EventStream};
pub use printer::Printer;
use watch::STEP;
use watch::{eventually, history, running};

/// The reference App: a Postgres addon and a web workload whose `DATABASE_URL` is the addon's
/// `dsn` export, wired on the cluster (the password never leaves it).
pub fn reference_app(project_id: &str, image: &str) -> Value {
    json!({
        "project_id": project_id,
        "name": "shop",
        "components": [
            {"name": "db", "type": "addon", "addon_spec": {"definition": "postgres"}},
            {"name": "web", "type": "workload", "workload_spec": {
                "image": image, "replicas": 2, "port": 8080,
                "env": [{"name": "DATABASE_URL", "export_ref": {"component": "db", "export": "dsn"}}]
            }}
        ]
    })
}

/// Runs the tour against the environment `env` describes.
pub async fn run(env: &DevEnv, out: &mut Printer) -> anyhow::Result<()> {
    let started = Instant::now();
    let mut client = api::Client::with_ca(&env.api, env.ca_file.as_deref())?;
    client.login(&env.admin_user, &env.admin_password).await?;
    out.line(format!(
        "kubenest tour against {} as {} (organization {})",
        env.api, env.admin_user, env.org
    ));
    let suffix = &uuid::Uuid::new_v4().simple().to_string()[..6];

    // 1. Clusters.
    out.step(
        1,
        "clusters: registered through the API, their agents dialled out to the hub",
    );
    let clusters = client
        .get(&format!("/api/v1/orgs/{}/clusters", env.org))
        .await?;
    let mut table = Table::new(["NAME", "ID", "STATE", "NODES", "CPU CORES", "HEARTBEAT"]);
    for (name, (id, _)) in &env.clusters {
        let cluster = eventually(&format!("cluster {name} connected"), async || {
            let cluster = client.get(&format!("/api/v1/clusters/{id}")).await?;
            Ok(if cluster["state"] == "connected" {
                Ok(cluster)
            } else {
                Err(cluster.to_string())
            })
        })
        .await?;
        table.push(vec![
            name.clone(),
            id.clone(),
            text(&cluster["state"]),
            text(&cluster["node_count"]),
            text(&cluster["cpu_total"]),
            text(&cluster["last_heartbeat"]),
        ]);
    }
    out.table(&table);
    anyhow::ensure!(
        clusters.as_array().map_or(0, Vec::len) >= env.clusters.len(),
        "the API lists fewer clusters than dev.env: {clusters}"
    );
    let demo = format!("demo-{suffix}");
    let registration = client
        .post(
            &format!("/api/v1/orgs/{}/clusters", env.org),
            &json!({"name": demo}),
        )
        .await?;
    out.line(format!(
        "   registering another cluster answers its id, a connection token (version {}) and:",
        text(&registration["token_version"])
    ));
    out.line(format!(
        "     {}",
        text(&registration["helm_install_command"])
            .replace(text(&registration["connection_token"]).as_str(), "<token>")
    ));
    let demo_id = text(&registration["cluster_id"]);
    let pending = client.get(&format!("/api/v1/clusters/{demo_id}")).await?;
    out.line(format!(
        "   {demo} is {} until an agent connects with that token; deleted again",
        text(&pending["state"])
    ));
    client
        .delete(&format!("/api/v1/clusters/{demo_id}"))
        .await?;

    // 2. A project on each cluster.
    out.step(2, "a project on each cluster");
    let mut projects = BTreeMap::new();
    for (name, (cluster_id, _)) in &env.clusters {
        let project_name = format!("tour-{name}-{suffix}");
        let project = client
            .post(
                &format!("/api/v1/orgs/{}/projects", env.org),
                &json!({"name": project_name, "cluster_id": cluster_id}),
            )
            .await?;
        projects.insert(name.clone(), (text(&project["id"]), project_name));
    }
    for (cluster, (id, name)) in &projects {
        let project = eventually(&format!("project {name} Ready"), async || {
            let project = client.get(&format!("/api/v1/projects/{id}")).await?;
            Ok(if project["phase"] == "Ready" {
                Ok(project)
            } else {
                Err(project.to_string())
            })
        })
        .await?;
        out.line(format!(
            "   project {name} on {cluster}: namespace {} is {} (confirmed by the agent)",
            text(&project["namespace"]),
            text(&project["phase"])
        ));
    }

    // 3. The reference App on the first cluster.
    let (cluster, (_, kubeconfig)) = env
        .clusters
        .iter()
        .next()
        .context("dev.env names no workload cluster")?;
    let project_id = projects[cluster].0.clone();
    let project = client
        .get(&format!("/api/v1/projects/{project_id}"))
        .await?;
    let namespace = text(&project["namespace"]);
    let workload = kubenest_runtime::kube::client(Some(kubeconfig)).await?;
    let deployments: Api<Deployment> = Api::namespaced(workload.clone(), &namespace);

    out.step(
        3,
        &format!("the reference App on {cluster}: Postgres + a web workload reading DATABASE_URL"),
    );
    let created = client
        .post("/api/v1/apps", &reference_app(&project_id, "nginx:1.27"))
        .await?;
    let app_id = text(&created["id"]);
    out.line(format!(
        "   POST /api/v1/apps → {} ({app_id})",
        text(&created["phase"])
    ));
    let app = running(&mut client, &app_id, None, out).await?;
    for component in app["component_status"].as_array().into_iter().flatten() {
        out.line(format!(
            "   component {}: {}/{} ready",
            text(&component["name"]),
            text(&component["ready_replicas"]),
            text(&component["desired_replicas"])
        ));
    }
    let web = deployments.get("shop-web").await?;
    let env_var = web
        .spec
        .as_ref()
        .and_then(|s| s.template.spec.as_ref())
        .and_then(|s| s.containers.first())
        .and_then(|c| c.env.as_ref())
        .and_then(|e| e.iter().find(|v| v.name == "DATABASE_URL"))
        .and_then(|v| v.value_from.as_ref())
        .and_then(|f| f.secret_key_ref.as_ref())
        .map(|r| format!("Secret {} key {}", r.name, r.key))
        .context("the web Deployment does not read DATABASE_URL from a Secret")?;
    out.line(format!(
        "   on {cluster}: Deployment {namespace}/shop-web reads DATABASE_URL from {env_var}"
    ));

    // 4. History.
    out.step(4, "history: every change is a recorded deployment");
    let first_deployment = history(&mut client, &app_id, out, 1).await?;

    // 5. A change.
    out.step(5, "change the image: a new deployment");
    let mut components = app["components"].clone();
    set_image(&mut components, "nginx:1.28")?;
    client
        .patch(
            &format!("/api/v1/apps/{app_id}"),
            &json!({"components": components}),
        )
        .await?;
    let changed = running(&mut client, &app_id, Some(&app), out).await?;
    let image = eventually("the new image on the cluster", async || {
        let image = image_of(&deployments.get("shop-web").await?);
        Ok(if image == "nginx:1.28" {
            Ok(image)
        } else {
            Err(image)
        })
    })
    .await?;
    out.line(format!("   on {cluster}: shop-web runs {image}"));
    history(&mut client, &app_id, out, 2).await?;

    // 6. Rollback.
    out.step(6, "roll back to the first deployment");
    client
        .post(
            &format!("/api/v1/apps/{app_id}/rollback"),
            &json!({"deployment_id": first_deployment}),
        )
        .await?;
    running(&mut client, &app_id, Some(&changed), out).await?;
    let image = eventually("the first image back on the cluster", async || {
        let image = image_of(&deployments.get("shop-web").await?);
        Ok(if image == "nginx:1.27" {
            Ok(image)
        } else {
            Err(image)
        })
    })
    .await?;
    out.line(format!("   on {cluster}: shop-web runs {image} again"));
    history(&mut client, &app_id, out, 3).await?;

    // 7. Drift.
    out.step(
        7,
        "change the Deployment and the Service behind kubenest's back: drift detected, then healed",
    );
    let mut stream = EventStream::open(&env.api, &client, &app_id).await?;
    deployments
        .patch(
            "shop-web",
            &PatchParams::apply("kubectl-scale").force(),
            &Patch::Apply(json!({
                "apiVersion": "apps/v1", "kind": "Deployment",
                "metadata": {"name": "shop-web"}, "spec": {"replicas": 5}
            })),
        )
        .await?;
    out.line(format!(
        "   kubectl scale deployment/shop-web --replicas=5 on {cluster} (field manager kubectl-scale)"
    ));
    let drift = stream
        .until(|event| event.kind == "app.drift" && event.data["drift_detected"] == true)
        .await?;
    print_drift(out, &drift);
    stream
        .until(|event| event.kind == "app.drift" && event.data["drift_detected"] == false)
        .await?;
    let replicas = eventually("replicas healed on the cluster", async || {
        let replicas = deployments
            .get("shop-web")
            .await?
            .spec
            .and_then(|s| s.replicas)
            .unwrap_or_default();
        Ok(if replicas == 2 {
            Ok(replicas)
        } else {
            Err(replicas.to_string())
        })
    })
    .await?;
    out.line(format!(
        "   event app.drift: in sync again; shop-web is back to {replicas} replicas"
    ));

    // Not only Deployments: the App's Service, its port changed by hand.
    let services: Api<Service> = Api::namespaced(workload.clone(), &namespace);
    services
        .patch(
            "shop-web",
            &PatchParams {
                field_manager: Some("kubectl-edit".into()),
                ..PatchParams::default()
            },
            &Patch::Merge(json!({"spec": {"ports": [
                {"name": "http", "port": 9090, "targetPort": 8080, "protocol": "TCP"}]}})),
        )
        .await?;
    out.line(format!(
        "   kubectl edit service/shop-web on {cluster}: port 8080 -> 9090 (field manager kubectl-edit)"
    ));
    let drift = stream
        .until(|event| {
            event.kind == "app.drift"
                && event.data["drift_details"]
                    .as_array()
                    .is_some_and(|d| d.iter().any(|d| d["resource"] == "Service/shop-web"))
        })
        .await?;
    print_drift(out, &drift);
    let port = eventually("the Service's port healed on the cluster", async || {
        let port = services
            .get("shop-web")
            .await?
            .spec
            .and_then(|s| s.ports)
            .and_then(|p| p.first().map(|p| p.port))
            .unwrap_or_default();
        Ok(if port == 8080 {
            Ok(port)
        } else {
            Err(port.to_string())
        })
    })
    .await?;
    out.line(format!(
        "   healed: Service shop-web serves port {port} again"
    ));
    drop(stream);

    // 8. Pause and resume.
    out.step(8, "pause and resume");
    client
        .post(&format!("/api/v1/apps/{app_id}/pause"), &json!({}))
        .await?;
    let paused = eventually("the App Paused and scaled to zero", async || {
        let app = client.get(&format!("/api/v1/apps/{app_id}")).await?;
        let replicas = deployments
            .get("shop-web")
            .await?
            .spec
            .and_then(|s| s.replicas)
            .unwrap_or(-1);
        Ok(if app["phase"] == "Paused" && replicas == 0 {
            Ok(app)
        } else {
            Err(format!("{} with {replicas} replicas", text(&app["phase"])))
        })
    })
    .await?;
    out.line(format!(
        "   {}: shop-web has 0 replicas on {cluster}",
        text(&paused["phase"])
    ));
    client
        .post(&format!("/api/v1/apps/{app_id}/resume"), &json!({}))
        .await?;
    running(&mut client, &app_id, Some(&paused), out).await?;
    let replicas = deployments
        .get("shop-web")
        .await?
        .spec
        .and_then(|s| s.replicas)
        .unwrap_or_default();
    out.line(format!(
        "   resumed: shop-web has {replicas} replicas again"
    ));

    // 9. The demo App on the real node, when there is one.
    let mut next = 9;
    if let Some((edge, image)) = &env.real_node {
        let demo_id = demo::on_real_node(&mut client, env, edge, image, &projects, out).await?;
        next += 1;
        // 10. A bad change of the demo judged on the cluster and rolled back by kubenest.
        out.step(
            next,
            "a bad change rolls itself back: judged on the cluster against the revision before",
        );
        verified::rolls_itself_back(&mut client, &env.api, &demo_id, out).await?;
        demo::deleted(&mut client, &demo_id, "demo", edge, out).await?;
        next += 1;
        // 11. A Git workload built there, when `make dev` runs a registry and a Git server.
        if let Some(builds) = &env.builds {
            let step = (next, edge.as_str());
            demo::built_from_git(&mut client, env, step, image, builds, &projects, out).await?;
            next += 1;
            // 12. A chart workload from its registry, paused and resumed.
            if let Some(repository) = &builds.chart_repository {
                let step = (next, edge.as_str());
                chart::paused_and_resumed(&mut client, env, step, repository, &projects, out)
                    .await?;
                next += 1;
            }
        }
    }

    // Last: delete.
    out.step(next, "delete the App, then the projects");
    client.delete(&format!("/api/v1/apps/{app_id}")).await?;
    kubenest_cli::cmd::wait_deleted(&mut client, &app_id, STEP).await?;
    eventually("the workload gone from the cluster", async || {
        Ok(match deployments.get_opt("shop-web").await? {
            None => Ok(()),
            Some(_) => Err("shop-web still exists".to_owned()),
        })
    })
    .await?;
    out.line(format!(
        "   App shop deleted; the agent removed its objects from {namespace} on {cluster}"
    ));
    for (id, name) in projects.values() {
        client.delete(&format!("/api/v1/projects/{id}")).await?;
        out.line(format!("   project {name} deleted"));
    }

    out.line("");
    out.line(format!(
        "tour finished in {:.1}s",
        started.elapsed().as_secs_f64()
    ));
    Ok(())
}

/// Prints each detail of an `app.drift` event: resource, field, values and manager.
fn print_drift(out: &mut Printer, drift: &Event) {
    for detail in drift.data["drift_details"].as_array().into_iter().flatten() {
        out.line(format!(
            "   event app.drift: {} {} desired {} observed {} (by {})",
            text(&detail["resource"]),
            text(&detail["field"]),
            text(&detail["desired"]),
            text(&detail["observed"]),
            text(&detail["manager"])
        ));
    }
}

fn set_image(components: &mut Value, image: &str) -> anyhow::Result<()> {
    let web = components
        .as_array_mut()
        .and_then(|c| c.iter_mut().find(|c| c["name"] == "web"))
        .context("the App has no web component")?;
    web["workload_spec"]["image"] = json!(image);
    Ok(())
}

fn image_of(deployment: &Deployment) -> String {
    deployment
        .spec
        .as_ref()
        .and_then(|s| s.template.spec.as_ref())
        .and_then(|s| s.containers.first())
        .and_then(|c| c.image.clone())
        .unwrap_or_default()
}
