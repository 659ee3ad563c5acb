//! Two hub replicas against a real management kube-apiserver: each records its agent sessions
//! as Leases, commands route through the replica that holds the cluster, and when that replica
//! dies the agent reconnects to the other and routing resumes there.

use crate::common;

use std::time::Duration;

use crate::common::*;
use k8s_openapi::api::coordination::v1::Lease;
use kube::Api;
use kubenest_contracts::Message;
use kubenest_contracts::names::lease::ADDRESS_ANNOTATION;
use kubenest_hub::leases::lease_name;

/// Waits until the cluster's session Lease names `replica` (or is gone, for `None`).
async fn lease_holder_becomes(
    leases: &Api<Lease>,
    name: &str,
    replica: Option<&str>,
) -> Option<Lease> {
    for _ in 0..100 {
        let lease = leases.get_opt(name).await.unwrap();
        let holder = lease
            .as_ref()
            .and_then(|l| l.spec.as_ref()?.holder_identity.clone());
        if holder.as_deref() == replica {
            return lease;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("lease {name} never held by {replica:?}");
}

#[tokio::test]
async fn two_replicas_route_through_the_lease_holder_and_fail_over() {
    let mgmt = kubenest_testkit::shared_management().await.unwrap();
    let ns = mgmt.test_namespace("hub-leases").await.unwrap();
    let keys = keys();
    let kubeconfig = format!("--kubeconfig={}", mgmt.kubeconfig_path().display());
    let namespace = format!("--lease-namespace={}", ns.name());
    let hub_a = start_hub(&keys, &[&kubeconfig, &namespace, "--replica=hub-a"]).await;
    let hub_b = start_hub(&keys, &[&kubeconfig, &namespace, "--replica=hub-b"]).await;

    // The controllers keep a backend session on every replica and push floors to each.
    let mut backend_a = connect(&hub_a.url, BACKEND, &keys.backend()).await;
    let mut backend_b = connect(&hub_b.url, BACKEND, &keys.backend()).await;
    for backend in [&mut backend_a, &mut backend_b] {
        backend
            .send(&floors_snapshot(vec![floor("c1", "acme", 1)]))
            .await;
    }
    tokio::time::sleep(Duration::from_millis(100)).await;

    let token = keys.cluster("c1", "acme", 1);
    let mut agent = connect(&hub_a.url, AGENT, &token).await;
    let leases: Api<Lease> = Api::namespaced(ns.client(), ns.name());
    let name = lease_name(&"c1".into());
    let lease = lease_holder_becomes(&leases, &name, Some("hub-a"))
        .await
        .unwrap();
    let address = lease.metadata.annotations.unwrap()[ADDRESS_ANNOTATION].clone();
    assert_eq!(
        format!("{address}/v1/connect"),
        hub_a.url,
        "the lease must say where hub-a is"
    );

    // Routed through the holder; the other replica has no session for c1.
    let command = command("c1", "acme");
    backend_a.send(&command).await;
    assert_eq!(agent.frame().await, command);
    assert!(matches!(
        route_reply(&mut backend_a, &command).await,
        Message::RouteAck(_)
    ));
    let elsewhere = common::command("c1", "acme");
    backend_b.send(&elsewhere).await;
    assert!(matches!(
        route_reply(&mut backend_b, &elsewhere).await,
        Message::RouteNack(_)
    ));

    // hub-a goes away: its agent is told so, reconnects to hub-b, which takes the lease.
    hub_a.shutdown.cancel();
    assert_eq!(agent.closed(Duration::from_secs(5)).await, Some(1001));
    let mut agent = connect(&hub_b.url, AGENT, &token).await;
    lease_holder_becomes(&leases, &name, Some("hub-b")).await;

    let again = common::command("c1", "acme");
    backend_b.send(&again).await;
    assert_eq!(agent.frame().await, again);
    assert!(matches!(
        route_reply(&mut backend_b, &again).await,
        Message::RouteAck(_)
    ));

    // A clean disconnect releases the lease.
    drop(agent);
    lease_holder_becomes(&leases, &name, None).await;
}
