//! `objects.request` against the agent on a real kwok cluster: an App's objects come back with
//! their owners (Deployment → ReplicaSet → Pod, the Service beside), never a Secret even one
//! labelled as the App's; the namespace is the one of the App the agent holds, so an App
//! whose StackDeploy names another project's namespace, or an App the agent does not hold, is
//! answered with a refusal and no object.

use crate::agent::{LONG, fixture};
use crate::common::{self, app_ref, eventually, project, web_app};
use k8s_openapi::api::core::v1::Secret;
use kube::api::Api;
use kubenest_agent::crd::{StackDeploy, StackDeploySpec};
use kubenest_contracts::{self as wire, Message, RejectReason};
use serde_json::json;

/// Asks the agent for `app_id`'s objects and waits for its answer.
async fn objects_of(app_id: &str) -> wire::ObjectsSnapshot {
    let backend = &fixture().backend;
    let request_id = uuid::Uuid::new_v4().to_string();
    backend
        .send(wire::ObjectsRequest {
            request_id: wire::Id::new(&request_id),
            app_id: wire::Id::new(app_id),
        })
        .await;
    backend
        .wait_for("the objects snapshot", LONG, |m| match m {
            Message::ObjectsSnapshot(s) if s.request_id.as_str() == request_id => Some(s.clone()),
            _ => None,
        })
        .await
}

fn one<'a>(snapshot: &'a wire::ObjectsSnapshot, kind: &str) -> &'a wire::LiveObject {
    let found: Vec<_> = snapshot.objects.iter().filter(|o| o.kind == kind).collect();
    assert_eq!(found.len(), 1, "one {kind} in {snapshot:#?}");
    found[0]
}

#[tokio::test]
async fn an_apps_objects_come_with_their_owners_and_never_a_secret() {
    let f = fixture();
    let (project, namespace) = project(&f.backend, "objects").await;
    let id = uuid::Uuid::new_v4().to_string();
    let deploy = web_app(
        app_ref(&id, "tree", &project, &namespace),
        "r1",
        "nginx:1.27",
        1,
        60,
    );
    f.backend
        .answer(f.backend.send(deploy).await)
        .await
        .unwrap();
    // A Secret carrying the App's labels (as its export and certificate Secrets do).
    let client = f.east.client().await.unwrap();
    let secret: Secret = serde_json::from_value(json!({
        "metadata": {"name": "tree-web-tls", "labels": {"kubenest.io/app-id": id}},
        "stringData": {"tls.key": "not for anyone"}
    }))
    .unwrap();
    Api::<Secret>::namespaced(client, &namespace)
        .create(&Default::default(), &secret)
        .await
        .unwrap();

    let mut snapshot = None;
    eventually("the App's pod is listed", LONG, async || {
        let answer = objects_of(&id).await;
        let listed = answer.objects.iter().any(|o| o.kind == "Pod");
        snapshot = Some(answer);
        listed
    })
    .await;
    let snapshot = snapshot.unwrap();
    assert_eq!(
        (snapshot.refused.as_ref(), snapshot.truncated),
        (None, false)
    );
    let deployment = one(&snapshot, "Deployment");
    let replica_set = one(&snapshot, "ReplicaSet");
    let pod = one(&snapshot, "Pod");
    let service = one(&snapshot, "Service");
    assert_eq!(deployment.name, "tree-web");
    assert!(deployment.owners.is_empty());
    assert_eq!(replica_set.owners, std::slice::from_ref(&deployment.uid));
    assert_eq!(pod.owners, std::slice::from_ref(&replica_set.uid));
    assert_eq!(
        (service.name.as_str(), service.component.as_deref()),
        ("tree-web", Some("web"))
    );
    assert!(
        snapshot.objects.iter().all(|o| o.kind != "Secret"),
        "{snapshot:#?}"
    );
    assert!(!format!("{snapshot:?}").contains("not for anyone"));
}

#[tokio::test]
async fn an_app_the_agent_does_not_hold_or_in_another_projects_namespace_is_refused_with_no_object()
{
    let f = fixture();
    let (project, _) = project(&f.backend, "objmine").await;
    let (_, other_namespace) = common::project(&f.backend, "objtheirs").await;

    let unknown = objects_of(&uuid::Uuid::new_v4().to_string()).await;
    assert_eq!(
        unknown.refused.map(|r| r.reason),
        Some(RejectReason::Invalid)
    );
    assert!(unknown.objects.is_empty());

    // A StackDeploy written on the cluster directly, naming another project's namespace: its
    // objects are not read there.
    let id = uuid::Uuid::new_v4().to_string();
    let deploy = web_app(
        app_ref(&id, "sneaky", &project, &other_namespace),
        "r1",
        "nginx:1.27",
        1,
        60,
    );
    let object = StackDeploy::new(
        &format!("app-{id}"),
        StackDeploySpec {
            deploy,
            restart_id: None,
        },
    );
    let client = f.east.client().await.unwrap();
    Api::<StackDeploy>::namespaced(client, common::SYSTEM)
        .create(&Default::default(), &object)
        .await
        .unwrap();
    let sneaky = objects_of(&id).await;
    assert_eq!(
        sneaky.refused.map(|r| r.reason),
        Some(RejectReason::NamespaceViolation)
    );
    assert!(sneaky.objects.is_empty());
}
