//! The API's tables (users, refresh-token families, failed logins, the event log) against a real
//! PostgreSQL server, a fresh database per test.

use chrono::{Duration, Utc};
use kubenest_store::*;
use serde_json::json;

async fn database(prefix: &str) -> Database {
    let postgres = kubenest_testkit::shared_postgres().await.unwrap();
    let db = postgres.fresh_database(prefix).await.unwrap();
    Database::connect(&DatabaseUrl::new(db.url), 2)
        .await
        .unwrap()
}

#[tokio::test]
async fn a_second_user_of_the_same_name_is_refused_as_existing() {
    let users = database("store_users").await.users();
    let alice = users.create("alice", "hash-1", false).await.unwrap();
    assert_eq!(alice.password_hash, "hash-1");
    assert!(matches!(
        users.create("alice", "hash-2", true).await,
        Err(StoreError::UserExists)
    ));
    assert!(
        !users
            .create_admin_if_absent("alice", "hash-3")
            .await
            .unwrap()
    );
    assert!(
        users
            .create_admin_if_absent("root", "hash-4")
            .await
            .unwrap()
    );
    let names: Vec<String> = users
        .list()
        .await
        .unwrap()
        .into_iter()
        .map(|u| u.username)
        .collect();
    assert_eq!(names, ["alice", "root"]);
    let deleted = users.delete("alice").await.unwrap().unwrap();
    assert_eq!(deleted.id, alice.id);
    assert!(users.delete("alice").await.unwrap().is_none());
    assert_eq!(users.get("alice").await.unwrap(), None);
    // The same name again is another id.
    let again = users.create("alice", "hash-5", false).await.unwrap();
    assert_ne!(again.id, alice.id);
}

#[tokio::test]
async fn a_refresh_token_used_twice_revokes_its_family() {
    let db = database("store_refresh").await;
    let (users, tokens) = (db.users(), db.refresh_tokens());
    users.create("alice", "hash", true).await.unwrap();
    let later = Utc::now() + Duration::days(1);
    tokens.start_family(b"t1", "alice", later).await.unwrap();
    assert_eq!(
        tokens.rotate(b"t1", b"t2", later).await.unwrap(),
        Rotation::Rotated {
            username: "alice".into(),
            platform_admin: true
        }
    );
    assert!(matches!(
        tokens.rotate(b"t1", b"t3", later).await.unwrap(),
        Rotation::Reused { username, .. } if username == "alice"
    ));
    assert_eq!(
        tokens.rotate(b"t2", b"t4", later).await.unwrap(),
        Rotation::Invalid,
        "the successor of a reused token is revoked with its family"
    );
    assert_eq!(
        tokens.rotate(b"unknown", b"t5", later).await.unwrap(),
        Rotation::Invalid
    );

    // A new password ends every session; logging out ends the login's family.
    tokens.start_family(b"u1", "alice", later).await.unwrap();
    assert!(users.set_password_hash("alice", "new hash").await.unwrap());
    assert_eq!(
        tokens.rotate(b"u1", b"u2", later).await.unwrap(),
        Rotation::Invalid
    );
    tokens.start_family(b"v1", "alice", later).await.unwrap();
    tokens.revoke_family_of(b"v1").await.unwrap();
    assert_eq!(
        tokens.rotate(b"v1", b"v2", later).await.unwrap(),
        Rotation::Invalid
    );
    assert!(!users.set_password_hash("nobody", "hash").await.unwrap());
}

#[tokio::test]
async fn login_failures_are_counted_per_address_and_per_user_there_until_that_pair_is_cleared() {
    let failures = database("store_failures").await.login_failures();
    let since = Utc::now() - Duration::minutes(15);
    failures.record("alice", "10.0.0.1").await.unwrap();
    failures.record("alice", "10.0.0.1").await.unwrap();
    failures.record("alice", "10.0.0.2").await.unwrap();
    failures.record("bob", "10.0.0.1").await.unwrap();
    let counts = failures.since("alice", "10.0.0.1", since).await.unwrap();
    assert_eq!((counts.by_pair.count, counts.by_address.count), (2, 3));
    assert!(counts.by_address.oldest <= counts.by_pair.oldest);
    assert!(counts.by_pair.oldest.is_some());
    // Alice's failures elsewhere are not counted at another address.
    let elsewhere = failures.since("alice", "10.0.0.3", since).await.unwrap();
    assert_eq!(
        (elsewhere.by_pair.count, elsewhere.by_address.count),
        (0, 0)
    );
    assert_eq!(
        (elsewhere.by_pair.oldest, elsewhere.by_address.oldest),
        (None, None)
    );

    // Clearing one pair leaves alice's other address and bob's failures at hers.
    failures.clear("alice", "10.0.0.1").await.unwrap();
    let counts = failures.since("alice", "10.0.0.1", since).await.unwrap();
    assert_eq!((counts.by_pair.count, counts.by_address.count), (0, 1));
    assert_eq!(counts.by_pair.oldest, None);
    let other = failures.since("alice", "10.0.0.2", since).await.unwrap();
    assert_eq!(other.by_pair.count, 1);
    // Nothing before `since` counts.
    let later = failures.since("bob", "10.0.0.1", Utc::now()).await.unwrap();
    assert_eq!((later.by_pair.count, later.by_address.count), (0, 0));
}

#[tokio::test]
async fn events_are_stored_once_and_replayed_in_order_per_organization() {
    let log = database("store_events").await.event_log();
    assert_eq!(log.newest_id().await.unwrap(), 0);
    let event = |id: i64, org: &str| Event {
        id,
        org_id: org.into(),
        cluster_id: None,
        project_id: Some("p".into()),
        app_id: None,
        kind: "app.phase".into(),
        payload: json!({"phase": "Running"}),
        at: Utc::now(),
    };
    log.insert(&[event(7, "acme"), event(5, "acme"), event(6, "globex")])
        .await
        .unwrap();
    // Another replica storing the same id keeps the first row.
    let mut again = event(7, "acme");
    again.kind = "deployment".into();
    log.insert(&[again]).await.unwrap();
    assert_eq!(log.newest_id().await.unwrap(), 7);
    let page = log.after(0, &["acme".into()], 10).await.unwrap();
    let seen: Vec<(i64, &str)> = page.iter().map(|e| (e.id, e.kind.as_str())).collect();
    assert_eq!(seen, [(5, "app.phase"), (7, "app.phase")]);
    assert_eq!(log.after(5, &["acme".into()], 10).await.unwrap().len(), 1);

    log.prune(Utc::now() + Duration::seconds(1)).await.unwrap();
    assert_eq!(log.newest_id().await.unwrap(), 0);
}
