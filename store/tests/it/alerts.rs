//! The alerts table against a real PostgreSQL server, a fresh database per test.

use kubenest_store::*;

async fn alerts(prefix: &str) -> Alerts {
    let postgres = kubenest_testkit::shared_postgres().await.unwrap();
    let db = postgres.fresh_database(prefix).await.unwrap();
    Database::connect(&DatabaseUrl::new(db.url), 4)
        .await
        .unwrap()
        .alerts()
}

fn silent(org: &str, cluster: &str) -> NewAlert {
    NewAlert {
        org_id: org.into(),
        kind: "heartbeat_missed".into(),
        severity: "critical".into(),
        subject_kind: "cluster".into(),
        subject_id: format!("uid-{cluster}"),
        subject_name: cluster.into(),
        cluster_id: Some(format!("uid-{cluster}")),
        project_id: None,
        message: "no report since 10:00".into(),
    }
}

#[tokio::test]
async fn one_alert_is_open_per_subject_and_kind_until_it_is_resolved() {
    let a = alerts("alerts_open").await;
    let first = a.open(&silent("acme", "east")).await.unwrap().unwrap();
    assert_eq!(first.state(), AlertState::Open);
    assert!(
        a.open(&silent("acme", "east")).await.unwrap().is_none(),
        "opened twice"
    );
    assert_eq!(a.unresolved().await.unwrap(), vec![first.clone()]);

    let resolved = a
        .resolve("uid-east", "heartbeat_missed", "the cluster reports again")
        .await
        .unwrap()
        .unwrap();
    assert_eq!(resolved.id, first.id);
    assert_eq!(resolved.state(), AlertState::Resolved);
    assert_eq!(
        resolved.resolution.as_deref(),
        Some("the cluster reports again")
    );
    assert!(
        a.resolve("uid-east", "heartbeat_missed", "again")
            .await
            .unwrap()
            .is_none()
    );
    assert!(a.unresolved().await.unwrap().is_empty());

    // The next silence is a new alert.
    let second = a.open(&silent("acme", "east")).await.unwrap().unwrap();
    assert_ne!(second.id, first.id);
}

#[tokio::test]
async fn an_acknowledgement_keeps_who_came_first_and_each_organization_sees_its_own() {
    let a = alerts("alerts_ack").await;
    let east = a.open(&silent("acme", "east")).await.unwrap().unwrap();
    let west = a.open(&silent("globex", "west")).await.unwrap().unwrap();

    let acked = a.acknowledge("acme", east.id, "alice").await.unwrap();
    assert_eq!(acked.state(), AlertState::Acknowledged);
    assert_eq!(acked.acknowledged_by.as_deref(), Some("alice"));
    let again = a.acknowledge("acme", east.id, "bob").await.unwrap();
    assert_eq!(again.acknowledged_by.as_deref(), Some("alice"));
    assert_eq!(again.acknowledged_at, acked.acknowledged_at);

    assert!(matches!(
        a.acknowledge("acme", west.id, "alice").await,
        Err(StoreError::NotFound)
    ));
    assert!(matches!(
        a.get("acme", west.id).await,
        Err(StoreError::NotFound)
    ));
    let listed = a.list("acme", None, 100).await.unwrap();
    assert_eq!(listed.iter().map(|x| x.id).collect::<Vec<_>>(), [east.id]);
    assert!(
        a.list("acme", Some(AlertState::Open), 100)
            .await
            .unwrap()
            .is_empty()
    );
    assert_eq!(
        a.list("acme", Some(AlertState::Acknowledged), 100)
            .await
            .unwrap()
            .len(),
        1
    );
    a.resolve("uid-east", "heartbeat_missed", "back")
        .await
        .unwrap();
    assert_eq!(
        a.list("acme", Some(AlertState::Resolved), 100)
            .await
            .unwrap()[0]
            .id,
        east.id
    );
    assert_eq!(
        a.list("globex", Some(AlertState::Open), 100).await.unwrap()[0].id,
        west.id
    );
}
