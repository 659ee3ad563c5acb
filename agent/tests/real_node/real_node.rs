//! What only a real node proves, on one real node shared by the tests of this binary (with a
//! management cluster, a hub, the backend session and an agent):
//!
//! - Addons keep their data: the catalog's Redis (persistence on by default) gets a
//!   PersistentVolumeClaim that the node's storage provisioner serves, a key written through
//!   its Service survives the deletion of its pod, and is read back from the new one.
//! - What a project renders stays in its project: its namespace refuses a privileged pod and a
//!   hostPath pod (Pod Security), and a chart with a cluster-scoped object fails its revision
//!   with nothing of it created.
//!
//! Needs root (the real node); the image comes from tools/build-images.sh (built or found
//! cached).

use crate::common;

use std::sync::OnceLock;
use std::time::{Duration, Instant};

use crate::common::charts::{ESCAPE, assert_escape_refused, refused_chart};
use crate::common::{Backend, eventually, project};
use k8s_openapi::api::core::v1::{PersistentVolumeClaim, Pod, Secret};
use kube::api::{Api, DeleteParams, ListParams, LogParams, PostParams};
use kubenest_agent::egress::Egress;
use kubenest_contracts::{self as wire, Message};
use kubenest_domain::sources::AllowList;
use kubenest_testkit::{ChartRepository, Cluster, ServerCa};
use serde_json::json;

pub(crate) struct Fixture {
    pub(crate) backend: Backend,
    pub(crate) edge: &'static Cluster,
    /// The Redis image's name on the node.
    redis: String,
    /// The demo web app's image's name on the node.
    pub(crate) demo: String,
    /// A chart repository holding [`ESCAPE`].
    repository: ChartRepository,
}

/// Starts (once) the clusters, the chart repository, the hub, the backend session and the
/// agent (trusting the repository's CA) on a runtime of their own, which outlives every test's.
pub(crate) fn fixture() -> &'static Fixture {
    static FIXTURE: OnceLock<Fixture> = OnceLock::new();
    FIXTURE.get_or_init(|| {
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let runtime = tokio::runtime::Runtime::new().unwrap();
            runtime.block_on(async move {
                let (env, images) = common::real_node_with(&["redis", "demo"]).await;
                let env = Box::leak(Box::new(env));
                let (mgmt, edge) = (env.management().unwrap(), env.cluster("edge").unwrap());
                let dir = Box::leak(Box::new(tempfile::tempdir().unwrap()));
                let ca = ServerCa::generate(dir.path()).unwrap();
                let repository = ChartRepository::start(&ca).await.unwrap();
                repository.publish("escape", &ESCAPE).unwrap();
                let shutdown = tokio_util::sync::CancellationToken::new();
                let sources = AllowList::parse(&[repository.url()]).unwrap();
                let backend = common::agent_on(mgmt, edge, &shutdown, |config| {
                    config.helm = config
                        .helm
                        .clone()
                        .with_ca_file(Some(ca.path.clone()))
                        .with_egress(Egress::new(sources));
                })
                .await;
                tx.send(Fixture {
                    backend,
                    edge,
                    redis: images.get("redis").unwrap().reference.clone(),
                    demo: images.get("demo").unwrap().reference.clone(),
                    repository,
                })
                .unwrap();
                std::future::pending::<()>().await;
            });
        });
        rx.recv().unwrap()
    })
}

const REAL: Duration = Duration::from_secs(180);

/// Runs `redis-cli ARGS` in a pod of the Redis image, with the addon's password from its
/// export Secret; returns its output. A refused connection is tried again in a new pod: an
/// addon is Ready once its pod is, and kube-proxy routes its Service to that pod a moment later.
async fn redis_cli(
    pods: &Api<Pod>,
    image: &str,
    secret: &str,
    host: &str,
    args: &[&str],
) -> String {
    let deadline = Instant::now() + REAL;
    loop {
        let (succeeded, log) = redis_cli_once(pods, image, secret, host, args).await;
        if succeeded {
            return log.trim().to_owned();
        }
        assert!(
            log.contains("Connection refused") && Instant::now() < deadline,
            "redis-cli {args:?}: {log}"
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

/// One pod running `redis-cli ARGS`: whether it succeeded, and its log.
async fn redis_cli_once(
    pods: &Api<Pod>,
    image: &str,
    secret: &str,
    host: &str,
    args: &[&str],
) -> (bool, String) {
    let name = format!("cli-{}", &uuid::Uuid::new_v4().simple().to_string()[..6]);
    let mut command = vec!["redis-cli", "--no-auth-warning", "-h", host];
    command.extend_from_slice(args);
    let pod: Pod = serde_json::from_value(json!({
        "metadata": {"name": name},
        "spec": {"restartPolicy": "Never", "containers": [{
            "name": "cli", "image": image, "imagePullPolicy": "Never",
            "command": command,
            "env": [{"name": "REDISCLI_AUTH", "valueFrom": {"secretKeyRef": {
                "name": secret, "key": "password"}}}],
        }]}
    }))
    .unwrap();
    pods.create(&PostParams::default(), &pod).await.unwrap();
    let deadline = Instant::now() + REAL;
    loop {
        let phase = pods.get(&name).await.unwrap().status.and_then(|s| s.phase);
        if matches!(phase.as_deref(), Some("Succeeded" | "Failed")) {
            let log = pods.logs(&name, &LogParams::default()).await.unwrap();
            return (phase.as_deref() == Some("Succeeded"), log);
        }
        assert!(
            Instant::now() < deadline,
            "redis-cli {args:?} still {phase:?}"
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

#[tokio::test]
async fn a_redis_addon_keeps_a_key_on_its_volume_across_a_restart_of_its_pod() {
    let f = fixture();
    let (backend, edge, image) = (&f.backend, f.edge, f.redis.clone());
    let (project_id, namespace) = project(backend, "volumes").await;
    let addon = wire::AddonRef {
        addon_id: wire::Id::new(uuid::Uuid::new_v4().to_string()),
        name: wire::Name::new("sessions"),
        project_id: wire::Id::new(&project_id),
        namespace: wire::Name::new(&namespace),
    };
    // The catalog's definition as the management side sends it: its default values.
    backend
        .accept(wire::AddonApply {
            addon: addon.clone(),
            revision: 1,
            definition: wire::Name::new("redis"),
            chart: wire::ChartRef {
                repository: "charts/addons".into(),
                name: "redis".into(),
                version: "1.0.0".into(),
            },
            values: serde_json::from_value(json!({
                "image": image, "persistence": {"enabled": true, "size": "1Gi"}}))
            .unwrap(),
            exports: [
                ("host", "{release}.{namespace}.svc"),
                ("password", "{password}"),
            ]
            .into_iter()
            .map(|(k, v)| (k.to_owned(), v.to_owned()))
            .collect(),
        })
        .await;
    let ready = backend
        .wait_for("the Redis addon Ready", REAL, |m| match m {
            Message::AddonStatus(s)
                if s.addon_id == addon.addon_id && s.phase == wire::AddonPhase::Ready =>
            {
                Some(s.clone())
            }
            _ => None,
        })
        .await;
    let client = edge.client().await.unwrap();
    let claims = Api::<PersistentVolumeClaim>::namespaced(client.clone(), &namespace)
        .list(&ListParams::default())
        .await
        .unwrap();
    let claim = claims.items.first().expect("a PersistentVolumeClaim");
    assert_eq!(
        claim.status.as_ref().and_then(|s| s.phase.as_deref()),
        Some("Bound")
    );
    assert_eq!(
        claim
            .spec
            .as_ref()
            .and_then(|s| s.storage_class_name.as_deref()),
        Some("local-path")
    );
    let secret = ready.export.unwrap().secret.as_str().to_owned();
    let exported = Api::<Secret>::namespaced(client.clone(), &namespace)
        .get(&secret)
        .await
        .unwrap()
        .data
        .unwrap();
    let host = String::from_utf8(exported["host"].0.clone()).unwrap();
    let pods = Api::<Pod>::namespaced(client.clone(), &namespace);
    assert_eq!(
        redis_cli(&pods, &image, &secret, &host, &["set", "greeting", "kept"]).await,
        "OK"
    );

    // The pod goes; the StatefulSet's new one mounts the same volume.
    let selector = ListParams::default().labels("app.kubernetes.io/name=redis");
    let old = pods.list(&selector).await.unwrap().items[0].clone();
    let old_uid = old.metadata.uid.clone();
    pods.delete(
        &old.metadata.name.clone().unwrap(),
        &DeleteParams::default(),
    )
    .await
    .unwrap();
    eventually("a new Redis pod Ready", REAL, async || {
        pods.list(&selector).await.unwrap().items.iter().any(|p| {
            p.metadata.uid != old_uid
                && p.status
                    .as_ref()
                    .and_then(|s| s.conditions.as_ref())
                    .is_some_and(|cs| cs.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
        })
    })
    .await;
    assert_eq!(
        redis_cli(&pods, &image, &secret, &host, &["get", "greeting"]).await,
        "kept"
    );
}

#[tokio::test]
async fn on_the_real_node_a_project_refuses_privileged_and_host_path_pods_and_charts_leaving_it() {
    let f = fixture();
    let client = f.edge.client().await.unwrap();
    let (_, namespace) = project(&f.backend, "walls").await;
    common::assert_pod_security_refuses(&client, &namespace).await;
    let (message, namespace) = refused_chart(&f.backend, f.repository.url(), "escape").await;
    assert_escape_refused(&client, &message, &namespace).await;
}

/// `project.ensure` of project `name` of organization `acme` on the fixture's agent, with
/// `fences`; its namespace.
async fn fenced_project(f: &Fixture, name: &str, fences: wire::Fences) -> String {
    let namespace = format!("{name}-{}", &uuid::Uuid::new_v4().simple().to_string()[..6]);
    ensure_fenced(f, name, &namespace, fences).await;
    namespace
}

/// `project.ensure` of project `name` (organization `acme`) in `namespace` with `fences`.
async fn ensure_fenced(f: &Fixture, name: &str, namespace: &str, fences: wire::Fences) {
    use kubenest_crds::names::labels;
    f.backend
        .accept(wire::ProjectEnsure {
            project_id: wire::Id::new(format!("p-{namespace}")),
            namespace: wire::Name::new(namespace),
            labels: [
                (labels::ORGANIZATION.to_owned(), "acme".to_owned()),
                (labels::PROJECT.to_owned(), name.to_owned()),
            ]
            .into(),
            registry_secret: None,
            pod_security: Default::default(),
            fences,
        })
        .await;
}

/// The agent's network fences hold on a node that enforces NetworkPolicies: a pod of project A
/// cannot open TCP to a pod of project B (isolated, the default), while B's own pods reach each
/// other and resolve names; once B allows A (`allow_from: [A]`), A's pods reach B's, and B's
/// still cannot reach A's (A allows no one).
#[tokio::test(flavor = "multi_thread")]
async fn fences_hold_between_projects() {
    use kubenest_testkit::probes;
    let f = fixture();
    probes::import_testbox(f.edge).await.unwrap();
    let shop = format!("shop{}", &uuid::Uuid::new_v4().simple().to_string()[..4]);
    let a = fenced_project(f, &shop, wire::Fences::default()).await;
    let b = fenced_project(f, "ledger", wire::Fences::default()).await;
    let (a_web, _) = probes::web_and_client(f.edge, &a).await.unwrap();
    let (b_web, _) = probes::web_and_client(f.edge, &b).await.unwrap();
    let reaches = |from: &str, ip: &str| {
        let (from, ip) = (from.to_owned(), ip.to_owned());
        async move { probes::reaches(f.edge, &from, "client", &ip).await }
    };
    // The policies' controller polices new pods within moments: once A cannot reach B, each
    // probe after is one try.
    probes::until("A refused by isolated B", || async {
        Ok(!reaches(&a, &b_web).await?)
    })
    .await
    .unwrap();
    assert!(reaches(&b, &b_web).await.unwrap(), "B did not reach itself");
    assert!(reaches(&a, &a_web).await.unwrap(), "A did not reach itself");
    assert!(!reaches(&b, &a_web).await.unwrap(), "B reached isolated A");
    let answer = probes::exec(
        f.edge,
        &b,
        "client",
        "nslookup kubernetes.default.svc.cluster.local 2>&1; true",
    )
    .await
    .unwrap();
    assert!(answer.contains("Address: 10.96."), "B's lookup: {answer}");

    let allow_a = wire::Fences {
        network: wire::NetworkFence {
            isolated: true,
            allow_from: vec![wire::Name::new(&shop)],
            egress: vec![],
        },
        ..wire::Fences::default()
    };
    ensure_fenced(f, "ledger", &b, allow_a).await;
    probes::until("A admitted by B", || reaches(&a, &b_web))
        .await
        .unwrap();
    assert!(
        !reaches(&b, &a_web).await.unwrap(),
        "B reached A, which allows no one"
    );
}
