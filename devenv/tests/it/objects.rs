//! An App's live objects through the hub, end to end on the release programs: an App on a
//! kwok cluster, read through `GET /api/v1/apps/{id}/objects` — the agent lists it from its
//! cluster and the tree's edges are the owner references: Deployment → ReplicaSet → Pod, with
//! the Service beside them and no Secret. A viewer may read it; a user of another organization
//! may not learn the App exists.

use crate::common::{fixture, run};
use crate::logs::{get, running_app, user};
use serde_json::Value;

/// The one object of `kind` in `objects` whose name starts with `prefix`.
fn find<'a>(objects: &'a [Value], kind: &str, prefix: &str) -> &'a Value {
    let found: Vec<&Value> = objects
        .iter()
        .filter(|o| o["kind"] == kind && o["name"].as_str().unwrap().starts_with(prefix))
        .collect();
    assert_eq!(found.len(), 1, "one {kind} {prefix}* in {objects:#?}");
    found[0]
}

fn owners(object: &Value) -> Vec<&str> {
    object["owners"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| o.as_str().unwrap())
        .collect()
}

#[test]
fn an_apps_objects_come_from_its_cluster_as_a_tree_of_owners_without_secrets() {
    run(async {
        let mut f = fixture().await;
        let (mut admin, app_id) = running_app(&mut f, "objtree").await;
        let base = f.system.api_url();
        let path = format!("/api/v1/apps/{app_id}/objects");

        // kwok makes the pod Running and ready, and the Deployment's status follows: wait
        // until the listing shows it all ready (the App converged already; the read is live).
        let mut answer = Value::Null;
        crate::common::eventually(
            "the App's pod is listed ready",
            crate::common::CONVERGE,
            async || {
                answer = admin.get(&path).await.unwrap();
                answer["objects"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .any(|o| o["kind"] == "Pod" && o["status"]["health"] == "ready")
            },
        )
        .await;
        let objects = answer["objects"].as_array().unwrap().clone();
        assert_eq!(answer["truncated"], false, "{answer}");
        let deployment = find(&objects, "Deployment", "objtree-web");
        let replica_set = find(&objects, "ReplicaSet", "objtree-web-");
        let pod = find(&objects, "Pod", "objtree-web-");
        let service = find(&objects, "Service", "objtree-web");
        assert!(owners(deployment).is_empty(), "{deployment}");
        assert_eq!(owners(replica_set), [deployment["uid"].as_str().unwrap()]);
        assert_eq!(owners(pod), [replica_set["uid"].as_str().unwrap()]);
        assert!(owners(service).is_empty(), "{service}");
        assert_eq!(deployment["component"], "web");
        assert_eq!(deployment["status"]["health"], "ready", "{deployment}");
        assert_eq!(
            (
                &deployment["status"]["ready"],
                &deployment["status"]["desired"]
            ),
            (&Value::from(1), &Value::from(1)),
            "{deployment}"
        );
        assert_eq!(pod["status"]["phase"], "Running", "{pod}");
        assert!(
            objects.iter().all(|o| o["kind"] != "Secret"),
            "{objects:#?}"
        );

        // A viewer of the organization reads it; a user of another organization gets a 404.
        let org = f.system.options().org.clone();
        let viewer = user(&f, &mut admin, "viewer", Some(&org)).await;
        let seen = get(&viewer, &base, &path, "application/json").await;
        assert_eq!(seen.status(), 200);
        let outsider = user(&f, &mut admin, "admin", None).await;
        let refused = get(&outsider, &base, &path, "application/json").await;
        assert_eq!(refused.status(), 404);
        let body = refused.text().await.unwrap();
        assert!(!body.contains("objtree-web"), "{body}");
    });
}
