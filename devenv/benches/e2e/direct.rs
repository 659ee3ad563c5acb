//! The peer: the same Deployment and Service applied directly to the workload cluster and
//! waited for as `kubectl rollout status` does.

use super::*;

/// Creates [`DIRECT_NS`] on a workload cluster.
pub(super) async fn direct_namespace(client: &kube::Client) {
    Api::<Namespace>::all(client.clone())
        .patch(
            DIRECT_NS,
            &PatchParams::apply("bench-direct"),
            &Patch::Apply(json!({"apiVersion": "v1", "kind": "Namespace",
                "metadata": {"name": DIRECT_NS}})),
        )
        .await
        .unwrap();
}

/// Where the peer applies its Deployments.
pub(super) const DIRECT_NS: &str = "bench-direct";

/// The peer's Deployments, by name, once Ready.
pub(super) fn direct_stages(object: &DynamicObject) -> Vec<(String, Stage)> {
    let ready = object.data["status"]["readyReplicas"] == 1
        && object.data["status"]["updatedReplicas"] == 1
        && object.data["status"]["observedGeneration"].as_i64() == object.metadata.generation;
    match &object.metadata.name {
        Some(name) if ready && object.metadata.namespace.as_deref() == Some(DIRECT_NS) => {
            vec![(name.clone(), Stage::Ready)]
        }
        _ => Vec::new(),
    }
}

/// The same workload applied directly: a Deployment and a Service, then wait on the watch of
/// [`direct_stages`] (open before the apply, as the API's event stream is) until it is Ready.
pub(super) async fn direct(
    client: &kube::Client,
    stages: &Stages,
    namespace: &str,
    name: &str,
) -> f64 {
    let started = Instant::now();
    apply_direct(client, namespace, name).await;
    stages.reached(name, Stage::Ready).await;
    started.elapsed().as_secs_f64() * 1000.0
}

/// Server-side applies the Deployment and Service kubenest renders for the benchmark's App.
pub(super) async fn apply_direct(client: &kube::Client, namespace: &str, name: &str) {
    let labels = json!({"app.kubernetes.io/name": name});
    let deployment = json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": name, "labels": labels},
        "spec": {"replicas": 1, "selector": {"matchLabels": labels},
            "template": {"metadata": {"labels": labels}, "spec": {"containers": [
                {"name": "web", "image": "nginx:1.27", "ports": [{"containerPort": 8080}]}]}}}
    });
    let service = json!({
        "apiVersion": "v1", "kind": "Service",
        "metadata": {"name": name, "labels": labels},
        "spec": {"selector": labels, "ports": [{"port": 8080}]}
    });
    let params = PatchParams::apply("bench-direct").force();
    for (resource, object) in [
        (ApiResource::erase::<Deployment>(&()), deployment),
        (ApiResource::erase::<Service>(&()), service),
    ] {
        Api::<DynamicObject>::namespaced_with(client.clone(), namespace, &resource)
            .patch(name, &params, &Patch::Apply(object))
            .await
            .unwrap();
    }
}

/// Deployments in [`DIRECT_NS`] named `fleet-…` that are Ready, on `clients`.
pub(super) async fn direct_ready(clients: &[kube::Client]) -> usize {
    let mut count = 0;
    for client in clients {
        let Ok(list) = Api::<Deployment>::namespaced(client.clone(), DIRECT_NS)
            .list(&Default::default())
            .await
        else {
            continue;
        };
        count += list
            .items
            .iter()
            .filter(|d| {
                d.metadata
                    .name
                    .as_deref()
                    .is_some_and(|n| n.starts_with("fleet-"))
            })
            .filter(|d| {
                let status = d.status.clone().unwrap_or_default();
                status.observed_generation == d.metadata.generation
                    && status.ready_replicas == Some(1)
                    && status.updated_replicas == Some(1)
            })
            .count();
    }
    count
}

/// `fleet` Deployments and Services applied directly, half on each of `clients`, 16 at a time;
/// then until all are Ready. Returns the seconds (none if not within [`CONVERGE_CAP`]) and how
/// many were Ready at the end.
pub(super) async fn direct_fleet(
    clients: &[kube::Client; 2],
    fleet: usize,
) -> (Option<f64>, usize) {
    let stages = Stages::default();
    for client in clients {
        stages.watch_direct(client.clone());
    }
    let names: Vec<String> = (0..fleet).map(|i| format!("fleet-{i}")).collect();
    let started = Instant::now();
    let mut applies = futures::stream::iter(names.iter().enumerate().map(|(i, name)| {
        let client = clients[i % 2].clone();
        async move { apply_direct(&client, DIRECT_NS, name).await }
    }))
    .buffer_unordered(16);
    while applies.next().await.is_some() {}
    drop(applies);
    let applied = started.elapsed().as_secs_f64();
    let (done, ready) = converged(&stages, &names, Stage::Ready, started, "Ready", || {
        direct_ready(clients)
    })
    .await;
    stages.stop();
    eprintln!(
        "direct: {fleet} applied in {applied:.1}s, {ready} Ready after {:.1}s",
        started.elapsed().as_secs_f64()
    );
    (done, ready)
}
