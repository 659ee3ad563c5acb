//! The agent against real parts: a real workload cluster with kwok nodes, a real hub (Leases on
//! a real management cluster), a real bare git repository as the GitOps remote, and commands
//! from the controllers' own hub client over real sockets. One agent serves the whole test
//! binary; each test works in a project (namespace) of its own.

use crate::common;

use std::path::PathBuf;
use std::sync::OnceLock;
use std::time::Duration;

use crate::common::{Backend, app_ref, eventually, project, reference_app, web_app};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{Namespace, Secret, Service};
use kube::api::{Api, Patch, PatchParams};
use kubenest_agent::crd::StackDeploy;
use kubenest_contracts::{self as wire, AppPhase, Message, RejectReason};
use serde_json::json;

pub(crate) struct Fixture {
    pub(crate) backend: Backend,
    pub(crate) east: &'static kubenest_testkit::Cluster,
    bare: PathBuf,
    cluster_id: String,
}

pub(crate) const LONG: Duration = Duration::from_secs(90);

/// Starts (once) the clusters, the hub, the backend session and the agent on a runtime of their
/// own, which outlives every test's runtime.
pub(crate) fn fixture() -> &'static Fixture {
    static FIXTURE: OnceLock<Fixture> = OnceLock::new();
    FIXTURE.get_or_init(|| {
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let runtime = tokio::runtime::Runtime::new().unwrap();
            runtime.block_on(async move {
                let env = Box::leak(Box::new(
                    kubenest_testkit::Environment::builder()
                        .management("mgmt")
                        .workload("east", kubenest_testkit::NodePool::default())
                        .start()
                        .await
                        .unwrap(),
                ));
                let mgmt = env.management().unwrap();
                let east = env.cluster("east").unwrap();
                let shutdown = tokio_util::sync::CancellationToken::new();
                let (cluster_id, org_id) = ("c-east-1", "acme");
                let (url, backend, token) =
                    common::hub_with_backend(mgmt, cluster_id, org_id, &shutdown).await;
                let bare = common::bare_repository();
                let config = common::agent_config(
                    east,
                    &url,
                    token,
                    cluster_id,
                    org_id,
                    &bare,
                    common::SYSTEM,
                )
                .await;
                tokio::spawn(kubenest_agent::run(config, shutdown.clone()));
                tx.send(Fixture {
                    backend,
                    east,
                    bare,
                    cluster_id: cluster_id.into(),
                })
                .unwrap();
                std::future::pending::<()>().await;
            });
        });
        rx.recv().unwrap()
    })
}

async fn replicas(deployments: &Api<Deployment>, name: &str) -> Option<i32> {
    deployments.get(name).await.unwrap().spec.unwrap().replicas
}

/// The `dsn` and `password` an addon's export Secret holds.
async fn dsn_and_password(
    client: &kube::Client,
    namespace: &str,
    secret: &str,
) -> (String, String) {
    let data = Api::<Secret>::namespaced(client.clone(), namespace)
        .get(secret)
        .await
        .unwrap()
        .data
        .unwrap();
    let text = |key: &str| String::from_utf8(data[key].0.clone()).unwrap();
    (text("dsn"), text("password"))
}

fn app_id() -> String {
    uuid::Uuid::new_v4().to_string()
}

#[tokio::test]
async fn an_app_with_postgres_and_a_web_workload_runs_wired_to_the_dsn_and_committed_to_gitops() {
    let f = fixture();
    let (project, namespace) = project(&f.backend, "shop").await;
    let client = f.east.client().await.unwrap();
    let ns = Api::<Namespace>::all(client.clone())
        .get(&namespace)
        .await
        .unwrap();
    assert_eq!(
        ns.metadata.labels.unwrap()["kubenest.io/project-id"],
        project
    );

    let id = app_id();
    let app = app_ref(&id, "shop", &project, &namespace);
    f.backend
        .accept(reference_app(app.clone(), "r1", "nginx:1.27", 2))
        .await;
    // Durable before accepted: the StackDeploy holds the command.
    let held = Api::<StackDeploy>::namespaced(client.clone(), common::SYSTEM)
        .get(&format!("app-{id}"))
        .await
        .unwrap();
    assert_eq!(held.spec.deploy.revision, "r1");

    let running = f
        .backend
        .app_status("the App Running", LONG, &id, |s| {
            s.phase == AppPhase::Running
        })
        .await;
    assert_eq!(running.observed_revision, "r1");
    let kinds: Vec<(&str, bool)> = running
        .components
        .iter()
        .map(|c| (c.kind.as_str(), c.ready))
        .collect();
    assert_eq!(kinds, [("addon", true), ("workload", true)]);
    assert_eq!(running.exports[0].secret.as_str(), "shop-db-exports");
    assert!(running.exports[0].keys.contains(&"dsn".to_owned()));

    // The web Deployment reads DATABASE_URL from the export Secret; the value never left it.
    let web = Api::<Deployment>::namespaced(client.clone(), &namespace)
        .get("shop-web")
        .await
        .unwrap();
    let container = &web.spec.unwrap().template.spec.unwrap().containers[0];
    let env = container.env.clone().unwrap();
    let url = env.iter().find(|e| e.name == "DATABASE_URL").unwrap();
    let key_ref = url.value_from.clone().unwrap().secret_key_ref.unwrap();
    assert_eq!(
        (key_ref.name.as_str(), key_ref.key.as_str()),
        ("shop-db-exports", "dsn")
    );
    let (dsn, password) = dsn_and_password(&client, &namespace, "shop-db-exports").await;
    assert_eq!(
        dsn,
        format!("postgres://app:{password}@shop-db.{namespace}.svc:5432/app")
    );
    assert_eq!(password.len(), 32);

    // The addon's files are committed in the cluster's GitOps repository.
    let dir = format!("clusters/{}/addons/{namespace}-shop-db", f.cluster_id);
    let chart = common::committed(&f.bare, &format!("{dir}/Chart.yaml")).expect("Chart.yaml");
    assert!(
        chart.contains("name: postgres") && chart.contains("version: 1.0.0"),
        "{chart}"
    );
    let values = common::committed(&f.bare, &format!("{dir}/values.yaml")).expect("values.yaml");
    assert!(values.contains("size: 2Gi"), "{values}");
    assert!(
        !values.contains(&password),
        "the password never goes to git"
    );

    // Patch replicas: a new revision, applied and reported.
    f.backend
        .accept(reference_app(app.clone(), "r2", "nginx:1.27", 3))
        .await;
    f.backend
        .app_status("revision r2 Running", LONG, &id, |s| {
            s.observed_revision == "r2" && s.phase == AppPhase::Running
        })
        .await;
    let deployments = Api::<Deployment>::namespaced(client.clone(), &namespace);
    assert_eq!(replicas(&deployments, "shop-web").await, Some(3));

    // Scale behind the agent's back: drift is reported with the field and the manager, then
    // healed.
    deployments
        .patch_scale(
            "shop-web",
            &PatchParams {
                field_manager: Some("kubectl".into()),
                ..PatchParams::default()
            },
            &Patch::Merge(&json!({"spec": {"replicas": 7}})),
        )
        .await
        .unwrap();
    let drift = f
        .backend
        .wait_for("a drift report", LONG, |m| match m {
            Message::DriftReport(r) if r.app_id.as_str() == id && !r.details.is_empty() => {
                Some(r.clone())
            }
            _ => None,
        })
        .await;
    assert_eq!(drift.class, wire::DriftClass::Recoverable);
    let detail = &drift.details[0];
    assert_eq!(
        (detail.resource.as_str(), detail.field.as_str()),
        ("Deployment/shop-web", "spec.replicas")
    );
    assert_eq!(
        (detail.desired.clone(), detail.observed.clone()),
        (json!(3), json!(7))
    );
    assert_eq!(detail.manager.as_deref(), Some("kubectl"));
    eventually("the drift healed", LONG, async || {
        deployments
            .get("shop-web")
            .await
            .unwrap()
            .spec
            .unwrap()
            .replicas
            == Some(3)
    })
    .await;
    f.backend
        .wait_for("the drift cleared", LONG, |m| match m {
            Message::DriftReport(r) if r.app_id.as_str() == id && r.details.is_empty() => Some(()),
            _ => None,
        })
        .await;

    // Pause and resume.
    f.backend
        .accept(wire::AppPause {
            app: app.clone(),
            revision: "r2".into(),
        })
        .await;
    f.backend
        .app_status("paused", LONG, &id, |s| s.phase == AppPhase::Paused)
        .await;
    assert_eq!(replicas(&deployments, "shop-web").await, Some(0));
    f.backend
        .accept(wire::AppResume {
            app: app.clone(),
            revision: "r2".into(),
        })
        .await;
    f.backend
        .app_status("resumed", LONG, &id, |s| s.phase == AppPhase::Running)
        .await;
    assert_eq!(replicas(&deployments, "shop-web").await, Some(3));

    // Delete: everything the StackDeploy owned goes, the GitOps folder too.
    f.backend.accept(wire::AppDelete { app: app.clone() }).await;
    f.backend
        .app_status("deleted", LONG, &id, |s| s.phase == AppPhase::Deleted)
        .await;
    assert!(deployments.get_opt("shop-web").await.unwrap().is_none());
    let secrets = Api::<Secret>::namespaced(client.clone(), &namespace);
    assert!(secrets.get_opt("shop-db-exports").await.unwrap().is_none());
    let sts =
        Api::<k8s_openapi::api::apps::v1::StatefulSet>::namespaced(client.clone(), &namespace);
    assert!(sts.get_opt("shop-db").await.unwrap().is_none());
    assert_eq!(
        common::committed(&f.bare, &format!("{dir}/Chart.yaml")),
        None
    );
}

/// Drift is not only a Deployment's: a Service port changed by hand is reported with its kind,
/// field, values and manager, and applied back.
#[tokio::test]
async fn a_service_changed_by_hand_is_reported_as_drift_and_healed() {
    let f = fixture();
    let (project, namespace) = project(&f.backend, "svcdrift").await;
    let id = uuid::Uuid::new_v4().to_string();
    let app = app_ref(&id, "shop", &project, &namespace);
    f.backend
        .accept(web_app(app, "r1", "nginx:1.27", 1, 120))
        .await;
    f.backend
        .app_status("Running", LONG, &id, |s| s.phase == AppPhase::Running)
        .await;
    let services = Api::<Service>::namespaced(f.east.client().await.unwrap(), &namespace);
    services
        .patch(
            "shop-web",
            &PatchParams {
                field_manager: Some("kubectl-edit".into()),
                ..PatchParams::default()
            },
            &Patch::Merge(&json!({"spec": {"ports": [
                {"name": "http", "port": 9090, "targetPort": 8080, "protocol": "TCP"}]}})),
        )
        .await
        .unwrap();
    let drift = f
        .backend
        .wait_for("the Service's drift", LONG, |m| match m {
            Message::DriftReport(r)
                if r.app_id.as_str() == id
                    && r.details.iter().any(|d| d.resource == "Service/shop-web") =>
            {
                Some(r.clone())
            }
            _ => None,
        })
        .await;
    assert_eq!(drift.class, wire::DriftClass::Recoverable);
    let detail = drift
        .details
        .iter()
        .find(|d| d.resource == "Service/shop-web")
        .unwrap();
    assert_eq!(detail.field, "spec.ports", "{detail:?}");
    assert_eq!(detail.manager.as_deref(), Some("kubectl-edit"));
    assert_eq!(detail.desired[0]["port"], 8080);
    assert_eq!(detail.observed[0]["port"], 9090);
    eventually("the Service healed", LONG, async || {
        let live = services.get("shop-web").await.unwrap();
        live.spec.unwrap().ports.unwrap()[0].port == 8080
    })
    .await;
}

#[tokio::test]
async fn an_image_that_never_becomes_ready_blocks_sync_after_the_deadline() {
    let f = fixture();
    let (project, namespace) = project(&f.backend, "stuck").await;
    let id = app_id();
    let app = app_ref(&id, "stuck", &project, &namespace);
    f.backend
        .accept(web_app(app, "r1", "kubenest-test/web:never-ready", 2, 10))
        .await;
    let blocked = f
        .backend
        .wait_for("blocked_sync", LONG, |m| match m {
            Message::DriftReport(r)
                if r.app_id.as_str() == id && r.class == wire::DriftClass::BlockedSync =>
            {
                Some(r.clone())
            }
            _ => None,
        })
        .await;
    assert_eq!(
        blocked.details[0].observed,
        json!("ProgressDeadlineExceeded")
    );
    let failed = f
        .backend
        .app_status("Failed", LONG, &id, |s| s.phase == AppPhase::Failed)
        .await;
    assert!(!failed.components[0].ready);
    assert!(
        failed.components[0].message.contains("progress deadline"),
        "{:?}",
        failed.components
    );
}

#[tokio::test]
async fn a_deploy_into_a_namespace_outside_its_project_is_rejected_with_the_field() {
    let f = fixture();
    let (project, namespace) = project(&f.backend, "mine").await;
    let (other_project, other_namespace) = common::project(&f.backend, "theirs").await;
    assert_ne!(project, other_project);
    // Another project's namespace, and one kubenest does not manage.
    for target in [other_namespace.as_str(), "kube-system"] {
        let app = app_ref(&app_id(), "intruder", &project, target);
        let command = f
            .backend
            .send(web_app(app, "r1", "nginx:1.27", 1, 60))
            .await;
        let refused = f.backend.answer(command).await.unwrap_err();
        assert_eq!(refused.reason, RejectReason::NamespaceViolation);
        assert_eq!(refused.field.as_deref(), Some("/app/namespace"));
        // Nor are logs read there.
        let subscribe: wire::LogsSubscribe = serde_json::from_value(json!({
            "subscription_id": uuid::Uuid::new_v4().to_string(),
            "app": app_ref(&app_id(), "intruder", &project, target),
            "component": "web",
        }))
        .unwrap();
        let refused = f
            .backend
            .answer(f.backend.send(subscribe).await)
            .await
            .unwrap_err();
        assert_eq!(refused.reason, RejectReason::NamespaceViolation);
        assert_eq!(refused.field.as_deref(), Some("/app/namespace"));
    }
    // A StackDeploy written on the cluster directly is refused by its controller too, and the
    // refusal travels back as the App's status.
    let client = f.east.client().await.unwrap();
    let id = app_id();
    let deploy = web_app(
        app_ref(&id, "sneaky", &project, &other_namespace),
        "r1",
        "nginx:1.27",
        1,
        60,
    );
    let object = StackDeploy::new(
        &format!("app-{id}"),
        kubenest_agent::crd::StackDeploySpec {
            deploy,
            restart_id: None,
        },
    );
    Api::<StackDeploy>::namespaced(client.clone(), common::SYSTEM)
        .create(&Default::default(), &object)
        .await
        .unwrap();
    let status = f
        .backend
        .app_status("refused", LONG, &id, |s| s.phase == AppPhase::Failed)
        .await;
    assert_eq!(status.conditions[0].reason, "NamespaceViolation");
    assert!(
        Api::<Deployment>::namespaced(client.clone(), &other_namespace)
            .get_opt("sneaky-web")
            .await
            .unwrap()
            .is_none()
    );
    // A bad export reference names its field.
    let mut bad = reference_app(
        app_ref(&app_id(), "bad", &project, &namespace),
        "r1",
        "nginx:1.27",
        1,
    );
    if let wire::Component::Workload(w) = &mut bad.components[1] {
        w.env[0].from = wire::EnvFrom::ExportRef(wire::ExportRef {
            component: "db".into(),
            export: "uri".into(),
        });
    }
    let refused = f
        .backend
        .answer(f.backend.send(bad).await)
        .await
        .unwrap_err();
    assert_eq!(refused.reason, RejectReason::Invalid);
    assert_eq!(
        refused.field.as_deref(),
        Some("/components/1/env/0/export_ref/export")
    );
}

#[tokio::test]
async fn component_secrets_are_set_and_deleted_key_by_key_and_only_in_project_namespaces() {
    let f = fixture();
    let (_, namespace) = project(&f.backend, "secrets").await;
    let target = wire::SecretTarget {
        namespace: wire::Name::new(&namespace),
        secret: wire::Name::new("web-secrets"),
        app_id: None,
        credentials: false,
    };
    let set = |values: &[(&str, &str)]| wire::SecretSet {
        target: target.clone(),
        kind: wire::SecretKind::Opaque,
        values: values
            .iter()
            .map(|(k, v)| ((*k).to_owned(), wire::SecretValue((*v).to_owned())))
            .collect(),
    };
    f.backend
        .answer(
            f.backend
                .send(set(&[("API_KEY", "value-of-the-api-key")]))
                .await,
        )
        .await
        .unwrap();
    f.backend
        .answer(
            f.backend
                .send(set(&[("TOKEN", "value-of-the-token")]))
                .await,
        )
        .await
        .unwrap();
    let client = f.east.client().await.unwrap();
    let secrets = Api::<Secret>::namespaced(client.clone(), &namespace);
    let keys = |s: Secret| s.data.unwrap().keys().cloned().collect::<Vec<_>>();
    assert_eq!(
        keys(secrets.get("web-secrets").await.unwrap()),
        ["API_KEY", "TOKEN"]
    );
    let delete = wire::SecretDelete {
        target: target.clone(),
        keys: vec!["API_KEY".into()],
    };
    f.backend.accept(delete).await;
    assert_eq!(keys(secrets.get("web-secrets").await.unwrap()), ["TOKEN"]);
    // Nowhere but a project's namespace.
    let outside = wire::SecretSet {
        target: wire::SecretTarget {
            namespace: wire::Name::new("kube-system"),
            ..target.clone()
        },
        ..set(&[("X", "y")])
    };
    let refused = f
        .backend
        .answer(f.backend.send(outside).await)
        .await
        .unwrap_err();
    assert_eq!(refused.reason, RejectReason::NamespaceViolation);
    // The agent never echoes a value: no event carries one.
    let text = format!("{:?}", f.backend.events());
    assert!(!text.contains("value-of-the-api-key") && !text.contains("value-of-the-token"));
    let value = String::from_utf8(
        secrets.get("web-secrets").await.unwrap().data.unwrap()["TOKEN"]
            .0
            .clone(),
    )
    .unwrap();
    assert_eq!(value, "value-of-the-token");
}

/// The flow around a build on kwok, whose pods complete without running anything: the Job's
/// outcome becomes the build's, the workload then runs the pushed image, and the build pod's
/// log streams as the component's. `tests/builds.rs` builds for real on a real node.
#[tokio::test]
async fn a_git_workload_runs_the_image_its_build_job_pushed_and_streams_the_build_log() {
    let f = fixture();
    let (project, namespace) = project(&f.backend, "built").await;
    let id = app_id();
    let deploy: wire::AppDeploy = serde_json::from_value(json!({
        "app": app_ref(&id, "api", &project, &namespace),
        "revision": "abcdef0123456789",
        "progress_deadline_seconds": 120,
        "components": [{"kind": "workload", "name": "api", "replicas": 1, "port": 8080,
            "source": {"type": "git", "repository": "https://git.example.test/api.git",
                       "git_ref": "main", "mode": "dockerfile"}}]
    }))
    .unwrap();
    f.backend.accept(deploy).await;
    let built = f
        .backend
        .wait_for("the build succeeded", LONG, |m| match m {
            Message::BuildStatus(b)
                if b.phase == wire::BuildPhase::Succeeded
                    && b.build_id.as_str().starts_with("api-api") =>
            {
                Some(b.clone())
            }
            _ => None,
        })
        .await;
    let image = built.image.unwrap();
    assert_eq!(
        image,
        format!("builds.test/{namespace}/api-api:abcdef012345")
    );
    f.backend
        .app_status("running the built image", LONG, &id, |s| {
            s.phase == AppPhase::Running
        })
        .await;
    let client = f.east.client().await.unwrap();
    let web = Api::<Deployment>::namespaced(client.clone(), &namespace)
        .get("api-api")
        .await
        .unwrap();
    assert_eq!(
        web.spec.unwrap().template.spec.unwrap().containers[0]
            .image
            .as_deref(),
        Some(image.as_str())
    );
    let job = Api::<k8s_openapi::api::batch::v1::Job>::namespaced(client, &namespace)
        .get(&format!("build-{}", built.build_id.as_str()))
        .await
        .unwrap();
    let env = job.spec.unwrap().template.spec.unwrap().containers[0]
        .env
        .clone()
        .unwrap();
    // The repository goes to Git as it was given (https, ssh:// and git@ alike).
    assert!(
        env.iter().any(|e| e.name == "GIT_REPOSITORY"
            && e.value.as_deref() == Some("https://git.example.test/api.git")),
        "{env:?}"
    );

    // The build Job's log streams as the component's, tagged with the build pod.
    let log = f.east.kwok_log_file().unwrap();
    let marker = format!("building-{}", uuid::Uuid::new_v4().simple());
    let at = chrono::Utc::now().format("%Y-%m-%dT%H:%M:%S%.9fZ");
    let mut file = std::fs::OpenOptions::new().append(true).open(log).unwrap();
    std::io::Write::write_all(&mut file, format!("{at} stdout F {marker}\n").as_bytes()).unwrap();
    let subscription = wire::Id::new(uuid::Uuid::new_v4().to_string());
    let subscribe: wire::LogsSubscribe = serde_json::from_value(json!({
        "subscription_id": subscription,
        "app": app_ref(&id, "api", &project, &namespace),
        "component": "api",
        "tail_lines": 100,
    }))
    .unwrap();
    f.backend.send(subscribe).await;
    let build_pod = format!("build-{}", built.build_id.as_str());
    let line = f
        .backend
        .wait_for("the build pod's log line", LONG, |m| match m {
            Message::LogLines(l) if l.subscription_id == subscription => l
                .lines
                .iter()
                .find(|line| line.pod.starts_with(&build_pod) && line.line.ends_with(&marker))
                .cloned(),
            _ => None,
        })
        .await;
    assert!(line.pod.starts_with(&build_pod), "{line:?}");
}

#[tokio::test]
async fn heartbeats_carry_the_clusters_capacity_and_a_resync_sends_a_snapshot() {
    let f = fixture();
    let beat = f
        .backend
        .wait_for("a heartbeat", LONG, |m| match m {
            Message::Heartbeat(h) => Some(h.clone()),
            _ => None,
        })
        .await;
    assert_eq!(beat.node_count, 2);
    assert_eq!(beat.cpu_allocatable_millis, 8000);
    assert_eq!(beat.memory_allocatable_bytes, 16 * 1024 * 1024 * 1024);
    let before = f
        .backend
        .events()
        .iter()
        .filter(|m| matches!(m, Message::Snapshot(_)))
        .count();
    f.backend
        .send(wire::ResyncRequest {
            reason: "test".into(),
        })
        .await;
    eventually("a fresh snapshot", LONG, async || {
        f.backend
            .events()
            .iter()
            .filter(|m| matches!(m, Message::Snapshot(_)))
            .count()
            > before
    })
    .await;
}

/// This kwok cluster runs no ingress controller: the App waits for its Ingress's address,
/// saying so, and runs once something publishes one (here the test, as a controller would;
/// the real node's tests run a real one).
#[tokio::test]
async fn a_revision_that_drops_a_port_prunes_its_service_and_ingress() {
    let f = fixture();
    let (project, namespace) = project(&f.backend, "prune").await;
    let id = app_id();
    let app = app_ref(&id, "site", &project, &namespace);
    let mut with_ingress = web_app(app.clone(), "r1", "nginx:1.27", 1, 60);
    if let wire::Component::Workload(w) = &mut with_ingress.components[0] {
        w.ingress = Some(wire::Ingress {
            host: "site.example.test".into(),
            path: "/".into(),
            tls: false,
            tls_secret: None,
        });
    }
    f.backend.accept(with_ingress).await;
    let waiting = f
        .backend
        .app_status("r1 waiting for its ingress", LONG, &id, |s| {
            s.components.iter().any(|c| {
                c.message
                    .contains("no ingress controller has published an address")
            })
        })
        .await;
    assert_ne!(waiting.phase, AppPhase::Running, "{waiting:?}");
    let client = f.east.client().await.unwrap();
    let services =
        Api::<k8s_openapi::api::core::v1::Service>::namespaced(client.clone(), &namespace);
    let ingresses =
        Api::<k8s_openapi::api::networking::v1::Ingress>::namespaced(client.clone(), &namespace);
    assert!(services.get_opt("site-web").await.unwrap().is_some());
    let address = json!({"status": {"loadBalancer": {"ingress": [{"ip": "192.0.2.7"}]}}});
    ingresses
        .patch_status("site-web", &PatchParams::default(), &Patch::Merge(&address))
        .await
        .unwrap();
    let running = f
        .backend
        .app_status("r1 Running", LONG, &id, |s| s.phase == AppPhase::Running)
        .await;
    assert_eq!(
        running.ingress_address.as_deref(),
        Some("192.0.2.7"),
        "{running:?}"
    );

    let mut portless = web_app(app, "r2", "nginx:1.27", 1, 60);
    if let wire::Component::Workload(w) = &mut portless.components[0] {
        w.port = None;
    }
    f.backend.accept(portless).await;
    f.backend
        .app_status("r2 Running", LONG, &id, |s| {
            s.observed_revision == "r2" && s.phase == AppPhase::Running
        })
        .await;
    eventually("the Service and Ingress pruned", LONG, async || {
        services.get_opt("site-web").await.unwrap().is_none()
            && ingresses.get_opt("site-web").await.unwrap().is_none()
    })
    .await;
}

#[tokio::test]
async fn a_standalone_addon_keeps_its_revisions_commits_each_and_rolls_back() {
    let f = fixture();
    let (project, namespace) = project(&f.backend, "cache").await;
    let addon = wire::AddonRef {
        addon_id: wire::Id::new(format!(
            "ad-{}",
            &uuid::Uuid::new_v4().simple().to_string()[..8]
        )),
        name: wire::Name::new("sessions"),
        project_id: wire::Id::new(&project),
        namespace: wire::Name::new(&namespace),
    };
    let apply = |revision: u32, memory: &str| wire::AddonApply {
        addon: addon.clone(),
        revision,
        definition: wire::Name::new("redis"),
        chart: wire::ChartRef {
            repository: "charts/addons".into(),
            name: "redis".into(),
            version: "1.0.0".into(),
        },
        // kwok clusters have no volume provisioner.
        values: serde_json::from_value(json!({"resources": {"requests": {"memory": memory}},
                                              "persistence": {"enabled": false}}))
        .unwrap(),
        exports: [
            ("host", "{release}.{namespace}.svc"),
            ("port", "6379"),
            ("password", "{password}"),
            ("url", "redis://:{password}@{host}:{port}"),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .collect(),
    };
    let ready = |revision: u32| {
        let id = addon.addon_id.clone();
        move |m: &Message| match m {
            Message::AddonStatus(s)
                if s.addon_id == id
                    && s.observed_revision == revision
                    && s.phase == wire::AddonPhase::Ready =>
            {
                Some(s.clone())
            }
            _ => None,
        }
    };
    f.backend.accept(apply(1, "64Mi")).await;
    let first = f.backend.wait_for("revision 1 Ready", LONG, ready(1)).await;
    assert_eq!(first.export.unwrap().secret.as_str(), "sessions-exports");
    let values_path = format!(
        "clusters/{}/addons/{namespace}-sessions/values.yaml",
        f.cluster_id
    );
    assert!(
        common::committed(&f.bare, &values_path)
            .unwrap()
            .contains("64Mi")
    );

    f.backend.accept(apply(2, "128Mi")).await;
    let second = f.backend.wait_for("revision 2 Ready", LONG, ready(2)).await;
    assert_ne!(second.git_commit, first.git_commit);
    assert!(
        common::committed(&f.bare, &values_path)
            .unwrap()
            .contains("128Mi")
    );

    // A port changed behind the agent's back is reported with who changed it, at once (not at
    // the next full pass), put back, and then reported cleared.
    let services = Api::<Service>::namespaced(f.east.client().await.unwrap(), &namespace);
    services
        .patch(
            "sessions",
            &PatchParams {
                field_manager: Some("kubectl-edit".into()),
                ..PatchParams::default()
            },
            &Patch::Merge(&json!({"spec": {"ports": [
                {"name": "redis", "port": 6380, "targetPort": 6379, "protocol": "TCP"}]}})),
        )
        .await
        .unwrap();
    let id = addon.addon_id.clone();
    let drifted = f
        .backend
        .wait_for("the addon's drift", Duration::from_secs(30), |m| match m {
            Message::AddonStatus(s) if s.addon_id == id && !s.drift.is_empty() => Some(s.clone()),
            _ => None,
        })
        .await;
    let detail = &drifted.drift[0];
    assert_eq!(
        (detail.resource.as_str(), detail.field.as_str()),
        ("Service/sessions", "spec.ports"),
        "{detail:?}"
    );
    assert_eq!(detail.manager.as_deref(), Some("kubectl-edit"));
    assert_eq!(detail.observed[0]["port"], 6380);
    assert_eq!(detail.desired[0]["port"], 6379);
    eventually("the addon's Service healed", LONG, async || {
        let live = services.get("sessions").await.unwrap();
        live.spec.unwrap().ports.unwrap()[0].port == 6379
    })
    .await;
    let of_addon = |drifted: bool| {
        let id = id.clone();
        move |m: &Message| matches!(m, Message::AddonStatus(s) if s.addon_id == id && s.drift.is_empty() != drifted)
    };
    let found = f.backend.events().iter().position(of_addon(true)).unwrap();
    eventually("the addon's drift reported cleared", LONG, async || {
        f.backend.events()[found..].iter().any(of_addon(false))
    })
    .await;

    // A stale revision is refused; rolling back to 1 restores its values as revision 3.
    let stale = f
        .backend
        .answer(f.backend.send(apply(1, "1Gi")).await)
        .await
        .unwrap_err();
    assert_eq!(
        (stale.reason, stale.field.as_deref()),
        (RejectReason::Stale, Some("/revision"))
    );
    let rollback = wire::AddonRollback {
        addon: addon.clone(),
        revision: 3,
        to_revision: 1,
    };
    f.backend.accept(rollback).await;
    f.backend.wait_for("revision 3 Ready", LONG, ready(3)).await;
    assert!(
        common::committed(&f.bare, &values_path)
            .unwrap()
            .contains("64Mi")
    );
    let unknown = wire::AddonRollback {
        addon: addon.clone(),
        revision: 4,
        to_revision: 9,
    };
    let refused = f
        .backend
        .answer(f.backend.send(unknown).await)
        .await
        .unwrap_err();
    assert_eq!(refused.field.as_deref(), Some("/to_revision"));

    f.backend
        .answer(
            f.backend
                .send(wire::AddonDelete {
                    addon: addon.clone(),
                })
                .await,
        )
        .await
        .unwrap();
    let id = addon.addon_id.clone();
    f.backend
        .wait_for("the addon deleted", LONG, |m| match m {
            Message::AddonStatus(s) if s.addon_id == id && s.phase == wire::AddonPhase::Deleted => {
                Some(())
            }
            _ => None,
        })
        .await;
    assert_eq!(common::committed(&f.bare, &values_path), None);
}

#[tokio::test]
async fn an_addons_exports_say_what_its_chart_runs_with() {
    let f = fixture();
    let (project, namespace) = project(&f.backend, "exports").await;
    let client = f.east.client().await.unwrap();
    let id = app_id();
    let app = app_ref(&id, "orders", &project, &namespace);
    let mut deploy = reference_app(app, "r1", "nginx:1.27", 1);
    // The catalog's mapping: user and database from the values the chart is rendered with.
    if let wire::Component::Addon(db) = &mut deploy.components[0] {
        db.exports.insert("user".into(), "{values.user}".into());
        db.exports
            .insert("database".into(), "{values.database}".into());
        db.values.insert("user".into(), json!("shop"));
        db.values.insert("database".into(), json!("orders"));
    }
    f.backend.accept(deploy).await;
    f.backend
        .app_status("the App Running", LONG, &id, |s| {
            s.phase == AppPhase::Running
        })
        .await;
    let (dsn, password) = dsn_and_password(&client, &namespace, "orders-db-exports").await;
    assert_eq!(
        dsn,
        format!("postgres://shop:{password}@orders-db.{namespace}.svc:5432/orders")
    );
    // The database the chart makes is the one the DSN names.
    let statefulset =
        Api::<k8s_openapi::api::apps::v1::StatefulSet>::namespaced(client, &namespace)
            .get("orders-db")
            .await
            .unwrap();
    let env = statefulset.spec.unwrap().template.spec.unwrap().containers[0]
        .env
        .clone()
        .unwrap();
    let value = |name: &str| {
        env.iter()
            .find(|e| e.name == name)
            .and_then(|e| e.value.clone())
    };
    assert_eq!(value("POSTGRES_DB").as_deref(), Some("orders"));
    assert_eq!(value("POSTGRES_USER").as_deref(), Some("shop"));
}

/// On kwok (pod signals only: no metrics declared), a verified revision that runs passes at the
/// end of its window; its progress is kept in its StackDeploy.
#[tokio::test]
async fn a_verified_revision_without_metrics_passes_on_its_pods_at_the_end_of_its_window() {
    let f = fixture();
    let (project, namespace) = project(&f.backend, "verified").await;
    let id = uuid::Uuid::new_v4().to_string();
    let app = app_ref(&id, "shop", &project, &namespace);
    let mut deploy = web_app(app, "r1", "nginx:1.27", 2, 120);
    deploy.verification = Some(wire::Verification {
        window_seconds: 30,
        metrics: None,
    });
    f.backend.accept(deploy).await;
    f.backend
        .app_status("Running", LONG, &id, |s| s.phase == AppPhase::Running)
        .await;
    let stacks = Api::<StackDeploy>::namespaced(f.east.client().await.unwrap(), "kubenest-system");
    let mut kept = None;
    eventually("the window kept in the StackDeploy", LONG, async || {
        let held = stacks.get(&format!("app-{id}")).await.unwrap();
        kept = held.status.and_then(|s| s.verification);
        kept.is_some()
    })
    .await;
    let kept = kept.unwrap();
    assert_eq!(kept["revision"], "r1", "{kept}");
    let passed = f
        .backend
        .wait_for("r1's verdict", LONG, |m| match m {
            Message::VerificationResult(r) if r.app_id.as_str() == id => Some(r.clone()),
            _ => None,
        })
        .await;
    assert_eq!(passed.verdict, wire::Verdict::Passed, "{passed:?}");
    assert_eq!(passed.window_seconds, 30);
    assert!(passed.observed_at - passed.started_at >= chrono::Duration::seconds(30));
}
