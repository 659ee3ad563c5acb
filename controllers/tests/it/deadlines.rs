//! Progress deadlines against the whole management plane — every controller, a real hub
//! replica, the history on a real PostgreSQL server, a real management kube-apiserver — with a
//! scripted agent speaking the real protocol over a real socket. A deadline that passes before
//! the cluster got a change names the delay and never ends the intent; a change the cluster got
//! but never made ready ends `Failed` with the reason: Apps, standalone addons and Projects.

use crate::common;

use std::time::Duration;

use crate::common::agent::Agent;
use crate::common::tenant::{reason, spec, tenant};
use crate::common::{eventually, eventually_within, shared_plane};
use kube::ResourceExt;
use kube::api::{Api, PostParams};
use kubenest_contracts::AddonPhase;
use kubenest_crds::addon::{AddonDefinition, AddonInstance};
use kubenest_crds::app::App;
use kubenest_crds::cluster::{Cluster, ClusterState};
use kubenest_crds::project::{Project, ProjectPhase};
use kubenest_store::DeploymentStatus;

/// The `Ready` condition's reason of `conditions`.
fn ready_reason(conditions: &[k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition]) -> &str {
    conditions
        .iter()
        .find(|c| c.type_ == "Ready")
        .map_or("", |c| c.reason.as_str())
}

#[tokio::test]
async fn a_revision_whose_deadline_passes_before_delivery_runs_once_the_cluster_returns() {
    let t = tenant("late").await;
    t.project("shop", "shop").await;
    // Heartbeat so the cluster is connected, then the agent goes away.
    t.agent.send(kubenest_contracts::Heartbeat {
        node_count: 3,
        cpu_allocatable_millis: 12000,
        cpu_requested_millis: 100,
        memory_allocatable_bytes: 1 << 34,
        memory_requested_bytes: 1 << 30,
        observed_at: chrono::Utc::now(),
    });
    let clusters: Api<Cluster> = Api::namespaced(t.client.clone(), &t.namespace);
    eventually("connected", async || {
        clusters.get("east").await.unwrap().status.unwrap().state == ClusterState::Connected
    })
    .await;
    t.agent.disconnect();
    eventually_within(
        "disconnected once the session is gone",
        Duration::from_secs(30),
        async || {
            clusters.get("east").await.unwrap().status.unwrap().state == ClusterState::Disconnected
        },
    )
    .await;

    let mut app = App::new("web", spec("shop", "nginx:1.27"));
    app.spec.progress_deadline_seconds = 10;
    t.apps().create(&PostParams::default(), &app).await.unwrap();
    let pending = t
        .until("web", Duration::from_secs(15), |s| {
            s.phase.as_deref() == Some("Pending")
        })
        .await;
    assert!(
        reason(&pending, "Progressing").starts_with("ClusterUnreachable"),
        "{}",
        reason(&pending, "Progressing")
    );
    // The deadline passes: the delay is named, and nothing is final.
    let delayed = t
        .until("web", Duration::from_secs(40), |s| {
            ready_reason(&s.conditions) == "DeliveryDelayed" || s.phase.as_deref() == Some("Failed")
        })
        .await;
    let status = delayed.status.clone().unwrap();
    assert_eq!(
        status.phase.as_deref(),
        Some("Pending"),
        "{}",
        reason(&delayed, "Ready")
    );
    assert!(
        reason(&delayed, "Progressing").starts_with("ClusterUnreachable"),
        "{}",
        reason(&delayed, "Progressing")
    );
    let uid = delayed.uid().unwrap();
    let history = t.history.app_history(&t.org, &uid, 10).await.unwrap();
    assert_eq!(history.len(), 1);
    assert_eq!(history[0].status, DeploymentStatus::Pending);

    // The cluster comes back: the revision is delivered after all, runs, and is recorded once.
    let plane = shared_plane().await;
    let token = common::credentials(&t.client, &t.namespace, "east").await;
    let agent = Agent::connect_eventually(&plane.hub_url, &token).await;
    let running = t.running("web").await;
    assert_eq!(reason(&running, "Ready").split(':').next(), Some("Running"));
    let mut history = Vec::new();
    eventually("the deployment's outcome", async || {
        history = t.history.app_history(&t.org, &uid, 10).await.unwrap();
        history[0].status != DeploymentStatus::Pending
    })
    .await;
    assert_eq!(history.len(), 1);
    assert_eq!(history[0].status, DeploymentStatus::Succeeded);
    assert!(agent.count("app.deploy") >= 1);
}

#[tokio::test]
async fn a_standalone_addon_whose_chart_never_becomes_ready_fails_at_its_deadline() {
    let t = tenant("stuckaddon").await;
    t.project("data", "data").await;
    t.agent.behave(|b| b.addon_phase = AddonPhase::Installing);
    let definition: AddonDefinition = serde_json::from_value(serde_json::json!({
        "apiVersion": "kubenest.io/v1alpha1", "kind": "AddonDefinition",
        "metadata": {"name": "redis"},
        "spec": {"displayName": "Redis", "chart": {"repository": "charts/addons", "name": "redis", "version": "1.0.0"},
                 "exports": {"host": "host", "port": "port"}}
    }))
    .unwrap();
    Api::<AddonDefinition>::namespaced(t.client.clone(), &t.namespace)
        .create(&PostParams::default(), &definition)
        .await
        .unwrap();
    let addons: Api<AddonInstance> = Api::namespaced(t.client.clone(), &t.namespace);
    let addon: AddonInstance = serde_json::from_value(serde_json::json!({
        "apiVersion": "kubenest.io/v1alpha1", "kind": "AddonInstance",
        "metadata": {"name": "cache"},
        "spec": {"project": "data", "definition": "redis", "progressDeadlineSeconds": 10}
    }))
    .unwrap();
    addons.create(&PostParams::default(), &addon).await.unwrap();
    let mut seen = Vec::new();
    let mut last = None;
    eventually_within("the addon Failed", Duration::from_secs(45), async || {
        let status = addons
            .get("cache")
            .await
            .unwrap()
            .status
            .unwrap_or_default();
        if let Some(phase) = &status.phase
            && seen.last() != Some(phase)
        {
            seen.push(phase.clone());
        }
        let failed = status.phase.as_deref() == Some("Failed");
        last = Some(status);
        failed
    })
    .await;
    let status = last.unwrap();
    assert!(seen.contains(&"Installing".to_owned()), "{seen:?}");
    assert_eq!(ready_reason(&status.conditions), "ProgressDeadlineExceeded");
    let uid = addons.get("cache").await.unwrap().uid().unwrap();
    let revisions = t.history.addon_revisions(&t.org, &uid).await.unwrap();
    assert_eq!(revisions.len(), 1);
    assert_eq!(revisions[0].status, "failed", "{:?}", revisions[0]);
    assert!(
        revisions[0].message.contains("within 10s"),
        "{}",
        revisions[0].message
    );
}

#[tokio::test]
async fn a_project_whose_namespace_is_never_confirmed_fails_at_its_deadline() {
    let t = tenant("stuckns").await;
    t.agent.behave(|b| b.confirm_projects = false);
    let project: Project = serde_json::from_value(serde_json::json!({
        "apiVersion": "kubenest.io/v1alpha1", "kind": "Project",
        "metadata": {"name": "shop"},
        "spec": {"cluster": "east", "namespace": "shop", "progressDeadlineSeconds": 10}
    }))
    .unwrap();
    t.projects()
        .create(&PostParams::default(), &project)
        .await
        .unwrap();
    let failed = t
        .until_project("shop", |s| s.phase == ProjectPhase::Failed)
        .await;
    let status = failed.status.unwrap();
    assert_eq!(ready_reason(&status.conditions), "ProgressDeadlineExceeded");
    assert_eq!(status.ensured_generation, Some(1), "the agent had it");
    // Failed is not a dead end: the namespace is still asked for, and confirmed late it is Ready.
    t.agent.behave(|b| b.confirm_projects = true);
    eventually_within("the project Ready", Duration::from_secs(60), async || {
        let status = t.projects().get("shop").await.unwrap().status.unwrap();
        status.phase == ProjectPhase::Ready
    })
    .await;
}
