//! The agent's test kit: a real hub replica (session Leases on a real management cluster), a
//! real workload cluster with kwok nodes, a real bare git repository as the GitOps remote, the
//! agent itself, and a backend session that speaks for the controllers (the controllers' own hub
//! client: it pushes floors, dispatches commands to the replica holding the cluster's Lease and
//! hands back every status event).

#![allow(dead_code)] // each test binary uses part of this

use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use kube::api::{Api, Patch, PatchParams};
use kubenest_contracts::{self as wire, Envelope, Message};
use kubenest_hub_client::{HubClient, HubClientConfig};

use tokio_util::sync::CancellationToken;

pub mod charts;
pub mod rest;

pub const SYSTEM: &str = "kubenest-system";

/// The builder image tools/build-images.sh makes.
pub const BUILDER: &str = "localhost/kubenest/builder:0.1.0";

/// Polls `check` every 100 ms until it holds, for at most `within`.
pub async fn eventually<F: AsyncFnMut() -> bool>(what: &str, within: Duration, mut check: F) {
    let start = std::time::Instant::now();
    while start.elapsed() < within {
        if check().await {
            return;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("timed out after {within:?}: {what}");
}

/// The hub's signing key: the signer mints tokens, the hub trusts the public half.
#[derive(Clone)]
pub struct HubKey {
    pub signer: Arc<wire::TokenSigner>,
    pub public: PathBuf,
}

impl HubKey {
    pub fn new() -> Self {
        let key = rcgen::KeyPair::generate_for(&rcgen::PKCS_ED25519).unwrap();
        let public = tempfile::tempdir().unwrap().keep().join("hub.pub");
        std::fs::write(&public, key.public_key_pem()).unwrap();
        let signer =
            wire::TokenSigner::from_pem(key.serialize_pem().as_bytes(), "kubenest").unwrap();
        Self {
            signer: Arc::new(signer),
            public,
        }
    }
}

/// A hub replica on a loopback port, session Leases on the management cluster.
pub struct Hub {
    pub url: String,
    pub signer: Arc<wire::TokenSigner>,
    args: kubenest_hub::Args,
    listener: std::net::TcpListener,
    admin: std::net::TcpListener,
}

impl Hub {
    /// A replica on a free port trusting a fresh key.
    pub fn prepare(mgmt: &kubenest_testkit::Cluster) -> Self {
        Self::prepare_at(mgmt, &HubKey::new(), "127.0.0.1:0")
    }

    /// A replica at `address` (to restart one where it was) trusting `key`.
    pub fn prepare_at(mgmt: &kubenest_testkit::Cluster, key: &HubKey, address: &str) -> Self {
        let listener = std::net::TcpListener::bind(address).unwrap();
        let url = format!("ws://{}/v1/connect", listener.local_addr().unwrap());
        let admin = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let args = <kubenest_hub::Args as clap::Parser>::try_parse_from([
            "kubenest-hub".to_owned(),
            format!("--jwt-public-key={}", key.public.display()),
            "--jwt-issuer=kubenest".to_owned(),
            "--insecure-plaintext".to_owned(),
            format!("--kubeconfig={}", mgmt.kubeconfig_path().display()),
            format!("--lease-namespace={SYSTEM}"),
        ])
        .unwrap();
        Self {
            url,
            signer: key.signer.clone(),
            args,
            listener,
            admin,
        }
    }

    /// The replica's address (`127.0.0.1:port`).
    pub fn address(&self) -> String {
        self.listener.local_addr().unwrap().to_string()
    }

    /// Runs the replica on the current runtime until `shutdown`.
    pub fn start(self, shutdown: CancellationToken) -> tokio::task::JoinHandle<()> {
        tokio::spawn(async move {
            let _ = kubenest_hub::run(self.args, self.listener, self.admin, shutdown).await;
        })
    }
}

/// The controllers' side of the hub: sends commands, collects every status event.
#[derive(Clone)]
pub struct Backend {
    /// Dispatches on the fixture's runtime (the hub client's Kubernetes client lives there).
    dispatch: tokio::sync::mpsc::UnboundedSender<(Envelope, tokio::sync::oneshot::Sender<bool>)>,
    pub events: Arc<Mutex<Vec<Envelope>>>,
    pub cluster_id: wire::Id,
    pub org_id: wire::Id,
}

impl Backend {
    pub fn start(
        hub_url: &str,
        signer: Arc<wire::TokenSigner>,
        leases: Api<k8s_openapi::api::coordination::v1::Lease>,
        cluster_id: &str,
        org_id: &str,
        shutdown: CancellationToken,
    ) -> Self {
        let (hub, mut statuses) = HubClient::start(
            HubClientConfig {
                urls: vec![hub_url.to_owned()],
                signer,
                leases,
            },
            shutdown,
        )
        .unwrap();
        hub.push_floors(vec![wire::Floor {
            cluster_id: wire::Id::new(cluster_id),
            org_id: wire::Id::new(org_id),
            min_token_version: 1,
        }]);
        let (dispatch, mut requests) =
            tokio::sync::mpsc::unbounded_channel::<(Envelope, tokio::sync::oneshot::Sender<bool>)>(
            );
        tokio::spawn(async move {
            while let Some((envelope, reply)) = requests.recv().await {
                let _ = reply.send(hub.dispatch(envelope).await.is_ok());
            }
        });
        let events: Arc<Mutex<Vec<Envelope>>> = Arc::default();
        let sink = events.clone();
        tokio::spawn(async move {
            while let Some(envelope) = statuses.recv().await {
                sink.lock().unwrap().push(envelope);
            }
        });
        Self {
            dispatch,
            events,
            cluster_id: wire::Id::new(cluster_id),
            org_id: wire::Id::new(org_id),
        }
    }

    /// Sends a command, retrying while the agent is not connected; returns its id.
    pub async fn send(&self, command: impl Into<Message>) -> uuid::Uuid {
        let envelope =
            Envelope::new(command).for_cluster(self.cluster_id.clone(), self.org_id.clone());
        let id = envelope.id;
        for _ in 0..300 {
            let (reply, routed) = tokio::sync::oneshot::channel();
            let _ = self.dispatch.send((envelope.clone(), reply));
            if routed.await.unwrap_or(false) {
                return id;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        panic!("command {} never routed", envelope.message_type());
    }

    /// Sends a command and waits until the agent accepts it.
    pub async fn accept(&self, command: impl Into<Message>) {
        let id = self.send(command).await;
        if let Err(refused) = self.answer(id).await {
            panic!("the agent refused the command: {refused:?}");
        }
    }

    /// Every event so far.
    pub fn events(&self) -> Vec<Message> {
        self.events
            .lock()
            .unwrap()
            .iter()
            .map(|e| e.message.clone())
            .collect()
    }

    /// Waits for the answer to command `id`: Ok for accepted, Err(rejection) for rejected.
    pub async fn answer(&self, id: uuid::Uuid) -> Result<(), wire::CommandRejected> {
        let mut found = None;
        // Generous: the crate's tests share one binary, and a restarted agent answers after its
        // start-up on two busy cores.
        eventually("the agent's answer", Duration::from_secs(60), async || {
            found = self.events().into_iter().find_map(|m| match m {
                Message::CommandAccepted(a) if a.command_id == id => Some(Ok(())),
                Message::CommandRejected(r) if r.command_id == id => Some(Err(r)),
                _ => None,
            });
            found.is_some()
        })
        .await;
        found.unwrap()
    }

    /// Waits for an event `pick` accepts, returning what it returns.
    pub async fn wait_for<T>(
        &self,
        what: &str,
        within: Duration,
        mut pick: impl FnMut(&Message) -> Option<T>,
    ) -> T {
        let mut found = None;
        eventually(what, within, async || {
            found = self.events().iter().rev().find_map(&mut pick);
            found.is_some()
        })
        .await;
        found.unwrap()
    }

    /// Waits until the latest `app.status` of `app_id` satisfies `check`.
    pub async fn app_status(
        &self,
        what: &str,
        within: Duration,
        app_id: &str,
        mut check: impl FnMut(&wire::AppStatus) -> bool,
    ) -> wire::AppStatus {
        let mut last = None;
        let start = std::time::Instant::now();
        while start.elapsed() < within {
            last = self.events().into_iter().rev().find_map(|m| match m {
                Message::AppStatus(s) if s.app_id.as_str() == app_id => Some(s),
                _ => None,
            });
            if last.as_ref().is_some_and(&mut check) {
                return last.unwrap();
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        panic!("timed out after {within:?}: {what}; last app.status: {last:#?}");
    }
}

/// A GitOps remote: a bare repository in a temporary folder.
pub fn bare_repository() -> PathBuf {
    let dir = tempfile::tempdir().unwrap().keep();
    let bare = dir.join("gitops.git");
    let status = std::process::Command::new("git")
        .args(["init", "--quiet", "--bare", "--initial-branch=main"])
        .arg(&bare)
        .status()
        .unwrap();
    assert!(status.success());
    bare
}

/// A file of the bare repository's `main`, if it is there.
pub fn committed(bare: &std::path::Path, path: &str) -> Option<String> {
    let output = std::process::Command::new("git")
        .arg(format!("--git-dir={}", bare.display()))
        .args(["show", &format!("main:{path}")])
        .output()
        .unwrap();
    output
        .status
        .success()
        .then(|| String::from_utf8_lossy(&output.stdout).into_owned())
}

/// The last commit message on the bare repository's `main`.
pub fn last_commit_message(bare: &std::path::Path) -> String {
    let output = std::process::Command::new("git")
        .arg(format!("--git-dir={}", bare.display()))
        .args(["log", "-1", "--format=%s", "main"])
        .output()
        .unwrap();
    String::from_utf8_lossy(&output.stdout).trim().to_owned()
}

/// The repository's chart catalog.
pub fn catalog() -> PathBuf {
    let manifest = std::env::var_os("CARGO_MANIFEST_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")));
    manifest.join("..").join("charts").join("addons")
}

/// A hub replica on `mgmt` and the controllers' session through it to cluster `cluster_id` of
/// organization `org_id`, until `shutdown`: (the hub's URL, the session, the cluster's agent
/// token).
pub async fn hub_with_backend(
    mgmt: &kubenest_testkit::Cluster,
    cluster_id: &str,
    org_id: &str,
    shutdown: &CancellationToken,
) -> (String, Backend, String) {
    let mgmt_client = mgmt.client().await.unwrap();
    system_namespace(&mgmt_client).await;
    let hub = Hub::prepare(mgmt);
    let (url, signer) = (hub.url.clone(), hub.signer.clone());
    hub.start(shutdown.clone());
    let backend = Backend::start(
        &url,
        signer.clone(),
        Api::namespaced(mgmt_client, SYSTEM),
        cluster_id,
        org_id,
        shutdown.clone(),
    );
    let token = signer
        .cluster_token(&wire::Id::new(cluster_id), &wire::Id::new(org_id), 1)
        .unwrap();
    (url, backend, token)
}

/// A management cluster and a workload cluster `edge` with a real node, and `images` (built
/// by tools/build-images.sh, or found cached) loaded onto the node.
pub async fn real_node_with(
    images: &[&str],
) -> (kubenest_testkit::Environment, kubenest_testkit::Images) {
    let built = kubenest_testkit::Images::build(images).await.unwrap();
    let env = kubenest_testkit::Environment::builder()
        .management("mgmt")
        .real_node("edge")
        .start()
        .await
        .unwrap();
    let edge = env.cluster("edge").unwrap();
    for name in images {
        edge.import_image(built.archive(name).unwrap())
            .await
            .unwrap();
    }
    (env, built)
}

/// A hub on `mgmt`, the controllers' session through it, and an agent on `cluster` (its
/// configuration changed by `tune`), until `shutdown`: the session.
pub async fn agent_on(
    mgmt: &kubenest_testkit::Cluster,
    cluster: &kubenest_testkit::Cluster,
    shutdown: &CancellationToken,
    tune: impl FnOnce(&mut kubenest_agent::Config),
) -> Backend {
    let (cluster_id, org_id) = ("c-edge-1", "acme");
    let (url, backend, token) = hub_with_backend(mgmt, cluster_id, org_id, shutdown).await;
    let mut config = agent_config(
        cluster,
        &url,
        token,
        cluster_id,
        org_id,
        &bare_repository(),
        SYSTEM,
    )
    .await;
    tune(&mut config);
    tokio::spawn(kubenest_agent::run(config, shutdown.clone()));
    backend
}

/// Creates the system namespace on a cluster if missing.
pub async fn system_namespace(client: &kube::Client) {
    let ns =
        serde_json::json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": SYSTEM}});
    Api::<k8s_openapi::api::core::v1::Namespace>::all(client.clone())
        .patch(
            SYSTEM,
            &PatchParams::apply("tests").force(),
            &Patch::Apply(&ns),
        )
        .await
        .unwrap();
}

/// An agent's configuration for `cluster` dialing `hub_url`.
pub async fn agent_config(
    cluster: &kubenest_testkit::Cluster,
    hub_url: &str,
    token: String,
    cluster_id: &str,
    org_id: &str,
    gitops: &std::path::Path,
    namespace: &str,
) -> kubenest_agent::Config {
    let bins = kubenest_testkit::Binaries::locate().unwrap();
    let work = tempfile::tempdir().unwrap().keep().join("clone");
    kubenest_agent::Config {
        client: cluster.client().await.unwrap(),
        uplink: kubenest_agent::uplink::UplinkConfig {
            url: hub_url.to_owned(),
            token,
            tls: None,
            heartbeat_every: Duration::from_secs(2),
            backoff_base: Duration::from_millis(200),
            backoff_max: Duration::from_secs(2),
            reconnect_spread: Duration::from_millis(500),
            cluster_id: wire::Id::new(cluster_id),
            org_id: wire::Id::new(org_id),
        },
        namespace: namespace.into(),
        helm: kubenest_agent::helm::Helm::new(bins.helm, catalog()),
        gitops: Some((gitops.display().to_string(), "main".into(), work)),
        builders: kubenest_agent::context::Builders {
            image: BUILDER.into(),
            push_prefix: "builds.test".into(),
            ca: None,
        },
        install_crds: true,
        project_grant: None,
        trusted_namespaces: vec![],
    }
}

/// An App reference in `namespace` of project `project`.
pub fn app_ref(app_id: &str, name: &str, project: &str, namespace: &str) -> wire::AppRef {
    wire::AppRef {
        app_id: wire::Id::new(app_id),
        name: wire::Name::new(name),
        project_id: wire::Id::new(project),
        namespace: wire::Name::new(namespace),
    }
}

/// `project.ensure` for a fresh project and namespace; returns (project id, namespace).
pub async fn project(backend: &Backend, prefix: &str) -> (String, String) {
    let id = format!("p-{}", &uuid::Uuid::new_v4().simple().to_string()[..10]);
    let namespace = format!(
        "{prefix}-{}",
        &uuid::Uuid::new_v4().simple().to_string()[..6]
    );
    let command = backend
        .send(wire::ProjectEnsure {
            project_id: wire::Id::new(&id),
            namespace: wire::Name::new(&namespace),
            labels: Default::default(),
            registry_secret: None,
            pod_security: Default::default(),
            fences: Default::default(),
        })
        .await;
    backend.answer(command).await.unwrap();
    (id, namespace)
}

/// The reference App's command: a Postgres addon `db` and a web workload whose `DATABASE_URL`
/// comes from the addon's `dsn` export.
pub fn reference_app(
    app: wire::AppRef,
    revision: &str,
    image: &str,
    replicas: u32,
) -> wire::AppDeploy {
    serde_json::from_value(serde_json::json!({
        "app": app,
        "revision": revision,
        "progress_deadline_seconds": 120,
        "components": [
            {"kind": "addon", "name": "db", "definition": "postgres",
             "chart": {"repository": "charts/addons", "name": "postgres", "version": "1.0.0"},
             // kwok clusters have no volume provisioner.
             "values": {"persistence": {"enabled": false, "size": "2Gi"}},
             "exports": {
                "host": "{release}.{namespace}.svc", "port": "5432", "user": "app",
                "database": "app", "password": "{password}",
                "dsn": "postgres://{user}:{password}@{host}:{port}/{database}"}},
            {"kind": "workload", "name": "web", "source": {"type": "image", "image": image},
             "replicas": replicas, "port": 8080,
             "env": [{"name": "DATABASE_URL", "export_ref": {"component": "db", "export": "dsn"}},
                     {"name": "MODE", "value": "production"}]}
        ]
    }))
    .unwrap()
}

/// A web-only App.
pub fn web_app(
    app: wire::AppRef,
    revision: &str,
    image: &str,
    replicas: u32,
    deadline: u32,
) -> wire::AppDeploy {
    serde_json::from_value(serde_json::json!({
        "app": app,
        "revision": revision,
        "progress_deadline_seconds": deadline,
        "components": [
            {"kind": "workload", "name": "web", "source": {"type": "image", "image": image},
             "replicas": replicas, "port": 8080}
        ]
    }))
    .unwrap()
}

/// The catalog's postgres as a global AddonDefinition (persistence off: kwok has no volumes).
pub async fn postgres_definition(client: &kube::Client) {
    Api::<kubenest_crds::addon::AddonDefinition>::namespaced(client.clone(), SYSTEM)
        .patch(
            "postgres",
            &PatchParams::apply("tests").force(),
            &Patch::Apply(serde_json::json!({
                "apiVersion": "kubenest.io/v1alpha1", "kind": "AddonDefinition",
                "metadata": {"name": "postgres"},
                "spec": {"displayName": "PostgreSQL",
                    "chart": {"repository": "charts/addons", "name": "postgres", "version": "1.0.0"},
                    "defaultValues": {"persistence": {"enabled": false}},
                    "exports": {"host": "{release}.{namespace}.svc", "port": "5432", "user": "app",
                        "database": "app", "password": "{password}",
                        "dsn": "postgres://{user}:{password}@{host}:{port}/{database}"}}
            })),
        )
        .await
        .unwrap();
}

/// `secret.set` of one Secret in `namespace`.
pub fn secret_set(
    namespace: &str,
    secret: &str,
    app_id: Option<&str>,
    kind: wire::SecretKind,
    values: &[(&str, &str)],
) -> wire::SecretSet {
    wire::SecretSet {
        target: wire::SecretTarget {
            namespace: wire::Name::new(namespace),
            secret: wire::Name::new(secret),
            app_id: app_id.map(wire::Id::new),
            // Registry credentials and the ingress CA, as the API server marks them.
            credentials: matches!(
                kind,
                wire::SecretKind::DockerConfigJson | wire::SecretKind::Tls
            ),
        },
        kind,
        values: values
            .iter()
            .map(|(k, v)| ((*k).to_owned(), wire::SecretValue((*v).to_owned())))
            .collect(),
    }
}

/// `project.ensure` naming the registry Secret, so the namespace's pods pull with it.
pub async fn project_with_registry(backend: &Backend, prefix: &str) -> (String, String) {
    let (id, namespace) = project(backend, prefix).await;
    let command = backend
        .send(wire::ProjectEnsure {
            project_id: wire::Id::new(&id),
            namespace: wire::Name::new(&namespace),
            labels: Default::default(),
            registry_secret: Some(wire::Name::new(wire::REGISTRY_SECRET)),
            pod_security: Default::default(),
            fences: Default::default(),
        })
        .await;
    backend.answer(command).await.unwrap();
    (id, namespace)
}

/// Pods a project namespace's Pod Security level refuses: (name, spec). Each would give its
/// containers the node: a privileged container, and the node's root directory mounted.
pub fn forbidden_pod_specs() -> Vec<(&'static str, serde_json::Value)> {
    let container = |extra: serde_json::Value| {
        let mut container = serde_json::json!({"name": "c", "image": "busybox:1.36"});
        if let (Some(c), Some(extra)) = (container.as_object_mut(), extra.as_object()) {
            c.extend(extra.clone());
        }
        container
    };
    vec![
        (
            "privileged",
            serde_json::json!({"containers": [container(serde_json::json!({
                "securityContext": {"privileged": true}}))]}),
        ),
        (
            "host-path",
            serde_json::json!({
                "containers": [container(serde_json::json!({
                    "volumeMounts": [{"name": "root", "mountPath": "/host"}]}))],
                "volumes": [{"name": "root", "hostPath": {"path": "/"}}],
            }),
        ),
    ]
}

/// Creates each of [`forbidden_pod_specs`] in `namespace` with `client` (an admin's) and
/// asserts Pod Security Admission refuses it.
pub async fn assert_pod_security_refuses(client: &kube::Client, namespace: &str) {
    let pods = kube::Api::<k8s_openapi::api::core::v1::Pod>::namespaced(client.clone(), namespace);
    for (name, spec) in forbidden_pod_specs() {
        let pod =
            serde_json::from_value(serde_json::json!({"metadata": {"name": name}, "spec": spec}))
                .unwrap();
        match pods.create(&Default::default(), &pod).await {
            Err(kube::Error::Api(status)) => {
                assert_eq!(status.code, 403, "{name}: {status:?}");
                assert!(
                    status.message.contains("violates PodSecurity"),
                    "{name}: {status:?}"
                );
            }
            other => panic!("the {name} pod was not refused: {other:?}"),
        }
    }
}
