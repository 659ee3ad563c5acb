//! Helm-chart workloads against real parts: third-party charts served by a real chart
//! repository and by a real OCI registry (both over TLS of a private CA; the registry with an
//! account and nothing anonymous), rendered by the agent's helm and applied to a real workload
//! cluster with kwok nodes. A chart from a private registry is pulled with the
//! project's registry credentials (its `kubernetes.io/dockerconfigjson` Secret, read on the
//! cluster), and a project without them gets the registry's refusal as its revision's failure.
//! A chart that renders a cluster-scoped object or a RoleBinding fails its revision naming it,
//! with nothing of it applied, and so does one whose claim names another tenant's volume; project namespaces enforce Pod Security's baseline. A pull never
//! reaches the cluster's own network unless its source is one of the agent's chart sources: not
//! at its first URL, nor through a redirect or an index's chart URL.

use crate::common;

use std::sync::OnceLock;
use std::time::Duration;

use crate::common::charts::{ESCAPE, assert_escape_refused, refused_chart};
use crate::common::{Backend, app_ref, project, project_with_registry, secret_set};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{ConfigMap, PersistentVolume, PersistentVolumeClaim, Secret};
use kube::api::Api;
use kubenest_agent::egress::Egress;
use kubenest_contracts::{self as wire, AppPhase, Message};
use kubenest_domain::sources::AllowList;
use kubenest_testkit::{ChartRepository, Registry, ServerCa};
use serde_json::{Value, json};

struct Fixture {
    backend: Backend,
    east: &'static kubenest_testkit::Cluster,
    repository: ChartRepository,
    registry: Registry,
    /// `oci://…/charts` of the registry, where [`WEBAPP`] was pushed.
    oci: String,
    /// A repository with [`WEBAPP`] that is not one of the agent's chart sources.
    detour: ChartRepository,
    /// An allowed repository that redirects every request to [`PRIVATE`].
    bouncer: ChartRepository,
    /// An allowed repository whose index puts [`WEBAPP`]'s package at [`PRIVATE`].
    pointer: ChartRepository,
    /// The agent's GitOps remote.
    bare: std::path::PathBuf,
}

/// An address on the cluster's own network (private), which no test server holds.
const PRIVATE: &str = "10.255.255.1:8443";

const LONG: Duration = Duration::from_secs(90);

/// A chart that is not kubenest's: a Deployment of `replicaCount` replicas, and a ConfigMap
/// recording every value the chart was given.
const WEBAPP: [(&str, &str); 4] = [
    (
        "Chart.yaml",
        "apiVersion: v2\nname: webapp\nversion: 0.3.0\n",
    ),
    ("values.yaml", "replicaCount: 1\nimage: nginx:1.27\n"),
    (
        "templates/deployment.yaml",
        "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: {{ .Release.Name }}-webapp\n\
         spec:\n  replicas: {{ .Values.replicaCount }}\n  selector:\n    matchLabels: {app: {{ .Release.Name }}}\n\
         \x20 template:\n    metadata:\n      labels: {app: {{ .Release.Name }}}\n    spec:\n\
         \x20     containers:\n        - name: web\n          image: {{ .Values.image }}\n",
    ),
    (
        "templates/values.yaml",
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{ .Release.Name }}-values\n\
         data:\n  values.json: {{ toJson .Values | quote }}\n",
    ),
];

/// A chart of every kind that runs or holds something beside a Deployment: a Service (of the
/// pods labelled `app: <serves>`, default the Deployment's), a DaemonSet, a CronJob, and (with
/// `claim`) a PersistentVolumeClaim, which no provisioner of the kwok cluster ever binds.
const WORKS: [(&str, &str); 2] = [
    (
        "Chart.yaml",
        "apiVersion: v2\nname: works\nversion: 0.1.0\n",
    ),
    (
        "templates/all.yaml",
        r#"apiVersion: apps/v1
kind: Deployment
metadata: {name: "{{ .Release.Name }}-web"}
spec:
  replicas: 2
  {{- with .Values.deadline }}
  progressDeadlineSeconds: {{ . }}
  {{- end }}
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      containers: [{name: web, image: "{{ .Values.image | default "nginx:1.27" }}"}]
---
apiVersion: v1
kind: Service
metadata: {name: "{{ .Release.Name }}-web"}
spec:
  selector: {app: "{{ .Values.serves | default "web" }}"}
  ports: [{port: 80}]
---
apiVersion: apps/v1
kind: DaemonSet
metadata: {name: "{{ .Release.Name }}-node"}
spec:
  selector: {matchLabels: {app: node}}
  template:
    metadata: {labels: {app: node}}
    spec:
      containers: [{name: node, image: "{{ .Values.nodeImage | default "busybox:1.36" }}"}]
---
apiVersion: batch/v1
kind: CronJob
metadata: {name: "{{ .Release.Name }}-report"}
spec:
  schedule: "*/30 * * * *"
  jobTemplate:
    spec:
      template:
        spec:
          restartPolicy: Never
          containers: [{name: report, image: "busybox:1.36"}]
{{- if .Values.claim }}
---
apiVersion: v1
kind: PersistentVolumeClaim
metadata: {name: "{{ .Release.Name }}-data"}
spec:
  accessModes: [ReadWriteOnce]
  resources: {requests: {storage: 1Gi}}
{{- end }}
"#,
    ),
];

/// The pre-provisioned volume [`SQUATTER`] tries to take: made by the test as a platform team
/// makes volumes for one tenant, Available until its tenant's claim binds it. Its storage class
/// is its own, so no other test's claim (of no class) binds it.
const TENANT_VOLUME: &str = "volume-of-another-tenant";

/// A chart whose claim names another tenant's volume (`spec.volumeName`), after a ConfigMap.
const SQUATTER: [(&str, &str); 2] = [
    (
        "Chart.yaml",
        "apiVersion: v2\nname: squatter\nversion: 0.1.0\n",
    ),
    (
        "templates/all.yaml",
        r#"apiVersion: v1
kind: ConfigMap
metadata: {name: "{{ .Release.Name }}-settings"}
data: {a: b}
---
apiVersion: v1
kind: PersistentVolumeClaim
metadata: {name: "{{ .Release.Name }}-data"}
spec:
  accessModes: [ReadWriteOnce]
  storageClassName: tenant-reserved
  volumeName: volume-of-another-tenant
  resources: {requests: {storage: 1Gi}}
"#,
    ),
];

/// A chart that binds a role in its own namespace: a RoleBinding after a ConfigMap.
const BINDER: [(&str, &str); 2] = [
    (
        "Chart.yaml",
        "apiVersion: v2\nname: binder\nversion: 0.1.0\n",
    ),
    (
        "templates/all.yaml",
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{ .Release.Name }}-settings\n\
         data:\n  a: b\n---\n\
         apiVersion: rbac.authorization.k8s.io/v1\nkind: RoleBinding\nmetadata:\n  name: {{ .Release.Name }}-admin\n\
         roleRef:\n  apiGroup: rbac.authorization.k8s.io\n  kind: ClusterRole\n  name: admin\n\
         subjects:\n  - kind: ServiceAccount\n    name: default\n",
    ),
];

/// A chart whose Deployment reads Secret `secret` into its environment (chart `name`).
fn peeker(name: &str, secret: &str) -> [(String, String); 2] {
    [
        (
            "Chart.yaml".into(),
            format!("apiVersion: v2\nname: {name}\nversion: 0.1.0\n"),
        ),
        (
            "templates/deployment.yaml".into(),
            format!(
                "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: {{{{ .Release.Name }}}}-peek\n\
                 spec:\n  selector:\n    matchLabels: {{app: peek}}\n  template:\n    metadata:\n      labels: {{app: peek}}\n\
                 \x20   spec:\n      containers:\n        - name: peek\n          image: busybox:1.36\n\
                 \x20         envFrom:\n            - secretRef: {{name: {secret}}}\n"
            ),
        ),
    ]
}

/// A Git workload's repository Secret that [`peeker`]'s `gitpeeker` chart reads.
const GIT_SECRET: &str = "site-build-git";

/// Starts (once) the clusters, the chart servers, the hub, the backend session and the agent
/// (trusting the registry's CA) on a runtime of their own, which outlives every test's runtime.
fn fixture() -> &'static Fixture {
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
                let (mgmt, east) = (env.management().unwrap(), env.cluster("east").unwrap());
                let dir = Box::leak(Box::new(tempfile::tempdir().unwrap()));
                let ca = ServerCa::generate(dir.path()).unwrap();
                let repository = ChartRepository::start(&ca).await.unwrap();
                repository.publish("webapp", &WEBAPP).unwrap();
                repository.publish("escape", &ESCAPE).unwrap();
                repository.publish("binder", &BINDER).unwrap();
                repository.publish("squatter", &SQUATTER).unwrap();
                repository.publish("works", &WORKS).unwrap();
                for (name, secret) in [("peeker", wire::REGISTRY_SECRET), ("gitpeeker", GIT_SECRET)]
                {
                    let files = peeker(name, secret);
                    let files: Vec<(&str, &str)> = files
                        .iter()
                        .map(|(p, t)| (p.as_str(), t.as_str()))
                        .collect();
                    repository.publish(name, &files).unwrap();
                }
                let registry = Registry::start([127, 0, 0, 1].into(), &ca).await.unwrap();
                let package =
                    kubenest_testkit::package_chart("webapp", &WEBAPP, dir.path()).unwrap();
                let oci = registry.push_chart(&package).unwrap();
                let detour = ChartRepository::start(&ca).await.unwrap();
                detour.publish("webapp", &WEBAPP).unwrap();
                let bouncer = ChartRepository::start(&ca).await.unwrap();
                bouncer.redirect_to(&format!("https://{PRIVATE}"));
                let pointer = ChartRepository::start(&ca).await.unwrap();
                pointer.publish("webapp", &WEBAPP).unwrap();
                pointer.index_at(&format!("https://{PRIVATE}")).unwrap();
                // The agent's chart sources: every server of the test but the detour.
                let sources = [repository.url(), &oci, bouncer.url(), pointer.url()];
                let egress = Egress::new(AllowList::parse(&sources).unwrap());
                let shutdown = tokio_util::sync::CancellationToken::new();
                let bare = common::bare_repository();
                let remote = bare.clone();
                let backend = common::agent_on(mgmt, east, &shutdown, |config| {
                    if let Some(gitops) = config.gitops.as_mut() {
                        gitops.0 = remote.display().to_string();
                    }
                    config.helm = config
                        .helm
                        .clone()
                        .with_ca_file(Some(ca.path.clone()))
                        .with_egress(egress);
                })
                .await;
                tx.send(Fixture {
                    backend,
                    east,
                    repository,
                    registry,
                    oci,
                    detour,
                    bouncer,
                    pointer,
                    bare,
                })
                .unwrap();
                std::future::pending::<()>().await;
            });
        });
        rx.recv().unwrap()
    })
}

/// `app.deploy` of App `site` with one chart workload `web` of `repository`'s `webapp`.
fn chart_app(app: wire::AppRef, revision: &str, repository: &str) -> wire::AppDeploy {
    serde_json::from_value(json!({
        "app": app, "revision": revision, "progress_deadline_seconds": 120,
        "components": [{"kind": "workload", "name": "web", "replicas": 1, "source": {
            "type": "helm",
            "chart": {"repository": repository, "name": "webapp", "version": "0.3.0"},
            "values": {"replicaCount": 2}}}]
    }))
    .unwrap()
}

/// The values the chart recorded it was given (its ConfigMap).
async fn recorded_values(client: &kube::Client, namespace: &str) -> serde_json::Value {
    let recorded = Api::<ConfigMap>::namespaced(client.clone(), namespace)
        .get("site-web-values")
        .await
        .unwrap();
    serde_json::from_str(&recorded.data.unwrap()["values.json"]).unwrap()
}

async fn replicas(client: &kube::Client, namespace: &str) -> Option<i32> {
    Api::<Deployment>::namespaced(client.clone(), namespace)
        .get("site-web-webapp")
        .await
        .ok()?
        .spec?
        .replicas
}

#[tokio::test]
async fn a_chart_workload_runs_from_a_chart_repository_with_its_values_and_nothing_of_kubenests() {
    let f = fixture();
    let (project, namespace) = project(&f.backend, "chart").await;
    let client = f.east.client().await.unwrap();
    let id = uuid::Uuid::new_v4().to_string();
    let app = app_ref(&id, "site", &project, &namespace);
    f.backend
        .accept(chart_app(app, "r1", f.repository.url()))
        .await;
    f.backend
        .app_status("the chart workload Running", LONG, &id, |s| {
            s.phase == AppPhase::Running
        })
        .await;
    assert_eq!(replicas(&client, &namespace).await, Some(2));
    // The chart got the App's values over its own defaults, and nothing else.
    assert_eq!(
        recorded_values(&client, &namespace).await,
        json!({"replicaCount": 2, "image": "nginx:1.27"})
    );
    // No export Secret: a chart workload publishes nothing.
    assert!(
        Api::<Secret>::namespaced(client.clone(), &namespace)
            .get_opt("site-web-exports")
            .await
            .unwrap()
            .is_none()
    );
    // What the chart rendered and someone changed by hand is reported as drift and applied
    // back, whatever its kind.
    let configs = Api::<ConfigMap>::namespaced(client.clone(), &namespace);
    configs
        .patch(
            "site-web-values",
            &kube::api::PatchParams {
                field_manager: Some("kubectl-edit".into()),
                ..Default::default()
            },
            &kube::api::Patch::Merge(&json!({"data": {"values.json": "{}"}})),
        )
        .await
        .unwrap();
    let drift = f
        .backend
        .wait_for("the chart's drift", LONG, |m| match m {
            kubenest_contracts::Message::DriftReport(r)
                if r.app_id.as_str() == id
                    && r.details
                        .iter()
                        .any(|d| d.resource == "ConfigMap/site-web-values") =>
            {
                Some(r.clone())
            }
            _ => None,
        })
        .await;
    let detail = drift
        .details
        .iter()
        .find(|d| d.resource == "ConfigMap/site-web-values")
        .unwrap();
    assert_eq!(
        (detail.field.as_str(), detail.manager.as_deref()),
        ("data.values.json", Some("kubectl-edit"))
    );
    common::eventually("the chart's ConfigMap healed", LONG, async || {
        recorded_values(&client, &namespace).await
            == json!({"replicaCount": 2, "image": "nginx:1.27"})
    })
    .await;
    // Nor is it committed to the GitOps repository: that records addons, not the App's own.
    let folder = format!("clusters/c-edge-1/addons/{namespace}-site-web");
    for file in ["Chart.yaml", "manifests.yaml"] {
        let committed = common::committed(&f.bare, &format!("{folder}/{file}"));
        assert_eq!(committed, None, "{file}");
    }
}

#[tokio::test]
async fn a_chart_from_a_private_oci_registry_is_pulled_with_the_projects_credentials_only() {
    let f = fixture();
    let (project, namespace) = project_with_registry(&f.backend, "oci").await;
    let client = f.east.client().await.unwrap();
    let id = uuid::Uuid::new_v4().to_string();
    let app = app_ref(&id, "site", &project, &namespace);

    // No credentials yet: the registry refuses the pull, and the revision fails saying so.
    f.backend.accept(chart_app(app.clone(), "r1", &f.oci)).await;
    let refused = f
        .backend
        .app_status("the unauthorized pull Failed", LONG, &id, |s| {
            s.observed_revision == "r1" && s.phase == AppPhase::Failed
        })
        .await;
    let message = &refused.components[0].message;
    assert!(
        message.contains("helm template failed") && message.contains("credential"),
        "{refused:#?}"
    );
    assert_eq!(replicas(&client, &namespace).await, None);

    // The project's registry credentials, set on the cluster: the next revision pulls with them.
    f.backend
        .accept(secret_set(
            &namespace,
            wire::REGISTRY_SECRET,
            None,
            wire::SecretKind::DockerConfigJson,
            &[(".dockerconfigjson", &f.registry.docker_config_json())],
        ))
        .await;
    f.backend.accept(chart_app(app, "r2", &f.oci)).await;
    let running = f
        .backend
        .app_status("the OCI chart workload Running", LONG, &id, |s| {
            s.observed_revision == "r2" && matches!(s.phase, AppPhase::Running | AppPhase::Failed)
        })
        .await;
    assert_eq!(running.phase, AppPhase::Running, "{running:#?}");
    assert_eq!(replicas(&client, &namespace).await, Some(2));
    assert_eq!(
        recorded_values(&client, &namespace).await,
        json!({"replicaCount": 2, "image": "nginx:1.27"})
    );

    // Another project of the same cluster has no credentials of its own: the first one's
    // (nor a render pulled with them) never serve it.
    let (other, other_namespace) = project_with_registry(&f.backend, "oci-other").await;
    let other_id = uuid::Uuid::new_v4().to_string();
    f.backend
        .accept(chart_app(
            app_ref(&other_id, "site", &other, &other_namespace),
            "r1",
            &f.oci,
        ))
        .await;
    let other = f
        .backend
        .app_status("the other project's pull Failed", LONG, &other_id, |s| {
            s.phase == AppPhase::Failed
        })
        .await;
    assert!(
        other.components[0].message.contains("credential"),
        "{other:#?}"
    );
    assert_eq!(replicas(&client, &other_namespace).await, None);
}

#[tokio::test]
async fn a_chart_rendering_a_cluster_scoped_object_fails_naming_it_and_nothing_of_it_is_created() {
    let f = fixture();
    let client = f.east.client().await.unwrap();
    let (message, namespace) = refused_chart(&f.backend, f.repository.url(), "escape").await;
    assert_escape_refused(&client, &message, &namespace).await;
}

#[tokio::test]
async fn a_chart_rendering_a_role_binding_fails_naming_it_and_nothing_of_it_is_created() {
    let f = fixture();
    let client = f.east.client().await.unwrap();
    let (message, namespace) = refused_chart(&f.backend, f.repository.url(), "binder").await;
    assert!(
        message.contains("RoleBinding/site-web-admin") && message.contains("may not"),
        "{message}"
    );
    let bindings =
        Api::<k8s_openapi::api::rbac::v1::RoleBinding>::namespaced(client.clone(), &namespace);
    assert!(bindings.get_opt("site-web-admin").await.unwrap().is_none());
    assert!(
        Api::<ConfigMap>::namespaced(client, &namespace)
            .get_opt("site-web-settings")
            .await
            .unwrap()
            .is_none()
    );
}

#[tokio::test]
async fn a_chart_claiming_another_tenants_volume_fails_naming_the_field_and_leaves_it_unbound() {
    let f = fixture();
    let client = f.east.client().await.unwrap();
    let volumes = Api::<PersistentVolume>::all(client.clone());
    let volume: PersistentVolume = serde_json::from_value(json!({
        "metadata": {"name": TENANT_VOLUME},
        "spec": {"capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteOnce"],
                 "persistentVolumeReclaimPolicy": "Retain", "storageClassName": "tenant-reserved",
                 "hostPath": {"path": "/var/lib/tenant-data"}}
    }))
    .unwrap();
    volumes.create(&Default::default(), &volume).await.unwrap();

    let (message, namespace) = refused_chart(&f.backend, f.repository.url(), "squatter").await;
    assert!(
        message.contains("PersistentVolumeClaim/site-web-data")
            && message.contains("spec.volumeName")
            && message.contains("names an existing volume"),
        "{message}"
    );
    let claims = Api::<PersistentVolumeClaim>::namespaced(client.clone(), &namespace);
    assert!(claims.get_opt("site-web-data").await.unwrap().is_none());
    let settings = Api::<ConfigMap>::namespaced(client, &namespace);
    assert!(
        settings
            .get_opt("site-web-settings")
            .await
            .unwrap()
            .is_none()
    );
    let volume = volumes.get(TENANT_VOLUME).await.unwrap();
    assert!(
        volume.spec.unwrap().claim_ref.is_none(),
        "the volume was bound"
    );
    volumes
        .delete(TENANT_VOLUME, &Default::default())
        .await
        .unwrap();
}

#[tokio::test]
async fn a_project_namespace_refuses_privileged_and_host_path_pods_and_heals_its_level() {
    let f = fixture();
    let (_, namespace) = project(&f.backend, "psa").await;
    let client = f.east.client().await.unwrap();
    common::assert_pod_security_refuses(&client, &namespace).await;
    // Loosened by hand (an admin's label), the level comes back.
    let namespaces = Api::<k8s_openapi::api::core::v1::Namespace>::all(client.clone());
    let enforce = "pod-security.kubernetes.io/enforce";
    namespaces
        .patch(
            &namespace,
            &Default::default(),
            &kube::api::Patch::Merge(json!({"metadata": {"labels": {enforce: "privileged"}}})),
        )
        .await
        .unwrap();
    common::eventually("the enforce label healed", LONG, async || {
        let ns = namespaces.get(&namespace).await.unwrap();
        ns.metadata
            .labels
            .unwrap_or_default()
            .get(enforce)
            .map(String::as_str)
            == Some("baseline")
    })
    .await;
    common::assert_pod_security_refuses(&client, &namespace).await;
}

#[tokio::test]
async fn a_chart_pull_never_reaches_the_clusters_own_network_unless_its_source_is_allowed() {
    let f = fixture();
    let detour = f.detour.url().trim_start_matches("https://");
    // (the App's repository, the address its refusal names): the first URL is decided before
    // helm runs; a redirect and an index's chart URL at the proxy helm pulls through.
    for (repository, names) in [
        (f.detour.url(), detour),
        (f.bouncer.url(), PRIVATE),
        (f.pointer.url(), PRIVATE),
    ] {
        let (project, namespace) = project(&f.backend, "egress").await;
        let id = uuid::Uuid::new_v4().to_string();
        let app = app_ref(&id, "site", &project, &namespace);
        f.backend.accept(chart_app(app, "r1", repository)).await;
        let settled = f
            .backend
            .app_status("the pull settled", LONG, &id, |s| {
                matches!(s.phase, AppPhase::Failed | AppPhase::Running)
            })
            .await;
        assert_eq!(
            settled.phase,
            AppPhase::Failed,
            "{repository}: {settled:#?}"
        );
        let message = &settled.components[0].message;
        assert!(
            message.contains(names) && message.contains("own network"),
            "{repository}: {message}"
        );
    }
    assert_eq!(f.detour.requests(), 0, "helm reached the detour");
}

#[tokio::test]
async fn a_chart_cannot_read_the_projects_registry_or_git_credentials() {
    let f = fixture();
    let client = f.east.client().await.unwrap();
    // The registry Secret is refused by name, even before the project has one.
    let (message, namespace) = refused_chart(&f.backend, f.repository.url(), "peeker").await;
    assert!(
        message.contains("Deployment/site-web-peek")
            && message.contains(wire::REGISTRY_SECRET)
            && message.contains("credentials"),
        "{message}"
    );
    let deployments = |namespace: &str| Api::<Deployment>::namespaced(client.clone(), namespace);
    assert!(
        deployments(&namespace)
            .get_opt("site-web-peek")
            .await
            .unwrap()
            .is_none()
    );

    // A Git workload's repository Secret, written as the API server writes credentials.
    let (project, namespace) = project(&f.backend, "gitpeek").await;
    let mut set = secret_set(
        &namespace,
        GIT_SECRET,
        None,
        wire::SecretKind::Opaque,
        &[("username", "builder"), ("password", "hunter2-long-secret")],
    );
    set.target.credentials = true;
    f.backend.accept(set).await;
    let id = uuid::Uuid::new_v4().to_string();
    let app = app_ref(&id, "site", &project, &namespace);
    f.backend
        .accept(common::charts::chart_app_of(
            app,
            f.repository.url(),
            "gitpeeker",
        ))
        .await;
    let failed = f
        .backend
        .app_status("the peeking chart settled", LONG, &id, |s| {
            matches!(s.phase, AppPhase::Failed | AppPhase::Running)
        })
        .await;
    assert_eq!(failed.phase, AppPhase::Failed, "{failed:#?}");
    let message = &failed.components[0].message;
    assert!(message.contains(GIT_SECRET), "{message}");
    assert!(
        deployments(&namespace)
            .get_opt("site-web-peek")
            .await
            .unwrap()
            .is_none()
    );
}

/// `app.deploy` of App `site` with chart workload `web` of [`WORKS`].
fn works_app(app: wire::AppRef, revision: &str, claim: bool, paused: bool) -> wire::AppDeploy {
    works_app_with(app, revision, json!({"claim": claim}), paused)
}

/// [`works_app`] with the chart's `values`.
fn works_app_with(
    app: wire::AppRef,
    revision: &str,
    values: Value,
    paused: bool,
) -> wire::AppDeploy {
    serde_json::from_value(json!({
        "app": app, "revision": revision, "progress_deadline_seconds": 600, "paused": paused,
        "components": [{"kind": "workload", "name": "web", "replicas": 1, "source": {
            "type": "helm",
            "chart": {"repository": fixture().repository.url(), "name": "works", "version": "0.1.0"},
            "values": values}}]
    }))
    .unwrap()
}

/// Every kind a chart runs is judged: a claim that never binds keeps the App from `Running`,
/// saying so, and so does a Service whose selector matches no pod; a pause stops the Deployment, the DaemonSet and the CronJob and is `Paused` only
/// once their pods are gone; a resume brings back exactly what the chart says.
#[tokio::test]
async fn a_charts_claims_services_daemons_and_cron_jobs_are_judged_and_paused_with_it() {
    use k8s_openapi::api::apps::v1::DaemonSet;
    use k8s_openapi::api::batch::v1::CronJob;
    use k8s_openapi::api::core::v1::PersistentVolumeClaim;

    let f = fixture();
    let (project, namespace) = project(&f.backend, "works").await;
    let client = f.east.client().await.unwrap();
    let id = uuid::Uuid::new_v4().to_string();
    let app = app_ref(&id, "site", &project, &namespace);
    let deployments = Api::<Deployment>::namespaced(client.clone(), &namespace);
    let daemons = Api::<DaemonSet>::namespaced(client.clone(), &namespace);
    let crons = Api::<CronJob>::namespaced(client.clone(), &namespace);
    let claims = Api::<PersistentVolumeClaim>::namespaced(client.clone(), &namespace);

    f.backend
        .accept(works_app(app.clone(), "r1", true, false))
        .await;
    let waiting = f
        .backend
        .app_status("the unbound claim named", LONG, &id, |s| {
            s.components.first().is_some_and(|c| {
                c.message
                    .contains("PersistentVolumeClaim site-web-data: the claim is Pending")
            })
        })
        .await;
    assert_eq!(waiting.phase, AppPhase::Deploying, "{waiting:?}");
    // The Deployment and the daemons are ready; the claim alone holds the App back.
    common::eventually("the chart's Deployment ready", LONG, async || {
        let live = deployments.get_opt("site-web-web").await.ok().flatten();
        live.and_then(|d| d.status)
            .is_some_and(|s| s.ready_replicas == Some(2))
    })
    .await;
    let again = f
        .backend
        .app_status("still waiting on the claim", LONG, &id, |s| {
            s.phase != AppPhase::Running
                && s.components
                    .first()
                    .is_some_and(|c| c.message.contains("claim"))
        })
        .await;
    assert!(!again.components[0].ready, "{again:?}");

    // Without the claim, the chart runs; the claim is pruned.
    f.backend
        .accept(works_app(app.clone(), "r2", false, false))
        .await;
    f.backend
        .app_status("the chart Running without its claim", LONG, &id, |s| {
            s.phase == AppPhase::Running && s.observed_revision == "r2"
        })
        .await;
    // Pruned: deleted, and gone once the controller manager's pvc-protection lets it go.
    common::eventually("the dropped claim gone", LONG, async || {
        claims.get_opt("site-web-data").await.unwrap().is_none()
    })
    .await;
    let scheduled = daemons.get("site-web-node").await.unwrap().status.unwrap();
    assert!(scheduled.desired_number_scheduled > 0, "{scheduled:?}");

    // Paused: nothing of the chart runs, and the App says Paused only then.
    f.backend
        .accept(works_app(app.clone(), "r2", false, true))
        .await;
    f.backend
        .app_status("the chart Paused", LONG, &id, |s| {
            s.phase == AppPhase::Paused
        })
        .await;
    let web = deployments.get("site-web-web").await.unwrap();
    assert_eq!(web.spec.unwrap().replicas, Some(0));
    assert_eq!(web.status.unwrap().replicas.unwrap_or(0), 0, "no pod left");
    let node = daemons.get("site-web-node").await.unwrap();
    assert_eq!(
        node.status.unwrap().current_number_scheduled,
        0,
        "no daemon pod left"
    );
    let report = crons.get("site-web-report").await.unwrap();
    assert_eq!(report.spec.unwrap().suspend, Some(true));

    // Resumed: exactly what the chart says again.
    f.backend
        .accept(works_app(app.clone(), "r2", false, false))
        .await;
    f.backend
        .app_status("the chart Running again", LONG, &id, |s| {
            s.phase == AppPhase::Running
        })
        .await;
    let web = deployments.get("site-web-web").await.unwrap();
    assert_eq!(web.spec.unwrap().replicas, Some(2));
    let node = daemons.get("site-web-node").await.unwrap();
    let selector = node.spec.unwrap().template.spec.unwrap().node_selector;
    assert!(
        selector.is_none_or(|s| s.is_empty()),
        "the pause's node selector is gone"
    );
    let report = crons.get("site-web-report").await.unwrap();
    assert_ne!(report.spec.unwrap().suspend, Some(true));

    // A Service whose selector matches no pod serves nothing: not Running, saying so.
    f.backend
        .accept(works_app_with(app, "r3", json!({"serves": "wbe"}), false))
        .await;
    let unserved = f
        .backend
        .app_status("the Service without endpoints named", LONG, &id, |s| {
            s.observed_revision == "r3"
                && s.components.first().is_some_and(|c| {
                    c.message.contains(
                        "Service site-web-web: no ready endpoint: no ready pod matches its \
                         selector app=wbe",
                    )
                })
        })
        .await;
    assert_ne!(unserved.phase, AppPhase::Running, "{unserved:?}");
    assert!(!unserved.components[0].ready, "{unserved:?}");
}

/// A chart's Deployment whose rollout misses its progress deadline is `blocked_sync`: reported
/// as drift naming the Deployment, and the App `Failed` saying why, long before the App's own
/// deadline; a DaemonSet still waiting at the App's deadline is `blocked_sync` too.
#[tokio::test]
async fn a_chart_workload_past_its_progress_deadline_is_blocked_sync_and_fails_the_app() {
    let f = fixture();
    let (project, namespace) = project(&f.backend, "stuck").await;
    let id = uuid::Uuid::new_v4().to_string();
    let app = app_ref(&id, "site", &project, &namespace);
    let values = json!({"image": "kubenest-test/web:never-ready", "deadline": 10});
    f.backend
        .accept(works_app_with(app.clone(), "r1", values, false))
        .await;
    let blocked = f
        .backend
        .wait_for("blocked_sync from the chart", LONG, |m| match m {
            Message::DriftReport(r)
                if r.app_id.as_str() == id && r.class == wire::DriftClass::BlockedSync =>
            {
                Some(r.clone())
            }
            _ => None,
        })
        .await;
    assert_eq!(blocked.details[0].resource, "Deployment/site-web-web");
    assert_eq!(
        blocked.details[0].observed,
        json!("ProgressDeadlineExceeded")
    );
    let failed = f
        .backend
        .app_status("the chart App Failed", LONG, &id, |s| {
            s.phase == AppPhase::Failed
        })
        .await;
    let message = &failed.components[0].message;
    assert!(
        message.contains("Deployment site-web-web: the rollout exceeded its progress deadline"),
        "{failed:?}"
    );

    // A DaemonSet has no progress deadline of its own: the App's is its.
    let values = json!({"nodeImage": "kubenest-test/node:never-ready"});
    let mut deploy = works_app_with(app, "r2", values, false);
    deploy.progress_deadline_seconds = 15;
    f.backend.accept(deploy).await;
    let blocked = f
        .backend
        .wait_for(
            "blocked_sync from the chart's DaemonSet",
            LONG,
            |m| match m {
                Message::DriftReport(r)
                    if r.app_id.as_str() == id
                        && r.revision.as_str() == "r2"
                        && r.class == wire::DriftClass::BlockedSync =>
                {
                    Some(r.clone())
                }
                _ => None,
            },
        )
        .await;
    assert_eq!(blocked.details[0].resource, "DaemonSet/site-web-node");
    assert_eq!(blocked.details[0].field, "status");
    f.backend
        .app_status("r2 Failed past its deadline", LONG, &id, |s| {
            s.observed_revision == "r2" && s.phase == AppPhase::Failed
        })
        .await;
}
