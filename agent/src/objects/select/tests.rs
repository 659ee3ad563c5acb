use kubenest_contracts::Health;
use serde_json::{Value, json};

use super::*;

const APP: &str = "0d9a4c1e-2b3f-4a5b-9c8d-7e6f5a4b3c2d";

fn object(name: &str, uid: &str, labels: Value, owners: &[&str]) -> Value {
    let refs: Vec<Value> = owners.iter().map(|o| json!({"uid": o})).collect();
    json!({"metadata": {"name": name, "uid": uid, "labels": labels, "ownerReferences": refs,
        "creationTimestamp": "2026-12-01T10:00:00Z"}})
}

fn app_labels(app: &str, component: &str) -> Value {
    json!({"kubenest.io/app-id": app, "kubenest.io/component": component})
}

fn with(mut live: Value, at: &str, value: Value) -> Value {
    live[at] = value;
    live
}

fn listed() -> Vec<Listed> {
    let deployment = with(
        object("shop-web", "d1", app_labels(APP, "web"), &[]),
        "spec",
        json!({"replicas": 1}),
    );
    let replica_set = with(
        object("shop-web-7d9f8", "rs1", json!({}), &["d1"]),
        "spec",
        json!({"replicas": 1}),
    );
    let old_replica_set = with(
        object("shop-web-5c4b3", "rs0", json!({}), &["d1"]),
        "spec",
        json!({"replicas": 0}),
    );
    let pod = with(
        object(
            "shop-web-7d9f8-abcde",
            "p1",
            app_labels(APP, "web"),
            &["rs1"],
        ),
        "status",
        json!({"phase": "Running", "containerStatuses": [{"ready": true, "restartCount": 2}]}),
    );
    // An addon's StatefulSet carries the App's labels; its pods only the chart's.
    let stateful_set = object("shop-db-postgresql", "s1", app_labels(APP, "db"), &[]);
    let addon_pod = object("shop-db-postgresql-0", "p2", json!({"app": "pg"}), &["s1"]);
    let service = with(
        object("shop-web", "svc1", app_labels(APP, "web"), &[]),
        "spec",
        json!({"type": "ClusterIP"}),
    );
    let secret = object("shop-db-exports", "sec1", app_labels(APP, "db"), &[]);
    let other_app = object("blog-web", "d2", app_labels("other-app", "web"), &[]);
    let other_pod = object("blog-web-1", "p3", json!({}), &["d2"]);
    let stray = object("stray", "x1", json!({}), &[]);
    vec![
        ("Deployment", deployment),
        ("StatefulSet", stateful_set),
        ("Service", service),
        ("Secret", secret),
        ("Deployment", other_app),
        ("ReplicaSet", replica_set),
        ("ReplicaSet", old_replica_set),
        ("Pod", pod),
        ("Pod", addon_pod),
        ("Pod", other_pod),
        ("Pod", stray),
    ]
}

#[test]
fn an_apps_objects_are_its_labelled_ones_and_what_they_own_never_another_apps_or_a_secret() {
    let (objects, truncated) = select(APP, &listed());
    assert!(!truncated);
    let mut names: Vec<(&str, &str)> = objects
        .iter()
        .map(|o| (o.kind.as_str(), o.name.as_str()))
        .collect();
    names.sort();
    assert_eq!(
        names,
        [
            ("Deployment", "shop-web"),
            ("Pod", "shop-db-postgresql-0"),
            ("Pod", "shop-web-7d9f8-abcde"),
            ("ReplicaSet", "shop-web-7d9f8"),
            ("Service", "shop-web"),
            ("StatefulSet", "shop-db-postgresql"),
        ]
    );
}

#[test]
fn owner_references_become_the_trees_edges() {
    let (objects, _) = select(APP, &listed());
    let owners = |name: &str| {
        objects
            .iter()
            .find(|o| o.name == name)
            .map(|o| o.owners.clone())
            .unwrap()
    };
    assert_eq!(owners("shop-web-7d9f8"), ["d1"]);
    assert_eq!(owners("shop-web-7d9f8-abcde"), ["rs1"]);
    assert_eq!(owners("shop-db-postgresql-0"), ["s1"]);
    assert!(owners("shop-web").is_empty());
    let pod = objects.iter().find(|o| o.uid == "p1").unwrap();
    assert_eq!(pod.component.as_deref(), Some("web"));
    assert!(pod.created.is_some());
}

#[test]
fn a_snapshot_is_cut_at_its_bound_and_says_so() {
    let many: Vec<Listed> = (0..MAX_OBJECTS + 3)
        .map(|i| {
            let name = format!("svc-{i}");
            (
                "Service",
                object(&name, &format!("u{i}"), app_labels(APP, "web"), &[]),
            )
        })
        .collect();
    let (objects, truncated) = select(APP, &many);
    assert!(truncated);
    assert_eq!(objects.len(), MAX_OBJECTS);
}

#[test]
fn a_pod_in_crash_loop_is_failed_with_its_reason_and_restarts() {
    let live = json!({
        "spec": {"containers": [{"name": "web"}]},
        "status": {"phase": "Running", "containerStatuses": [{"ready": false, "restartCount": 7,
            "state": {"waiting": {"reason": "CrashLoopBackOff", "message": "back-off 5m0s"}}}]}
    });
    let status = status_of("Pod", &live);
    assert_eq!(status.health, Health::Failed);
    assert_eq!(status.reason.as_deref(), Some("CrashLoopBackOff"));
    assert_eq!(status.message.as_deref(), Some("back-off 5m0s"));
    assert_eq!(
        (status.ready, status.desired, status.restarts),
        (Some(0), Some(1), Some(7))
    );

    let starting =
        json!({"spec": {"containers": [{"name": "web"}]}, "status": {"phase": "Pending"}});
    assert_eq!(status_of("Pod", &starting).health, Health::Progressing);
    let running = json!({"spec": {"containers": [{"name": "web"}]}, "status": {"phase": "Running",
        "containerStatuses": [{"ready": true, "restartCount": 0}]}});
    let status = status_of("Pod", &running);
    assert_eq!((status.health, status.reason), (Health::Ready, None));
}

#[test]
fn a_deployment_past_its_deadline_is_failed_and_a_ready_one_counts_its_replicas() {
    let stuck = json!({
        "metadata": {"generation": 1},
        "spec": {"replicas": 2},
        "status": {"observedGeneration": 1, "replicas": 2, "updatedReplicas": 2, "readyReplicas": 0,
            "conditions": [{"type": "Progressing", "status": "False",
                "reason": "ProgressDeadlineExceeded", "message": "took too long"}]}
    });
    let status = status_of("Deployment", &stuck);
    assert_eq!(status.health, Health::Failed);
    assert_eq!(status.reason.as_deref(), Some("ProgressDeadlineExceeded"));
    let ready = json!({
        "metadata": {"generation": 1},
        "spec": {"replicas": 2},
        "status": {"observedGeneration": 1, "replicas": 2, "updatedReplicas": 2, "readyReplicas": 2,
            "availableReplicas": 2}
    });
    let status = status_of("Deployment", &ready);
    assert_eq!(
        (status.health, status.ready, status.desired),
        (Health::Ready, Some(2), Some(2))
    );
}

#[test]
fn long_messages_are_cut_to_the_contracts_bound() {
    let live =
        json!({"status": {"phase": "Failed", "reason": "Evicted", "message": "x".repeat(5000)}});
    let status = status_of("Pod", &live);
    assert_eq!(status.health, Health::Failed);
    assert_eq!(status.message.map(|m| m.chars().count()), Some(1024));
}
