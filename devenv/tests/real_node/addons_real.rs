//! The catalog's addons really run, on a real node (a real kubelet and containerd, volumes from
//! the node's local-path provisioner): an App of a Kafka, a Postgres and a Redis addon with
//! persistence on, deployed through the REST API and applied by the agent the chart installed.
//! Each keeps what was written across the deletion of its pod: a record that Kafka's console
//! producer sent (run in the broker's pod, as are the other clients here), read back by its
//! console consumer from the new broker; a row in PostgreSQL; a key in Redis.
//!
//! `install.rs` runs it on the system it installed, beside the demo App in another project:
//! one real node and one control plane serve both.

use std::time::{Duration, Instant};

use crate::common::kubectl_exec;
use k8s_openapi::api::core::v1::{PersistentVolumeClaim, Pod};
use kube::api::{Api, DeleteParams, ListParams, LogParams};
use kubenest_cli::api::Client;
use kubenest_devenv::system::System;
use kubenest_testkit::Cluster;
use serde_json::{Value, json};

/// Real pulls, starts and a JVM on two cores take longer than kwok's instant pods.
const REAL: Duration = Duration::from_secs(300);

/// The addons, by the definition names the catalog gives them (their images are loaded on the
/// node).
pub const ADDONS: [&str; 3] = ["kafka", "postgres", "redis"];

/// The addons' App in a project of its own on `edge` (connected to `system` as `cluster_id`):
/// each addon runs on a bound claim and keeps what was written across its pod's deletion.
pub async fn keep_what_was_written(system: &System, edge: &Cluster, cluster_id: &str) {
    let mut admin = system.admin().await.unwrap();
    let org = system.options().org.clone();
    let project = admin
        .post(
            &format!("/api/v1/orgs/{org}/projects"),
            &json!({"name": "stores", "cluster_id": cluster_id}),
        )
        .await
        .unwrap();
    let project_id = project["id"].as_str().unwrap().to_owned();
    let namespace = project["namespace"].as_str().unwrap().to_owned();
    let persistent = json!({"persistence": {"enabled": true}});
    let components: Vec<Value> = ADDONS
        .iter()
        .map(|name| {
            json!({"name": name, "type": "addon",
                   "addon_spec": {"definition": name, "values": persistent}})
        })
        .collect();
    let app = admin
        .post(
            "/api/v1/apps",
            &json!({"project_id": project_id, "name": "stores",
                    "progress_deadline_seconds": REAL.as_secs(),
                    "components": components}),
        )
        .await
        .unwrap();
    let app_id = app["id"].as_str().unwrap().to_owned();
    running(&mut admin, &format!("/api/v1/apps/{app_id}"), edge).await;

    let client = edge.client().await.unwrap();
    let node = Node {
        edge,
        pods: Api::namespaced(client.clone(), &namespace),
        namespace: namespace.clone(),
    };
    // Each data volume is a claim the node's provisioner bound.
    let claims = Api::<PersistentVolumeClaim>::namespaced(client, &namespace)
        .list(&ListParams::default())
        .await
        .unwrap();
    for name in ADDONS {
        let claim = claims
            .items
            .iter()
            .find(|c| addon_of(&c.metadata) == Some(name))
            .unwrap_or_else(|| panic!("no claim of {name} among {:?}", names(&claims.items)));
        let status = claim.status.as_ref().and_then(|s| s.phase.as_deref());
        let class = claim
            .spec
            .as_ref()
            .and_then(|s| s.storage_class_name.as_deref());
        assert_eq!(
            (status, class),
            (Some("Bound"), Some("local-path")),
            "{name}"
        );
    }

    kafka_keeps_a_record(&node).await;
    postgres_keeps_a_row(&node).await;
    redis_keeps_a_key(&node).await;
}

/// A record produced to a new topic, the broker's pod deleted, the record consumed back from
/// the new broker, which found its storage formatted (the same cluster, the same log).
async fn kafka_keeps_a_record(node: &Node<'_>) {
    let broker = node.ready_pod("kafka").await;
    let record = "order 42: kept across a restart";
    node.exec(
        &broker,
        &format!(
            "echo '{record}' | kafka-console-producer --bootstrap-server localhost:9092 \
             --topic orders"
        ),
    );
    let broker = node.restart("kafka").await;
    let consumed = node.exec(
        &broker,
        "kafka-console-consumer --bootstrap-server localhost:9092 --topic orders \
         --from-beginning --max-messages 1 --timeout-ms 120000 2>/dev/null",
    );
    assert_eq!(consumed, record);
    let log = node
        .pods
        .logs(&broker, &LogParams::default())
        .await
        .unwrap();
    assert!(
        !log.contains("kafka-entrypoint: formatted"),
        "the new broker formatted its storage again:\n{log}"
    );
}

/// A row written through psql on the pod's socket, the pod deleted, the row read back.
async fn postgres_keeps_a_row(node: &Node<'_>) {
    let pod = node.ready_pod("postgres").await;
    let psql = "psql -U app -d app -v ON_ERROR_STOP=1 -Atc";
    node.exec(
        &pod,
        &format!(
            "{psql} \"CREATE TABLE notes (note text); \
             INSERT INTO notes VALUES ('written before the restart')\""
        ),
    );
    let pod = node.restart("postgres").await;
    assert_eq!(
        node.exec(&pod, &format!("{psql} 'SELECT note FROM notes'")),
        "written before the restart"
    );
}

/// A key set with the pod's own password, the pod deleted, the key read back (the chart's
/// append-only file keeps every write, not just the last snapshot).
async fn redis_keeps_a_key(node: &Node<'_>) {
    let cli = "redis-cli --no-auth-warning -a \"$REDIS_PASSWORD\"";
    let pod = node.ready_pod("redis").await;
    assert_eq!(node.exec(&pod, &format!("{cli} set greeting kept")), "OK");
    let pod = node.restart("redis").await;
    assert_eq!(node.exec(&pod, &format!("{cli} get greeting")), "kept");
}

/// The App's namespace on the real node.
struct Node<'a> {
    edge: &'a Cluster,
    pods: Api<Pod>,
    namespace: String,
}

impl Node<'_> {
    /// The addon's Ready pod (its StatefulSet has one), waiting for it.
    async fn ready_pod(&self, addon: &str) -> String {
        self.ready_pod_other_than(addon, None).await
    }

    async fn ready_pod_other_than(&self, addon: &str, old_uid: Option<&str>) -> String {
        let selector = ListParams::default().labels(&format!("app.kubernetes.io/name={addon}"));
        let deadline = Instant::now() + REAL;
        loop {
            let pods = self.pods.list(&selector).await.unwrap().items;
            let ready = pods.iter().find(|p| {
                p.metadata.uid.as_deref() != old_uid
                    && p.metadata.deletion_timestamp.is_none()
                    && is_ready(p)
            });
            if let Some(pod) = ready {
                return pod.metadata.name.clone().unwrap();
            }
            assert!(
                Instant::now() < deadline,
                "no new Ready {addon} pod in {}: {:?}\n{}",
                self.namespace,
                pods.iter()
                    .map(|p| (&p.metadata.name, &p.status))
                    .collect::<Vec<_>>(),
                self.edge.log_tails(20)
            );
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
    }

    /// Deletes the addon's pod and waits for the one its StatefulSet makes in its place (on the
    /// same claim) to be Ready; returns the new pod's name.
    async fn restart(&self, addon: &str) -> String {
        let name = self.ready_pod(addon).await;
        let old = self.pods.get(&name).await.unwrap();
        let started = Instant::now();
        self.pods
            .delete(&name, &DeleteParams::default())
            .await
            .unwrap();
        let new = self
            .ready_pod_other_than(addon, old.metadata.uid.as_deref())
            .await;
        eprintln!(
            "{addon}: pod {name} deleted, {new} Ready in {:.1}s",
            started.elapsed().as_secs_f64()
        );
        new
    }

    /// `sh -c script` in `pod` (kubectl exec, through the kubelet); its stdout, trimmed.
    fn exec(&self, pod: &str, script: &str) -> String {
        kubectl_exec(self.edge, &self.namespace, pod, script)
    }
}

fn is_ready(pod: &Pod) -> bool {
    pod.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|cs| cs.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
}

/// The addon an object belongs to (its chart's `app.kubernetes.io/name`, which a StatefulSet
/// also gives the claims it makes).
fn addon_of(meta: &kube::api::ObjectMeta) -> Option<&str> {
    meta.labels
        .as_ref()?
        .get("app.kubernetes.io/name")
        .map(String::as_str)
}

fn names(claims: &[PersistentVolumeClaim]) -> Vec<Option<&str>> {
    claims.iter().map(|c| c.metadata.name.as_deref()).collect()
}

/// Waits until the App at `path` runs its current revision; fails at once when it failed.
async fn running(admin: &mut Client, path: &str, edge: &Cluster) {
    let deadline = Instant::now() + REAL;
    loop {
        let app = admin.get(path).await.unwrap();
        if app["phase"] == "Running" && app["observed_revision"] == app["revision"] {
            return;
        }
        assert_ne!(app["phase"], "Failed", "{app}\n{}", edge.log_tails(20));
        assert!(
            Instant::now() < deadline,
            "not Running: {app}\n{}",
            edge.log_tails(20)
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}
