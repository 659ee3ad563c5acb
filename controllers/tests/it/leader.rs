//! Leader election between two real `kubenest-controllers` processes on a real management
//! kube-apiserver: one leads, the other takes over when the leader is killed (well under 20 s),
//! and the new leader really runs the controllers.

use crate::common;

use std::process::Command;
use std::time::{Duration, Instant};

use crate::common::eventually_within;
use k8s_openapi::api::coordination::v1::Lease;
use kube::api::Api;
use kubenest_testkit::ManagedProcess;

async fn holder(leases: &Api<Lease>) -> Option<String> {
    leases
        .get_opt("kubenest-controllers")
        .await
        .unwrap()?
        .spec?
        .holder_identity
        .filter(|h| !h.is_empty())
}

#[tokio::test]
async fn a_standby_replica_takes_over_when_the_leader_dies() {
    // A management cluster of its own: these replicas are whole controllers, and the shared
    // cluster already has the plane's (one set per management cluster, as in production).
    let env = kubenest_testkit::Environment::builder()
        .management("leader")
        .start()
        .await
        .unwrap();
    let mgmt = env.management().unwrap();
    let client = mgmt.client().await.unwrap();
    common::install(&client).await;
    let ns = mgmt.test_namespace("leader").await.unwrap();
    let postgres = kubenest_testkit::shared_postgres().await.unwrap();
    let db = postgres.fresh_database("leader").await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let key = rcgen::KeyPair::generate_for(&rcgen::PKCS_ED25519).unwrap();
    std::fs::write(dir.path().join("signing.pem"), key.serialize_pem()).unwrap();

    let replica = |identity: &str| {
        let mut command = Command::new(env!("CARGO_BIN_EXE_kubenest-controllers"));
        command
            .arg(format!("--kubeconfig={}", mgmt.kubeconfig_path().display()))
            .arg(format!("--database-url={}", db.url))
            // No hub runs here: the hub client keeps retrying, which leadership does not need.
            .arg("--hub-url=ws://127.0.0.1:9/v1/connect")
            .arg(format!(
                "--signing-key={}",
                dir.path().join("signing.pem").display()
            ))
            .arg(format!("--session-namespace={}", ns.name()))
            .arg(format!("--system-namespace={}", ns.name()))
            .arg(format!("--identity={identity}"))
            // Several replicas on one host: each admin endpoint on a port of its own.
            .arg("--admin-listen=127.0.0.1:0")
            .env("RUST_LOG", "info");
        ManagedProcess::spawn(
            identity,
            command,
            dir.path().join(format!("{identity}.log")),
        )
        .unwrap()
    };
    let leases: Api<Lease> = Api::namespaced(client.clone(), ns.name());
    let first = replica("replica-a");
    eventually_within("replica-a to lead", Duration::from_secs(30), async || {
        holder(&leases).await.as_deref() == Some("replica-a")
    })
    .await;
    let mut second = replica("replica-b");
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert_eq!(
        holder(&leases).await.as_deref(),
        Some("replica-a"),
        "one leader at a time"
    );

    // The leader dies without stepping down.
    let killed = Command::new("kill")
        .args(["-9", &first.pid().to_string()])
        .status()
        .unwrap();
    assert!(killed.success());
    let died = Instant::now();
    eventually_within(
        "replica-b to take over",
        Duration::from_secs(20),
        async || holder(&leases).await.as_deref() == Some("replica-b"),
    )
    .await;
    let failover = died.elapsed();
    println!("failover took {failover:?}");
    assert!(failover < Duration::from_secs(20));

    // The new leader runs the controllers: an organization gets its namespace.
    common::organization(&client, "lead").await;

    // A clean stop hands the lease back at once.
    second.terminate();
    let stopping = Instant::now();
    eventually_within("the lease released", Duration::from_secs(30), async || {
        holder(&leases).await.is_none()
    })
    .await;
    println!("released {:?} after SIGTERM", stopping.elapsed());
    second.stop();
}
