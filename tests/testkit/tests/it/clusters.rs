//! The kit's clusters are real Kubernetes: scheduling and kwok nodes, CRDs with status, garbage
//! collection and namespace deletion, and independence between clusters.

use std::time::Duration;

use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Node, Pod};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{
    Api, DeleteParams, ListParams, Patch, PatchParams, PostParams, WatchEvent, WatchParams,
};
use kube::core::ObjectMeta;
use kube::runtime::wait::{await_condition, conditions};
use kube::{CustomResource, CustomResourceExt, Resource, ResourceExt};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::json;

/// Polls `f` until it returns `Some`, for at most `timeout`.
async fn eventually<T, F, Fut>(what: &str, timeout: Duration, mut f: F) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Option<T>>,
{
    let deadline = tokio::time::Instant::now() + timeout;
    loop {
        if let Some(value) = f().await {
            return value;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "timed out after {timeout:?}: {what}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

fn deployment(name: &str, replicas: i32) -> Deployment {
    serde_json::from_value(json!({
        "metadata": { "name": name },
        "spec": {
            "replicas": replicas,
            "selector": { "matchLabels": { "app": name } },
            "template": {
                "metadata": { "labels": { "app": name } },
                "spec": { "containers": [{ "name": "web", "image": "nginx:1.27" }] }
            }
        }
    }))
    .unwrap()
}

#[tokio::test]
async fn a_deployment_reaches_its_ready_replicas_on_a_workload_cluster() {
    let env = kubenest_testkit::shared().await.unwrap();
    let ns = env
        .cluster("east")
        .unwrap()
        .test_namespace("deploy")
        .await
        .unwrap();
    let deployments: Api<Deployment> = Api::namespaced(ns.client(), ns.name());
    deployments
        .create(&PostParams::default(), &deployment("web", 3))
        .await
        .unwrap();

    let ready = |d: &Deployment| {
        d.status
            .as_ref()
            .and_then(|s| s.ready_replicas)
            .unwrap_or(0)
    };
    let web = eventually("3 ready replicas", Duration::from_secs(60), || async {
        deployments.get("web").await.ok().filter(|d| ready(d) == 3)
    })
    .await;
    assert_eq!(ready(&web), 3);

    // The pods were scheduled onto the kwok nodes and are Ready, as a kubelet would report.
    let pods: Api<Pod> = Api::namespaced(ns.client(), ns.name());
    let list = pods
        .list(&ListParams::default().labels("app=web"))
        .await
        .unwrap();
    assert_eq!(list.items.len(), 3);
    for pod in &list.items {
        let node = pod
            .spec
            .as_ref()
            .and_then(|s| s.node_name.clone())
            .unwrap_or_default();
        assert!(
            node.starts_with("east-node-"),
            "pod on unexpected node {node:?}"
        );
        assert_eq!(
            pod.status.as_ref().and_then(|s| s.phase.as_deref()),
            Some("Running")
        );
    }
}

#[tokio::test]
async fn a_kwok_pod_has_a_log_read_through_the_api_server() {
    let env = kubenest_testkit::shared().await.unwrap();
    let east = env.cluster("east").unwrap();
    let ns = east.test_namespace("podlog").await.unwrap();
    let deployments: Api<Deployment> = Api::namespaced(ns.client(), ns.name());
    deployments
        .create(&PostParams::default(), &deployment("web", 1))
        .await
        .unwrap();
    let pods: Api<Pod> = Api::namespaced(ns.client(), ns.name());
    let pod = eventually("a running pod", Duration::from_secs(60), || async {
        let list = pods
            .list(&ListParams::default().labels("app=web"))
            .await
            .ok()?;
        list.items
            .into_iter()
            .find(|p| p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running"))
    })
    .await;
    let marker = format!("podlog-{}", uuid_suffix());
    let log_file = east.kwok_log_file().unwrap();
    let line = format!("2026-01-01T00:00:01.000000000Z stdout F {marker}\n");
    // Appended, as a container writes: kwok may be following the file for another reader.
    let mut file = std::fs::OpenOptions::new()
        .append(true)
        .open(&log_file)
        .unwrap();
    std::io::Write::write_all(&mut file, line.as_bytes()).unwrap();
    let log = pods
        .logs(&pod.name_any(), &kube::api::LogParams::default())
        .await
        .unwrap();
    assert!(log.contains(&marker), "{log}");
}

#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, JsonSchema)]
#[kube(
    group = "testkit.kubenest.io",
    version = "v1",
    kind = "Widget",
    namespaced
)]
#[kube(status = "WidgetStatus")]
struct WidgetSpec {
    size: u32,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, JsonSchema)]
struct WidgetStatus {
    observed: u32,
}

#[tokio::test]
async fn a_custom_resource_is_served_with_watch_and_status_subresource() {
    let env = kubenest_testkit::shared().await.unwrap();
    let ns = env
        .management()
        .unwrap()
        .test_namespace("crd")
        .await
        .unwrap();
    let client = ns.client();

    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    let crd = Widget::crd();
    let apply = PatchParams::apply("kubenest-testkit").force();
    crds.patch(&crd.name_any(), &apply, &Patch::Apply(&crd))
        .await
        .unwrap();
    tokio::time::timeout(
        Duration::from_secs(30),
        await_condition(crds, &crd.name_any(), conditions::is_crd_established()),
    )
    .await
    .unwrap()
    .unwrap();

    let widgets: Api<Widget> = Api::namespaced(client, ns.name());
    let mut events = widgets
        .watch(&WatchParams::default(), "0")
        .await
        .unwrap()
        .boxed();

    let widget = Widget::new("w1", WidgetSpec { size: 3 });
    widgets
        .create(&PostParams::default(), &widget)
        .await
        .unwrap();
    assert_eq!(widgets.get("w1").await.unwrap().spec.size, 3);

    let status = json!({ "status": { "observed": 3 } });
    widgets
        .patch_status("w1", &PatchParams::default(), &Patch::Merge(&status))
        .await
        .unwrap();
    // The status subresource is separate: a spec write cannot change status...
    let sneaky = json!({ "spec": { "size": 4 }, "status": { "observed": 99 } });
    widgets
        .patch("w1", &PatchParams::default(), &Patch::Merge(&sneaky))
        .await
        .unwrap();
    let stored = widgets.get("w1").await.unwrap();
    assert_eq!(stored.spec.size, 4);
    assert_eq!(stored.status.map(|s| s.observed), Some(3));

    // ...and the watch saw the creation and both updates.
    let mut seen = Vec::new();
    while seen.len() < 3 {
        let event = tokio::time::timeout(Duration::from_secs(10), events.try_next())
            .await
            .expect("watch event")
            .unwrap()
            .expect("watch stream ended");
        match event {
            WatchEvent::Added(w) => seen.push(format!("added {}", w.spec.size)),
            WatchEvent::Modified(w) => seen.push(format!(
                "modified {} {}",
                w.spec.size,
                w.status.map_or(0, |s| s.observed)
            )),
            WatchEvent::Bookmark(_) => {}
            other => panic!("unexpected watch event {other:?}"),
        }
    }
    assert_eq!(seen, ["added 3", "modified 3 3", "modified 4 3"]);
}

#[tokio::test]
async fn the_management_cluster_and_two_workload_clusters_are_independent() {
    let env = kubenest_testkit::shared().await.unwrap();
    let names = ["mgmt", "east", "west"];
    let shared_ns = format!("same-{}", &uuid_suffix());
    for name in names {
        let client = env.cluster(name).unwrap().client().await.unwrap();
        let namespace = Namespace {
            metadata: ObjectMeta {
                name: Some(shared_ns.clone()),
                ..Default::default()
            },
            ..Default::default()
        };
        Api::<Namespace>::all(client.clone())
            .create(&PostParams::default(), &namespace)
            .await
            .unwrap();
        let cm = ConfigMap {
            metadata: ObjectMeta {
                name: Some("who".into()),
                ..Default::default()
            },
            data: Some([("cluster".to_owned(), name.to_owned())].into()),
            ..Default::default()
        };
        // The same namespace and name on every cluster: creation must not collide.
        Api::<ConfigMap>::namespaced(client, &shared_ns)
            .create(&PostParams::default(), &cm)
            .await
            .unwrap();
    }
    for name in names {
        let cluster = env.cluster(name).unwrap();
        let client = cluster.client().await.unwrap();
        let cm = Api::<ConfigMap>::namespaced(client.clone(), &shared_ns)
            .get("who")
            .await
            .unwrap();
        assert_eq!(cm.data.unwrap()["cluster"], name);
        let nodes = Api::<Node>::all(client)
            .list(&ListParams::default())
            .await
            .unwrap();
        let node_names: Vec<String> = nodes.items.iter().map(|n| n.name_any()).collect();
        match name {
            "mgmt" => assert!(node_names.is_empty(), "management has nodes {node_names:?}"),
            _ => assert_eq!(
                node_names,
                [format!("{name}-node-0"), format!("{name}-node-1")]
            ),
        }
    }
    let urls: std::collections::HashSet<&str> = names
        .iter()
        .map(|n| env.cluster(n).unwrap().url())
        .collect();
    assert_eq!(urls.len(), 3);
}

#[tokio::test]
async fn garbage_collection_removes_children_and_namespace_deletion_completes() {
    let env = kubenest_testkit::shared().await.unwrap();
    let cluster = env.management().unwrap();
    let ns = cluster.test_namespace("gc").await.unwrap();
    let configmaps: Api<ConfigMap> = Api::namespaced(ns.client(), ns.name());

    let owner = configmaps
        .create(
            &PostParams::default(),
            &ConfigMap {
                metadata: ObjectMeta {
                    name: Some("owner".into()),
                    ..Default::default()
                },
                ..Default::default()
            },
        )
        .await
        .unwrap();
    let child = ConfigMap {
        metadata: ObjectMeta {
            name: Some("child".into()),
            owner_references: Some(vec![owner.controller_owner_ref(&()).unwrap()]),
            ..Default::default()
        },
        ..Default::default()
    };
    configmaps
        .create(&PostParams::default(), &child)
        .await
        .unwrap();

    configmaps
        .delete("owner", &DeleteParams::background())
        .await
        .unwrap();
    eventually(
        "the child to be collected",
        Duration::from_secs(60),
        || async {
            configmaps
                .get_opt("child")
                .await
                .unwrap()
                .is_none()
                .then_some(())
        },
    )
    .await;

    // A namespace with content is finalized by the namespace controller and disappears.
    configmaps
        .create(
            &PostParams::default(),
            &ConfigMap {
                metadata: ObjectMeta {
                    name: Some("leftover".into()),
                    ..Default::default()
                },
                ..Default::default()
            },
        )
        .await
        .unwrap();
    let namespaces: Api<Namespace> = Api::all(ns.client());
    namespaces
        .delete(ns.name(), &DeleteParams::default())
        .await
        .unwrap();
    eventually(
        "the namespace to be deleted",
        Duration::from_secs(60),
        || async {
            namespaces
                .get_opt(ns.name())
                .await
                .unwrap()
                .is_none()
                .then_some(())
        },
    )
    .await;
}

fn uuid_suffix() -> String {
    uuid::Uuid::new_v4().simple().to_string()[..8].to_owned()
}
