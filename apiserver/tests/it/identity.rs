//! Identities are not names: memberships bind a user's immutable id, deleting a user takes
//! their memberships and sessions and refuses their tokens at once, a re-created name starts
//! with nothing, and disabling or a new password ends every session. Against the real
//! management cluster, PostgreSQL and controllers, through both API server replicas.

use crate::common;

use crate::common::{Client, PASSWORD, eventually, org, plane, user};
use kube::api::Api;
use kubenest_crds::organization::Organization;
use reqwest::{Method, StatusCode};
use serde_json::json;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deleted_user_loses_everything_at_once_and_a_recreated_name_holds_nothing() {
    let admin = Client::admin().await;
    let kube = plane().kube().await;
    let ivy = user(&admin, "ivy").await;
    let acme = org(&admin, "ident", json!([{"user": ivy, "role": "member"}])).await;

    // The membership names her id; the RoleBinding the Kubernetes user of that id.
    let session = Client::login(1, &ivy, PASSWORD).await;
    let (_, me) = session.get("/api/v1/me").await;
    let id = me["id"].as_str().unwrap().to_owned();
    let (_, members) = admin.get(&format!("/api/v1/orgs/{acme}/members")).await;
    assert_eq!(members[0]["user"], ivy.as_str(), "{members}");
    assert_eq!(members[0]["user_id"], id.as_str(), "{members}");
    let bound = async || common::org_binding_has(&kube, &acme, "kubenest-org-member", &id).await;
    eventually("her RoleBinding", 30, async || bound().await).await;
    session
        .expect(Method::GET, &format!("/api/v1/orgs/{acme}"), None, 200)
        .await;

    // Disabled: no token, no login, no refresh; enabled again, she logs in.
    let disabled = admin
        .expect(
            Method::POST,
            &format!("/api/v1/users/{ivy}/disable"),
            None,
            200,
        )
        .await;
    assert_eq!(disabled["disabled"], true);
    let (status, body) = session.get(&format!("/api/v1/orgs/{acme}")).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED, "{body}");
    let (status, _) = Client::anonymous(&plane().urls[0])
        .post(
            "/api/v1/login",
            json!({"username": ivy, "password": PASSWORD}),
        )
        .await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    admin
        .expect(
            Method::POST,
            &format!("/api/v1/users/{ivy}/enable"),
            None,
            200,
        )
        .await;

    // Her own new password ends her sessions, this one included.
    let session = Client::login(0, &ivy, PASSWORD).await;
    let new_password = "another-long-enough-password";
    session
        .expect(
            Method::PUT,
            &format!("/api/v1/users/{ivy}/password"),
            Some(json!({"password": new_password})),
            204,
        )
        .await;
    let (status, _) = session.get("/api/v1/me").await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    let session = Client::login(1, &ivy, new_password).await;

    // Deleted: her token is refused on the next request, on either replica, and every
    // membership and binding of hers is gone.
    admin
        .expect(Method::DELETE, &format!("/api/v1/users/{ivy}"), None, 204)
        .await;
    for replica in [0, 1] {
        let other = Client {
            base: plane().urls[replica].clone(),
            ..session.clone()
        };
        let (status, body) = other.get("/api/v1/me").await;
        assert_eq!(status, StatusCode::UNAUTHORIZED, "{body}");
    }
    let org = Api::<Organization>::all(kube.clone())
        .get(&acme)
        .await
        .unwrap();
    assert!(
        org.spec
            .members
            .iter()
            .all(|m| m.user_id.as_deref() != Some(&id)),
        "{:?}",
        org.spec.members
    );
    eventually("her RoleBinding to go", 30, async || !bound().await).await;

    // The same name again is another user, with nothing.
    user_named(&admin, &ivy).await;
    let again = Client::login(0, &ivy, PASSWORD).await;
    let (_, me) = again.get("/api/v1/me").await;
    assert_ne!(me["id"], id.as_str());
    let (status, _) = again.get(&format!("/api/v1/orgs/{acme}")).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    let (_, orgs) = again.get("/api/v1/orgs").await;
    assert_eq!(orgs, json!([]));
}

async fn user_named(admin: &Client, name: &str) {
    admin
        .expect(
            Method::POST,
            "/api/v1/users",
            Some(json!({"username": name, "password": PASSWORD})),
            201,
        )
        .await;
}
