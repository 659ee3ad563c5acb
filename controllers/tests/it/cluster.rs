//! The Cluster controller on a real management kube-apiserver: a registered cluster gets a
//! token the hub will accept, rotation re-mints it, and deletion waits for its projects.

use crate::common;

use std::time::Duration;

use crate::common::eventually;
use k8s_openapi::api::core::v1::Secret;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use kube::{Client, ResourceExt};
use kubenest_contracts::{ClientType, Id, Identity, TokenVerifier};
use kubenest_controllers::cluster;
use kubenest_crds::cluster::Cluster;
use kubenest_crds::project::{Project, ProjectSpec};

async fn setup(client: &Client) -> &'static TokenVerifier {
    common::install(client).await;
    common::shared_controllers().await
}

async fn token(secrets: &Api<Secret>, name: &str) -> Option<String> {
    let secret = secrets
        .get_opt(&cluster::token_secret_name(name))
        .await
        .unwrap()?;
    let bytes = secret.data?.get("token")?.0.clone();
    Some(String::from_utf8(bytes).unwrap())
}

/// The cluster's id (its uid), once the Cluster controller has recorded it in the status.
async fn cluster_id(clusters: &Api<Cluster>, name: &str) -> String {
    eventually("the cluster id", async || {
        clusters
            .get(name)
            .await
            .unwrap()
            .status
            .and_then(|s| s.cluster_id)
            .is_some()
    })
    .await;
    clusters.get(name).await.unwrap().uid().unwrap()
}

/// A heartbeat observed now: `nodes` nodes of 4 CPUs and 8 GiB, `cpu_used` millicores requested.
fn heartbeat(nodes: u32, cpu_used: u64) -> kubenest_contracts::Heartbeat {
    kubenest_contracts::Heartbeat {
        node_count: nodes,
        cpu_allocatable_millis: u64::from(nodes) * 4000,
        cpu_requested_millis: cpu_used,
        memory_allocatable_bytes: u64::from(nodes) << 33,
        memory_requested_bytes: 1 << 30,
        observed_at: chrono::Utc::now(),
    }
}

#[tokio::test]
async fn a_cluster_gets_a_hub_token_rotation_remints_it_and_deletion_waits_for_projects() {
    let mgmt = kubenest_testkit::shared_management().await.unwrap();
    let client = mgmt.client().await.unwrap();
    let verifier = setup(&client).await;

    let (org, namespace, clusters) = common::org_with_cluster(&client, "acme", "east").await;
    let secrets: Api<Secret> = Api::namespaced(client.clone(), &namespace);
    eventually("the token secret", async || {
        token(&secrets, "east").await.is_some()
    })
    .await;

    let uid = clusters.get("east").await.unwrap().uid().unwrap();
    let first = token(&secrets, "east").await.unwrap();
    assert_eq!(
        verifier.verify(&first, ClientType::Cluster).unwrap(),
        Identity::Cluster {
            cluster_id: Id::new(&uid),
            org_id: Id::new(&org),
            token_version: 1
        }
    );
    eventually("status with the cluster id", async || {
        let status = clusters
            .get("east")
            .await
            .unwrap()
            .status
            .unwrap_or_default();
        status.cluster_id.as_deref() == Some(uid.as_str()) && status.issued_token_version == Some(1)
    })
    .await;

    // Rotation: raising tokenVersion re-mints the token at the new version.
    let rotate = serde_json::json!({ "spec": { "tokenVersion": 2 } });
    clusters
        .patch("east", &PatchParams::default(), &Patch::Merge(&rotate))
        .await
        .unwrap();
    eventually("a rotated token", async || {
        token(&secrets, "east").await.is_some_and(|t| t != first)
    })
    .await;
    let rotated = token(&secrets, "east").await.unwrap();
    assert!(matches!(
        verifier.verify(&rotated, ClientType::Cluster).unwrap(),
        Identity::Cluster {
            token_version: 2,
            ..
        }
    ));

    // Deletion waits while a project uses the cluster, and says why.
    let projects: Api<Project> = Api::namespaced(client.clone(), &namespace);
    let project = ProjectSpec {
        cluster: "east".into(),
        namespace: "storefront".into(),
        registry_secret: None,
        ingress_ca: false,
        members: vec![],
        progress_deadline_seconds: 600,
        pod_security: None,
        quota: None,
        defaults: None,
        network: None,
    };
    projects
        .create(&PostParams::default(), &Project::new("storefront", project))
        .await
        .unwrap();
    clusters
        .delete("east", &DeleteParams::default())
        .await
        .unwrap();
    eventually("the deletion to be blocked", async || {
        let status = clusters
            .get("east")
            .await
            .unwrap()
            .status
            .unwrap_or_default();
        status.conditions.iter().any(|c| {
            c.type_ == kubenest_crds::names::conditions::DELETION_BLOCKED
                && c.message.contains("storefront")
        })
    })
    .await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert!(
        clusters.get_opt("east").await.unwrap().is_some(),
        "deleted while a project uses it"
    );

    projects
        .delete("storefront", &DeleteParams::default())
        .await
        .unwrap();
    eventually("the cluster to go", async || {
        clusters.get_opt("east").await.unwrap().is_none()
    })
    .await;
}

#[tokio::test]
async fn heartbeats_connect_a_cluster_and_silence_turns_its_checks_unknown() {
    use kubenest_controllers::cluster::health;
    use kubenest_crds::cluster::{CheckStatus, ClusterState};

    let mgmt = kubenest_testkit::shared_management().await.unwrap();
    let client = mgmt.client().await.unwrap();
    setup(&client).await;
    let (_org, _namespace, clusters) = common::org_with_cluster(&client, "initech", "west").await;
    let uid = cluster_id(&clusters, "west").await;

    let beat = heartbeat(3, 3000);
    assert!(
        health::record_heartbeat(&client, &uid, &beat)
            .await
            .unwrap()
    );
    assert!(
        !health::record_heartbeat(&client, "no-such-cluster", &beat)
            .await
            .unwrap()
    );
    let status = clusters.get("west").await.unwrap().status.unwrap();
    assert_eq!(status.state, ClusterState::Connected);
    assert_eq!(status.capacity.unwrap().cpu_used_millis, 3000);
    assert!(status.health.iter().all(|c| c.status == CheckStatus::Ok));

    // Two minutes of silence later (a 90 s window), nothing is known any more, and it says so.
    let later = beat.observed_at + chrono::Duration::seconds(120);
    health::sweep(&client, later, chrono::Duration::seconds(90))
        .await
        .unwrap();
    let status = clusters.get("west").await.unwrap().status.unwrap();
    assert!(
        status
            .health
            .iter()
            .all(|c| c.status == CheckStatus::Unknown)
    );
    assert!(status.conditions.iter().any(|c| c.type_
        == kubenest_crds::names::conditions::HEARTBEAT_MISSED
        && c.reason == "Critical"));
    // The token controller's own status writes leave fleet health alone.
    assert_eq!(status.issued_token_version, Some(1));
}
