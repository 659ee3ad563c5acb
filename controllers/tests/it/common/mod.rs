//! Helpers shared by the controller tests.

#![allow(dead_code)] // each test binary uses part of this

use std::time::Duration;

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::Client;
use kube::api::Api;
use kube::runtime::wait::{await_condition, conditions};

/// Polls `check` every 100 ms until it holds, for at most 15 s.
pub async fn eventually<F: AsyncFnMut() -> bool>(what: &str, check: F) {
    eventually_within(what, Duration::from_secs(15), check).await;
}

/// Polls `check` every 100 ms until it holds, for at most `within`.
pub async fn eventually_within<F: AsyncFnMut() -> bool>(
    what: &str,
    within: Duration,
    mut check: F,
) {
    for _ in 0..within.as_millis() / 100 {
        if check().await {
            return;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("timed out after {within:?}: {what}");
}

/// Installs the CRDs and the kubenest ClusterRoles, and waits until every CRD is served.
pub async fn install(client: &Client) {
    kubenest_controllers::ensure_crds(client).await.unwrap();
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    for crd in kubenest_crds::all() {
        let name = crd.metadata.name.unwrap();
        let established = await_condition(crds.clone(), &name, conditions::is_crd_established());
        tokio::time::timeout(Duration::from_secs(30), established)
            .await
            .unwrap()
            .unwrap();
    }
    kubenest_controllers::rbac::ensure_cluster_roles(client)
        .await
        .unwrap();
}

/// The verifier of the tokens the Cluster controller mints: the shared plane's
/// ([`shared_plane`]), since a management cluster has one set of controllers, as in production
/// (two sets with different keys would mint over each other's tokens).
pub async fn shared_controllers() -> &'static kubenest_contracts::TokenVerifier {
    &shared_plane().await.verifier
}

pub mod agent;
pub mod tenant;

/// A new organization named `{prefix}-<random>`, once it has its namespace; returns its name
/// and namespace.
pub async fn organization(client: &kube::Client, prefix: &str) -> (String, String) {
    let org = format!(
        "{prefix}-{}",
        &uuid::Uuid::new_v4().simple().to_string()[..6]
    );
    let orgs: Api<kubenest_crds::organization::Organization> = Api::all(client.clone());
    let spec = kubenest_crds::organization::OrganizationSpec {
        display_name: prefix.to_uppercase(),
        members: vec![],
        budget: None,
        verification: None,
    };
    orgs.create(
        &kube::api::PostParams::default(),
        &kubenest_crds::organization::Organization::new(&org, spec),
    )
    .await
    .unwrap();
    let namespace = format!("org-{org}");
    eventually_within("the org namespace", Duration::from_secs(30), async || {
        orgs.get(&org)
            .await
            .unwrap()
            .status
            .and_then(|s| s.namespace)
            .is_some()
    })
    .await;
    (org, namespace)
}

/// A new organization (with its namespace) holding a new Cluster `name`; returns the
/// organization, its namespace and the Clusters API there.
pub async fn org_with_cluster(
    client: &kube::Client,
    prefix: &str,
    name: &str,
) -> (String, String, Api<kubenest_crds::cluster::Cluster>) {
    let (org, namespace) = organization(client, prefix).await;
    let clusters: Api<kubenest_crds::cluster::Cluster> =
        Api::namespaced(client.clone(), &namespace);
    let spec = kubenest_crds::cluster::ClusterSpec {
        display_name: None,
        provider: Default::default(),
        token_version: 1,
        desired_node_count: None,
        members: vec![],
        budget: None,
    };
    clusters
        .create(
            &kube::api::PostParams::default(),
            &kubenest_crds::cluster::Cluster::new(name, spec),
        )
        .await
        .unwrap();
    (org, namespace, clusters)
}

/// The whole management plane, started once per test binary on a runtime of its own: a real
/// hub replica (session Leases on the management cluster) and every controller (`run::run`)
/// with the history on a fresh PostgreSQL database.
pub struct PlaneFixture {
    pub mgmt: &'static kubenest_testkit::Cluster,
    /// Verifies the tokens the plane's Cluster controller mints.
    pub verifier: kubenest_contracts::TokenVerifier,
    /// The hub's agent/backend endpoint.
    pub hub_url: String,
    /// The history database.
    pub database_url: String,
}

pub const SYSTEM_NAMESPACE: &str = "kubenest-system";

/// Starts (once) and returns the shared plane.
pub async fn shared_plane() -> &'static PlaneFixture {
    use std::sync::OnceLock;
    static PLANE: OnceLock<PlaneFixture> = OnceLock::new();
    if let Some(plane) = PLANE.get() {
        return plane;
    }
    let mgmt = kubenest_testkit::shared_management().await.unwrap();
    let postgres = kubenest_testkit::shared_postgres().await.unwrap();
    let database_url = postgres.fresh_database("plane").await.unwrap().url;
    let client = mgmt.client().await.unwrap();
    install(&client).await;
    system_namespace(&client).await;
    PLANE.get_or_init(|| {
        let hub = Hub::prepare(mgmt, SYSTEM_NAMESPACE);
        let hub_url = hub.url.clone();
        let signer = hub.signer.clone();
        let verifier =
            kubenest_contracts::TokenVerifier::from_pem(hub.public_pem.as_bytes(), "kubenest")
                .unwrap();
        let urls = vec![hub_url.clone()];
        let db = database_url.clone();
        std::thread::spawn(move || {
            let runtime = tokio::runtime::Runtime::new().unwrap();
            runtime.block_on(async move {
                let shutdown = tokio_util::sync::CancellationToken::new();
                hub.start(shutdown.clone());
                let client = mgmt.client().await.unwrap();
                let history =
                    kubenest_store::History::connect(&kubenest_store::DatabaseUrl::new(db), 8)
                        .await
                        .unwrap();
                let config = kubenest_controllers::run::Config {
                    client,
                    history,
                    hub_urls: urls,
                    signer,
                    session_namespace: SYSTEM_NAMESPACE.into(),
                    system_namespace: SYSTEM_NAMESPACE.into(),
                    heartbeat_window: chrono::Duration::seconds(90),
                };
                kubenest_controllers::run::run(config, shutdown)
                    .await
                    .unwrap();
            });
        });
        PlaneFixture {
            mgmt,
            verifier,
            hub_url,
            database_url,
        }
    })
}

/// Creates the system namespace (hub session Leases, global definitions) if missing.
pub async fn system_namespace(client: &kube::Client) {
    let ns = serde_json::json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": SYSTEM_NAMESPACE}});
    Api::<k8s_openapi::api::core::v1::Namespace>::all(client.clone())
        .patch(
            SYSTEM_NAMESPACE,
            &kube::api::PatchParams::apply("tests").force(),
            &kube::api::Patch::Apply(&ns),
        )
        .await
        .unwrap();
}

/// A hub replica ready to start: plaintext on a free loopback port, session Leases on the
/// management cluster, trusting a fresh Ed25519 key whose signer it carries.
pub struct Hub {
    /// The replica's `ws://…/v1/connect`.
    pub url: String,
    pub signer: std::sync::Arc<kubenest_contracts::TokenSigner>,
    /// The signer's public key (PEM).
    pub public_pem: String,
    args: kubenest_hub::Args,
    listener: std::net::TcpListener,
    admin: std::net::TcpListener,
}

impl Hub {
    pub fn prepare(mgmt: &kubenest_testkit::Cluster, lease_namespace: &str) -> Self {
        let key = rcgen::KeyPair::generate_for(&rcgen::PKCS_ED25519).unwrap();
        let dir = tempfile::tempdir().unwrap().keep();
        std::fs::write(dir.join("hub.pub"), key.public_key_pem()).unwrap();
        let signer = std::sync::Arc::new(
            kubenest_contracts::TokenSigner::from_pem(key.serialize_pem().as_bytes(), "kubenest")
                .unwrap(),
        );
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("ws://{}/v1/connect", listener.local_addr().unwrap());
        let admin = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let args = <kubenest_hub::Args as clap::Parser>::try_parse_from([
            "kubenest-hub".to_owned(),
            format!("--jwt-public-key={}", dir.join("hub.pub").display()),
            "--jwt-issuer=kubenest".to_owned(),
            "--insecure-plaintext".to_owned(),
            format!("--kubeconfig={}", mgmt.kubeconfig_path().display()),
            format!("--lease-namespace={lease_namespace}"),
        ])
        .unwrap();
        Self {
            url,
            signer,
            public_pem: key.public_key_pem(),
            args,
            listener,
            admin,
        }
    }

    /// Runs the replica on the current runtime until `shutdown`.
    pub fn start(self, shutdown: tokio_util::sync::CancellationToken) {
        tokio::spawn(kubenest_hub::run(
            self.args,
            self.listener,
            self.admin,
            shutdown,
        ));
    }
}

/// The credentials the Cluster controller minted for Cluster `cluster` in `namespace` (waits
/// for its token Secret).
pub async fn credentials(
    client: &kube::Client,
    namespace: &str,
    cluster: &str,
) -> agent::Credentials {
    let secrets: Api<k8s_openapi::api::core::v1::Secret> =
        Api::namespaced(client.clone(), namespace);
    let name = kubenest_controllers::cluster::token_secret_name(cluster);
    let mut found = None;
    eventually("the cluster token", async || {
        found = secrets.get_opt(&name).await.unwrap();
        found.is_some()
    })
    .await;
    let data = found.unwrap().data.unwrap();
    let text = |key: &str| String::from_utf8(data[key].0.clone()).unwrap();
    agent::Credentials {
        token: text("token"),
        cluster_id: text("cluster-id"),
        org_id: text("org-id"),
    }
}
