//! The agent with the chart's least-privilege RBAC, on a real API server: the chart's RBAC
//! (`charts/kubenest-agent/templates/rbac.yaml`, rendered by helm and applied), the agent
//! running with a token of the chart's ServiceAccount and nothing else, a real hub and the
//! controllers' hub client. A project gets the agent's RoleBinding, and an App with a Postgres
//! addon runs in it; outside project namespaces the same identity can read capacity but cannot
//! read a Secret, write a workload, bind itself or claim a namespace, and inside them bind its
//! project role to anyone but itself, whether RBAC or the chart's ValidatingAdmissionPolicy
//! stops it.

use crate::common;

use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::common::{app_ref, project, reference_app};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::authentication::v1::TokenRequest;
use k8s_openapi::api::core::v1::{Namespace, Node, Secret, ServiceAccount};
use k8s_openapi::api::rbac::v1::RoleBinding;
use kube::api::{Api, ListParams, Patch, PatchParams, PostParams};
use kubenest_agent::apply::{PROJECT_BINDING, ProjectGrant};
use kubenest_contracts::{self as wire, AppPhase, RejectReason};
use serde_json::json;

/// The release the chart is rendered as (the registration's install command names it so).
const RELEASE: &str = "kubenest-agent";

fn chart() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../charts/kubenest-agent")
}

/// The chart's RBAC objects applied to `cluster` into `namespace`, as `helm install` would.
fn apply_chart_rbac(cluster: &kubenest_testkit::Cluster, namespace: &str) {
    let rendered = kubenest_testkit::tools::helm(&[
        "template",
        RELEASE,
        chart().to_str().unwrap(),
        "--namespace",
        namespace,
        "--show-only",
        "templates/rbac.yaml",
        "--set",
        "hub.url=wss://hub.kubenest.test:443/v1/connect",
        "--set",
        "token=a.b.c",
    ])
    .unwrap();
    assert!(
        rendered.status.success(),
        "{}",
        String::from_utf8_lossy(&rendered.stderr)
    );
    let manifest = String::from_utf8(rendered.stdout).unwrap();
    let applied = kubenest_testkit::tools::server_apply(cluster, namespace, &manifest).unwrap();
    assert!(
        applied.status.success(),
        "{}",
        String::from_utf8_lossy(&applied.stderr)
    );
}

/// A client of `cluster` that authenticates as the chart's ServiceAccount only (a token from
/// the TokenRequest API, no client certificate), as the agent's pod would.
async fn agent_client(
    cluster: &kubenest_testkit::Cluster,
    admin: &kube::Client,
    dir: &Path,
) -> kube::Client {
    let accounts: Api<ServiceAccount> = Api::namespaced(admin.clone(), common::SYSTEM);
    let request: TokenRequest = serde_json::from_value(json!({
        "spec": {"audiences": [], "expirationSeconds": 3600}
    }))
    .unwrap();
    let token = accounts
        .create_token_request(RELEASE, &PostParams::default(), &request)
        .await
        .unwrap()
        .status
        .unwrap()
        .token;
    let mut kubeconfig: serde_yaml::Value =
        serde_yaml::from_str(&std::fs::read_to_string(cluster.kubeconfig_path()).unwrap()).unwrap();
    for user in kubeconfig["users"].as_sequence_mut().unwrap() {
        user["user"] = serde_yaml::to_value(json!({"token": token})).unwrap();
    }
    let path = dir.join("agent.kubeconfig");
    std::fs::write(&path, serde_yaml::to_string(&kubeconfig).unwrap()).unwrap();
    kubenest_runtime::kube::client(Some(&path)).await.unwrap()
}

/// The status code of a refused request, or the message of a policy's refusal.
fn refusal(result: Result<impl std::fmt::Debug, kube::Error>) -> (u16, String) {
    match result {
        Err(kube::Error::Api(status)) => (status.code, status.message),
        other => panic!("not refused: {other:?}"),
    }
}

#[test]
fn the_agent_runs_an_app_with_namespaced_powers_and_is_fenced_outside_project_namespaces() {
    let runtime = tokio::runtime::Runtime::new().unwrap();
    runtime.block_on(async {
        let env = kubenest_testkit::Environment::builder()
            .management("mgmt")
            .workload("east", kubenest_testkit::NodePool::default())
            .start()
            .await
            .unwrap();
        let mgmt = env.management().unwrap();
        let east = env.cluster("east").unwrap();
        let admin = east.client().await.unwrap();
        // What `helm install` does before the agent starts: its namespace, CRDs and RBAC.
        common::system_namespace(&admin).await;
        kubenest_agent::ensure_crds(&admin).await.unwrap();
        apply_chart_rbac(east, common::SYSTEM);

        let shutdown = tokio_util::sync::CancellationToken::new();
        let (cluster_id, org_id) = ("c-east-lp", "acme");
        let (url, backend, token) =
            common::hub_with_backend(mgmt, cluster_id, org_id, &shutdown).await;
        let dir = tempfile::tempdir().unwrap();
        let agent = agent_client(east, &admin, dir.path()).await;
        let bare = common::bare_repository();
        let mut config =
            common::agent_config(east, &url, token, cluster_id, org_id, &bare, common::SYSTEM)
                .await;
        config.client = agent.clone();
        config.install_crds = false;
        config.project_grant = Some(ProjectGrant {
            role: format!("{RELEASE}-project"),
            service_account: (common::SYSTEM.into(), RELEASE.into()),
        });
        let running = tokio::spawn(kubenest_agent::run(config, shutdown.clone()));

        // A project: its namespace, and in it the agent's binding of its project role.
        let (project_id, namespace) = project(&backend, "lp").await;
        let binding = Api::<RoleBinding>::namespaced(admin.clone(), &namespace)
            .get(PROJECT_BINDING)
            .await
            .unwrap();
        assert_eq!(binding.role_ref.name, format!("{RELEASE}-project"));
        assert_eq!(binding.role_ref.kind, "ClusterRole");

        // An App with a Postgres addon runs there: rendered, applied, watched, its exports
        // Secret written, all with the namespaced powers.
        let app_id = uuid::Uuid::new_v4().to_string();
        let app = app_ref(&app_id, "shop", &project_id, &namespace);
        backend
            .accept(reference_app(app, "r1", "nginx:1.27", 1))
            .await;
        let status = backend
            .app_status("the App Running", Duration::from_secs(120), &app_id, |s| {
                s.phase == AppPhase::Running
            })
            .await;
        assert_eq!(status.observed_revision, "r1");
        Api::<Secret>::namespaced(admin.clone(), &namespace)
            .get("shop-db-exports")
            .await
            .unwrap();
        // A change of its Deployment behind its back is seen through the namespaced watch and
        // healed.
        let deployments: Api<Deployment> = Api::namespaced(admin.clone(), &namespace);
        deployments
            .patch(
                "shop-web",
                &PatchParams::default(),
                &Patch::Merge(json!({"spec": {"replicas": 4}})),
            )
            .await
            .unwrap();
        common::eventually("the drift healed", Duration::from_secs(60), async || {
            deployments
                .get("shop-web")
                .await
                .unwrap()
                .spec
                .unwrap()
                .replicas
                == Some(1)
        })
        .await;

        // Cluster-wide it reads capacity, and nothing else.
        Api::<Node>::all(agent.clone())
            .list(&ListParams::default())
            .await
            .unwrap();
        let (code, _) = refusal(
            Api::<Secret>::all(agent.clone())
                .list(&ListParams::default())
                .await,
        );
        assert_eq!(code, 403, "secrets across the cluster");
        let (code, _) = refusal(
            Api::<Secret>::namespaced(agent.clone(), "default")
                .list(&ListParams::default())
                .await,
        );
        assert_eq!(code, 403, "secrets outside project namespaces");
        let web: Deployment = serde_json::from_value(json!({
            "metadata": {"name": "intruder"},
            "spec": {"selector": {"matchLabels": {"a": "b"}}, "template": {
                "metadata": {"labels": {"a": "b"}},
                "spec": {"containers": [{"name": "c", "image": "nginx:1.27"}]}}}
        }))
        .unwrap();
        let (code, _) = refusal(
            Api::<Deployment>::namespaced(agent.clone(), "default")
                .create(&PostParams::default(), &web)
                .await,
        );
        assert_eq!(code, 403, "workloads outside project namespaces");

        // RBAC lets it create RoleBindings anywhere (it must, in namespaces it has just made);
        // the chart's admission policy keeps them in project namespaces.
        let grant = ProjectGrant {
            role: format!("{RELEASE}-project"),
            service_account: (common::SYSTEM.into(), RELEASE.into()),
        };
        let (code, message) = refusal(
            Api::<RoleBinding>::namespaced(agent.clone(), "default")
                .create(
                    &PostParams::default(),
                    &serde_json::from_value(grant.role_binding("default")).unwrap(),
                )
                .await,
        );
        assert_eq!(code, 403, "{message}");
        assert!(
            message.contains("binds only its project role, and only in a project namespace"),
            "{message}"
        );
        // In a project namespace it binds its project role to itself only: not to the
        // project's pods (the namespace's default ServiceAccount), nor to a user or group.
        for (kind, subject_ns) in [
            ("ServiceAccount", Some(namespace.as_str())),
            ("Group", None),
        ] {
            let mut binding = grant.role_binding(&namespace);
            binding["metadata"]["name"] = "widened".into();
            binding["subjects"] = json!([{
                "kind": kind,
                "name": if kind == "Group" { "system:authenticated" } else { "default" },
                "namespace": subject_ns,
                "apiGroup": if kind == "Group" { "rbac.authorization.k8s.io" } else { "" },
            }]);
            let (code, message) = refusal(
                Api::<RoleBinding>::namespaced(agent.clone(), &namespace)
                    .create(
                        &PostParams::default(),
                        &serde_json::from_value(binding).unwrap(),
                    )
                    .await,
            );
            assert_eq!(code, 403, "{kind}: {message}");
            assert!(
                message.contains("binds its project role only to its own ServiceAccount"),
                "{message}"
            );
        }
        // Nor can it make another namespace a project's to bind itself there.
        let (code, message) = refusal(
            Api::<Namespace>::all(agent.clone())
                .patch(
                    "default",
                    &PatchParams::default(),
                    &Patch::Merge(
                        json!({"metadata": {"labels": {"kubenest.io/project-id": "p-x"}}}),
                    ),
                )
                .await,
        );
        assert_eq!(code, 403, "{message}");
        assert!(
            message.contains("changes and deletes only project namespaces"),
            "{message}"
        );
        let (code, _) = refusal(
            Api::<Namespace>::all(agent.clone())
                .delete("default", &Default::default())
                .await,
        );
        assert_eq!(code, 403, "deleting a namespace that is no project's");
        // And the hub's commands cannot send it there either.
        let refused = backend
            .send(wire::ProjectEnsure {
                project_id: wire::Id::new("p-intruder"),
                namespace: wire::Name::new("default"),
                labels: Default::default(),
                registry_secret: None,
                pod_security: Default::default(),
                fences: Default::default(),
            })
            .await;
        let refused = backend.answer(refused).await.unwrap_err();
        assert_eq!(refused.reason, RejectReason::NamespaceViolation);

        shutdown.cancel();
        let _ = tokio::time::timeout(Duration::from_secs(10), running).await;
    });
}
