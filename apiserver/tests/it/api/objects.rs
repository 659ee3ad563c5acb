//! `GET /api/v1/apps/{id}/objects` as an attacker and without a cluster to ask: a member of
//! another project and a user with no role get a 404 (the matrix row `app objects` covers every
//! role at every scope); a viewer of the App gets past the door; with no way to the cluster the
//! answer is a prompt 503 naming why, never a hang and never another App's objects.

use std::time::{Duration, Instant};

use super::*;

/// The error code of an error body, read in one place: the error shape is changing (to
/// problem+json, where `code` is top-level).
fn error_code(body: &Value) -> Option<&str> {
    body["code"]
        .as_str()
        .or_else(|| body["error"]["code"].as_str())
}

/// What the status router writes once the agent reports a revision running.
async fn mark_deployed(org: &str, app: &str) {
    let api: Api<App> = Api::namespaced(plane().kube().await, &format!("org-{org}"));
    let patch = json!({"status": {"observedRevision": "r1"}});
    api.patch_status(app, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_apps_objects_are_read_only_by_those_who_may_read_the_app_and_fail_closed_without_its_cluster()
 {
    let admin = Client::admin().await;
    let (viewer, outsider, stranger) = (
        user(&admin, "obj-viewer").await,
        user(&admin, "obj-outsider").await,
        user(&admin, "obj-stranger").await,
    );
    let org = org(&admin, "objects", json!([])).await;
    let registration = cluster(&admin, &org).await;
    let cluster_id = registration["cluster_id"].as_str().unwrap();
    let mine = project(&admin, &org, cluster_id).await;
    let theirs = project(&admin, &org, cluster_id).await;
    let (mine, theirs) = (mine["id"].as_str().unwrap(), theirs["id"].as_str().unwrap());
    for (project, user) in [(mine, &viewer), (theirs, &outsider)] {
        admin
            .expect(
                Method::PUT,
                &format!("/api/v1/projects/{project}/members"),
                Some(json!({"user": user, "role": "viewer"})),
                200,
            )
            .await;
    }
    let app = admin
        .expect(
            Method::POST,
            "/api/v1/apps",
            Some(web_app(mine, "shop", "nginx:1.27")),
            202,
        )
        .await;
    let path = format!("/api/v1/apps/{}/objects", app["id"].as_str().unwrap());

    // Not yet on its cluster: nothing to list, and it says so.
    let viewer = Client::login(0, &viewer, PASSWORD).await;
    let (status, body) = viewer.get(&path).await;
    assert_eq!(
        (status.as_u16(), error_code(&body)),
        (409, Some("not_deployed")),
        "{body}"
    );

    mark_deployed(&org, "shop").await;
    // A member of another project of the same organization, and a user with no role at all,
    // do not learn the App exists.
    for name in [&outsider, &stranger] {
        let attacker = Client::login(0, name, PASSWORD).await;
        let (status, body) = attacker.get(&path).await;
        assert_eq!(status.as_u16(), 404, "{name}: {body}");
        assert!(!body.to_string().contains("Deployment"), "{body}");
    }
    // The viewer passes the door; these API servers have no hub, so the answer is a prompt 503
    // naming why, not a wait.
    let started = Instant::now();
    let (status, body) = viewer.get(&path).await;
    assert_eq!(
        (status.as_u16(), error_code(&body)),
        (503, Some("hub_unavailable")),
        "{body}"
    );
    assert!(started.elapsed() < Duration::from_secs(5));
    // An id that is no App's is a 404 too.
    let (status, _) = viewer
        .get(&format!("/api/v1/apps/{}/objects", uuid::Uuid::new_v4()))
        .await;
    assert_eq!(status.as_u16(), 404);
}
