//! The whole delivery path with real parts only: the management plane (every controller, the
//! history in PostgreSQL, a hub replica) on a management kube-apiserver, and the real agent on a
//! workload cluster with kwok nodes, registered with the token the Cluster controller minted.
//! An App created with kubectl-style writes ends up Running on the cluster, with its history.

use crate::common;

use std::time::Duration;

use crate::common::eventually;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::ResourceExt;
use kube::api::{Api, Patch, PatchParams, PostParams};
use kube::runtime::wait::{await_condition, conditions};
use kubenest_crds::app::App;
use kubenest_crds::cluster::Cluster;
use kubenest_crds::project::Project;
use kubenest_store::{DatabaseUrl, DeploymentStatus, History};
use serde_json::json;
use tokio_util::sync::CancellationToken;

const LONG: Duration = Duration::from_secs(120);

async fn install(client: &kube::Client) {
    kubenest_controllers::ensure_crds(client).await.unwrap();
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    for crd in kubenest_crds::all() {
        let name = crd.metadata.name.unwrap();
        let established = await_condition(crds.clone(), &name, conditions::is_crd_established());
        tokio::time::timeout(Duration::from_secs(30), established)
            .await
            .unwrap()
            .unwrap();
    }
    kubenest_controllers::rbac::ensure_cluster_roles(client)
        .await
        .unwrap();
}

fn apply<K>(object: serde_json::Value) -> K
where
    K: serde::de::DeserializeOwned,
{
    serde_json::from_value(object).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_app_applied_on_the_management_cluster_runs_on_its_cluster_through_the_real_agent() {
    let env = kubenest_testkit::shared().await.unwrap();
    let (mgmt, west) = (env.management().unwrap(), env.cluster("west").unwrap());
    let client = mgmt.client().await.unwrap();
    install(&client).await;
    common::system_namespace(&client).await;
    let database = env
        .postgres()
        .unwrap()
        .fresh_database("plane-agent")
        .await
        .unwrap();
    let history = History::connect(&DatabaseUrl::new(database.url.clone()), 4)
        .await
        .unwrap();

    let hub = common::Hub::prepare(mgmt);
    let (url, signer) = (hub.url.clone(), hub.signer.clone());
    let shutdown = CancellationToken::new();
    let _stop = shutdown.clone().drop_guard();
    hub.start(shutdown.clone());
    let config = kubenest_controllers::run::Config {
        client: client.clone(),
        history: history.clone(),
        hub_urls: vec![url.clone()],
        signer,
        session_namespace: common::SYSTEM.into(),
        system_namespace: common::SYSTEM.into(),
        heartbeat_window: chrono::Duration::seconds(90),
    };
    tokio::spawn(kubenest_controllers::run::run(config, shutdown.clone()));

    common::postgres_definition(&client).await;

    // An organization and its cluster; the agent connects with the minted token.
    let org = format!("e2e-{}", &uuid::Uuid::new_v4().simple().to_string()[..6]);
    Api::<kubenest_crds::organization::Organization>::all(client.clone())
        .create(
            &PostParams::default(),
            &apply(
                json!({"apiVersion": "kubenest.io/v1alpha1", "kind": "Organization",
                "metadata": {"name": org}, "spec": {"displayName": "E2E", "members": []}}),
            ),
        )
        .await
        .unwrap();
    let namespace = format!("org-{org}");
    let clusters = Api::<Cluster>::namespaced(client.clone(), &namespace);
    eventually("the organization's namespace", LONG, async || {
        clusters.list(&Default::default()).await.is_ok()
            && Api::<k8s_openapi::api::core::v1::Namespace>::all(client.clone())
                .get_opt(&namespace)
                .await
                .unwrap()
                .is_some()
    })
    .await;
    clusters
        .create(
            &PostParams::default(),
            &apply(
                json!({"apiVersion": "kubenest.io/v1alpha1", "kind": "Cluster",
                "metadata": {"name": "west"}, "spec": {"tokenVersion": 1}}),
            ),
        )
        .await
        .unwrap();
    let secrets = Api::<Secret>::namespaced(client.clone(), &namespace);
    let token_secret = kubenest_controllers::cluster::token_secret_name("west");
    let mut found = None;
    eventually("the cluster token", LONG, async || {
        found = secrets.get_opt(&token_secret).await.unwrap();
        found.is_some()
    })
    .await;
    let data = found.unwrap().data.unwrap();
    let text = |key: &str| String::from_utf8(data[key].0.clone()).unwrap();
    let bare = common::bare_repository();
    let agent = common::agent_config(
        west,
        &url,
        text("token"),
        &text("cluster-id"),
        &text("org-id"),
        &bare,
        "kubenest-agent-plane",
    )
    .await;
    tokio::spawn(kubenest_agent::run(agent, shutdown.clone()));
    eventually("the cluster connected", LONG, async || {
        clusters
            .get("west")
            .await
            .unwrap()
            .status
            .is_some_and(|s| s.state == kubenest_crds::cluster::ClusterState::Connected)
    })
    .await;

    // A project, then the reference App.
    let projects = Api::<Project>::namespaced(client.clone(), &namespace);
    let target_ns = format!("shop-{}", &uuid::Uuid::new_v4().simple().to_string()[..6]);
    projects
        .create(
            &PostParams::default(),
            &apply(
                json!({"apiVersion": "kubenest.io/v1alpha1", "kind": "Project",
                "metadata": {"name": "shop"},
                "spec": {"cluster": "west", "namespace": target_ns}}),
            ),
        )
        .await
        .unwrap();
    let apps = Api::<App>::namespaced(client.clone(), &namespace);
    apps.patch(
        "web",
        &PatchParams::apply("gitops").force(),
        &Patch::Apply(json!({"apiVersion": "kubenest.io/v1alpha1", "kind": "App",
            "metadata": {"name": "web"},
            "spec": {"project": "shop", "components": [
                {"name": "db", "addon": {"definition": "postgres"}},
                {"name": "web", "workload": {"image": "nginx:1.27", "replicas": 2, "port": 8080,
                    "env": [{"name": "DATABASE_URL", "exportRef": {"component": "db", "export": "dsn"}}]}}
            ]}})),
    )
    .await
    .unwrap();
    let mut app = None;
    eventually("the App Running", LONG, async || {
        app = apps.get_opt("web").await.unwrap();
        app.as_ref()
            .and_then(|a| a.status.as_ref())
            .is_some_and(|s| {
                s.phase.as_deref() == Some("Running") && s.observed_revision == s.revision
            })
    })
    .await;
    let app = app.unwrap();

    // On the workload cluster: the Deployment, Ready, wired to the export Secret.
    let west_client = west.client().await.unwrap();
    let web = Api::<Deployment>::namespaced(west_client.clone(), &target_ns)
        .get("web-web")
        .await
        .unwrap();
    assert_eq!(web.status.unwrap().ready_replicas, Some(2));
    let env = web.spec.unwrap().template.spec.unwrap().containers[0]
        .env
        .clone()
        .unwrap();
    let reference = env[0].value_from.clone().unwrap().secret_key_ref.unwrap();
    assert_eq!(reference.name, "web-db-exports");

    // In the history: one deployment, succeeded, by the GitOps field manager.
    let org_id = text("org-id");
    let rows = history
        .app_history(&org_id, &app.uid().unwrap(), 10)
        .await
        .unwrap();
    assert_eq!(rows.len(), 1, "{rows:#?}");
    assert_eq!(rows[0].status, DeploymentStatus::Succeeded);
    assert_eq!(rows[0].actor, "kubernetes:gitops");
    let cluster_id = text("cluster-id");
    assert!(
        common::committed(
            &bare,
            &format!("clusters/{cluster_id}/addons/{target_ns}-web-db/Chart.yaml")
        )
        .is_some()
    );
}
