//! The test plane: a real management cluster and PostgreSQL, the real controllers, and two
//! API server replicas on loopback, started once per test binary on a runtime of their own.

#![allow(dead_code)] // each test binary uses part of this

pub mod matrix;

use std::sync::{Arc, OnceLock};
use std::time::Duration;

use kube::api::{Api, Patch, PatchParams};
use kubenest_apiserver::limits::LimitsConfig;
use kubenest_apiserver::run::{Config, start};
use kubenest_apiserver::state::Settings;
use kubenest_store::{DatabaseUrl, History};
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

pub const SYSTEM: &str = "kubenest-system";
pub const ADMIN: &str = "admin";
pub const ADMIN_PASSWORD: &str = "admin-password-for-tests";
/// What every test user's password is.
pub const PASSWORD: &str = "a-long-enough-password";

/// What the tests reach.
pub struct Plane {
    /// The two replicas' base URLs.
    pub urls: [String; 2],
    /// The API's signing key (to forge tokens in tests of what must be refused).
    pub api_key_pem: String,
    /// Verifies cluster tokens the controllers mint.
    pub cluster_verifier: kubenest_contracts::TokenVerifier,
    pub kubeconfig: std::path::PathBuf,
    pub database_url: String,
    /// The admission webhooks' base URL (`https://127.0.0.1:port`).
    pub admission_url: String,
    /// The client certificate the management kube-apiserver presents to the webhooks.
    pub webhook_client: kubenest_testkit::WebhookClient,
    /// A chart repository on the API servers' allow-list (`--chart-sources`).
    pub charts: kubenest_testkit::ChartRepository,
    /// Another allowed repository, for tests that change what it serves.
    pub detour: kubenest_testkit::ChartRepository,
    /// The CA of both (and of any other chart server a test starts).
    pub ca: kubenest_testkit::ServerCa,
}

impl Plane {
    pub async fn kube(&self) -> kube::Client {
        let config = kube::config::Kubeconfig::read_from(&self.kubeconfig).unwrap();
        let config = kube::Config::from_custom_kubeconfig(config, &Default::default())
            .await
            .unwrap();
        kube::Client::try_from(config).unwrap()
    }
}

/// Starts the plane on first use.
pub fn plane() -> &'static Plane {
    static PLANE: OnceLock<Plane> = OnceLock::new();
    PLANE.get_or_init(|| {
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let runtime = tokio::runtime::Runtime::new().unwrap();
            runtime.block_on(async move {
                let env = kubenest_testkit::Environment::builder()
                    .management("mgmt")
                    .postgres()
                    .start()
                    .await
                    .unwrap();
                let plane = boot(&env).await;
                tx.send(plane).unwrap();
                std::future::pending::<()>().await;
                drop(env);
            });
        });
        rx.recv_timeout(Duration::from_secs(300)).unwrap()
    })
}

async fn boot(env: &kubenest_testkit::Environment) -> Plane {
    let mgmt = env.management().unwrap();
    let client = mgmt.client().await.unwrap();
    kubenest_controllers::ensure_crds(&client).await.unwrap();
    kubenest_controllers::rbac::ensure_cluster_roles(&client)
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_secs(2)).await;
    let ns = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": SYSTEM}});
    Api::<k8s_openapi::api::core::v1::Namespace>::all(client.clone())
        .patch(
            SYSTEM,
            &PatchParams::apply("tests").force(),
            &Patch::Apply(&ns),
        )
        .await
        .unwrap();
    let database = env.postgres().unwrap().fresh_database("api").await.unwrap();
    let url = DatabaseUrl::new(database.url.clone());

    let cluster_key = rcgen::KeyPair::generate_for(&rcgen::PKCS_ED25519).unwrap();
    let signer = kubenest_contracts::TokenSigner::from_pem(
        cluster_key.serialize_pem().as_bytes(),
        "kubenest",
    )
    .unwrap();
    let shutdown = CancellationToken::new();
    let controllers = kubenest_controllers::run::Config {
        client: client.clone(),
        history: History::connect(&url, 4).await.unwrap(),
        // No hub in these tests: commands wait with a named reason, as they would in an outage.
        hub_urls: vec!["ws://127.0.0.1:9/v1/connect".into()],
        signer: Arc::new(signer),
        session_namespace: SYSTEM.into(),
        system_namespace: SYSTEM.into(),
        heartbeat_window: chrono::Duration::seconds(90),
    };
    tokio::spawn(kubenest_controllers::run::run(
        controllers,
        shutdown.clone(),
    ));

    let api_key = rcgen::KeyPair::generate_for(&rcgen::PKCS_ED25519)
        .unwrap()
        .serialize_pem();
    let ca_dir = std::env::temp_dir().join(unique("chart-ca"));
    let ca = kubenest_testkit::ServerCa::generate(&ca_dir).unwrap();
    let charts = kubenest_testkit::ChartRepository::start(&ca).await.unwrap();
    let detour = kubenest_testkit::ChartRepository::start(&ca).await.unwrap();
    let chart_settings = kubenest_apiserver::charts::ChartSettings {
        sources: kubenest_domain::sources::AllowList::parse(&[charts.url(), detour.url()]).unwrap(),
        ca_pem: Some(ca.pem.clone()),
        own_addresses: Vec::new(),
    };
    let mut urls = Vec::new();
    let mut admission_url = String::new();
    for replica in 0..2 {
        let config = Config {
            client: client.clone(),
            database_url: url.clone(),
            signing_key_pem: api_key.clone(),
            issuer: "kubenest".into(),
            admin: Some((ADMIN.into(), ADMIN_PASSWORD.into())),
            hub: None,
            settings: Settings {
                public_hub_url: "wss://hub.example.test/v1/connect".into(),
                agent_chart: "charts/kubenest-agent".into(),
                system_namespace: SYSTEM.into(),
                secure_cookies: false,
                mint_timeout: Duration::from_secs(20),
                // The second replica's subscribers fall behind at once and catch up from the
                // database: streams there test that path.
                event_buffer: if replica == 0 { 4096 } else { 1 },
                console_dir: None,
                charts: chart_settings.clone(),
            },
            limits: LimitsConfig {
                reads_per_second: 2000,
                writes_per_second: 1000,
                logins_per_minute_per_address: 1000,
                ..LimitsConfig::default()
            },
        };
        let state = start(config, &shutdown).await.unwrap();
        if replica == 0 {
            admission_url = admission(&client, &state, mgmt.webhook_client(), &shutdown).await;
        }
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        urls.push(format!("http://{}", listener.local_addr().unwrap()));
        let stop = shutdown.clone();
        tokio::spawn(kubenest_apiserver::serve(listener, state, async move {
            stop.cancelled().await
        }));
    }
    std::mem::forget(shutdown);
    Plane {
        urls: [urls[0].clone(), urls[1].clone()],
        api_key_pem: api_key,
        cluster_verifier: kubenest_contracts::TokenVerifier::from_pem(
            cluster_key.public_key_pem().as_bytes(),
            "kubenest",
        )
        .unwrap(),
        kubeconfig: mgmt.kubeconfig_path().to_path_buf(),
        database_url: database.url.clone(),
        admission_url,
        webhook_client: mgmt.webhook_client().clone(),
        charts,
        detour,
        ca,
    }
}

/// Serves the admission webhooks of one replica on loopback with a fresh certificate and
/// registers them, trusting this plane's own identity (the API and the controllers here share
/// the admin's): kubectl writes of any other identity are checked, stamped and audited. Only
/// the management kube-apiserver's webhook client certificate gets through the handshake.
/// Returns the webhooks' base URL.
async fn admission(
    client: &kube::Client,
    state: &kubenest_apiserver::state::AppState,
    caller: &kubenest_testkit::WebhookClient,
    shutdown: &CancellationToken,
) -> String {
    use kubenest_apiserver::admission::{Admission, register};
    let certified = rcgen::generate_simple_self_signed(vec!["127.0.0.1".to_owned()]).unwrap();
    let dir = std::env::temp_dir().join(unique("admission"));
    std::fs::create_dir_all(&dir).unwrap();
    let (cert, key) = (dir.join("tls.crt"), dir.join("tls.key"));
    std::fs::write(&cert, certified.cert.pem()).unwrap();
    std::fs::write(&key, certified.signing_key.serialize_pem()).unwrap();
    let client_ca = dir.join("client-ca.crt");
    std::fs::write(&client_ca, &caller.ca_pem).unwrap();
    let tls = kubenest_apiserver::Tls::from_pem_files_verifying_clients(&cert, &key, &client_ca)
        .await
        .unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    let trusted = vec![register::own_username(client).await.unwrap()];
    let stop = shutdown.clone();
    tokio::spawn(kubenest_apiserver::serve_admission(
        listener,
        Admission::new(state.clone(), trusted.clone()),
        tls,
        async move { stop.cancelled().await },
    ));
    register::register(
        client,
        &register::Endpoint::Url(format!("https://{address}")),
        &certified.cert.pem(),
        &trusted,
    )
    .await
    .unwrap();
    format!("https://{address}")
}

/// A signed-in client of one replica.
#[derive(Clone)]
pub struct Client {
    pub base: String,
    pub http: reqwest::Client,
    pub token: Option<String>,
    pub user: String,
}

impl Client {
    pub fn anonymous(base: &str) -> Self {
        Self {
            base: base.to_owned(),
            http: reqwest::Client::new(),
            token: None,
            user: String::new(),
        }
    }

    /// Logs in on replica `replica`.
    pub async fn login(replica: usize, user: &str, password: &str) -> Self {
        let mut client = Self::anonymous(&plane().urls[replica]);
        let (status, body) = client
            .call(
                Method::POST,
                "/api/v1/login",
                Some(json!({"username": user, "password": password})),
            )
            .await;
        assert_eq!(status, StatusCode::OK, "login {user}: {body}");
        client.token = Some(body["access_token"].as_str().unwrap().to_owned());
        client.user = user.to_owned();
        client
    }

    /// The signed-in user's id, as `/me` answers.
    pub async fn my_id(&self) -> String {
        self.get("/api/v1/me").await.1["id"]
            .as_str()
            .unwrap()
            .to_owned()
    }

    pub async fn admin() -> Self {
        Self::login(0, ADMIN, ADMIN_PASSWORD).await
    }

    pub async fn call(
        &self,
        method: Method,
        path: &str,
        body: Option<Value>,
    ) -> (StatusCode, Value) {
        let mut request = self.http.request(method, format!("{}{path}", self.base));
        if let Some(token) = &self.token {
            request = request.bearer_auth(token);
        }
        if let Some(body) = body {
            request = request.json(&body);
        }
        let response = request.send().await.unwrap();
        let status = response.status();
        let text = response.text().await.unwrap();
        let value = serde_json::from_str(&text).unwrap_or(Value::String(text));
        (status, value)
    }

    pub async fn get(&self, path: &str) -> (StatusCode, Value) {
        self.call(Method::GET, path, None).await
    }

    pub async fn post(&self, path: &str, body: Value) -> (StatusCode, Value) {
        self.call(Method::POST, path, Some(body)).await
    }

    /// Asserts the status and returns the body.
    pub async fn expect(
        &self,
        method: Method,
        path: &str,
        body: Option<Value>,
        want: u16,
    ) -> Value {
        let (status, value) = self.call(method.clone(), path, body).await;
        assert_eq!(
            status.as_u16(),
            want,
            "{method} {path} as {}: {value}",
            self.user
        );
        value
    }
}

/// A fresh suffix for names.
pub fn unique(prefix: &str) -> String {
    format!(
        "{prefix}-{}",
        &uuid::Uuid::new_v4().simple().to_string()[..6]
    )
}

/// A new user (as the admin); returns the name.
pub async fn user(admin: &Client, prefix: &str) -> String {
    let name = unique(prefix);
    admin
        .expect(
            Method::POST,
            "/api/v1/users",
            Some(json!({"username": name, "password": PASSWORD})),
            201,
        )
        .await;
    name
}

/// The id of user `name` (whose password is [`PASSWORD`]), as `/me` answers after a login.
pub async fn user_id(name: &str) -> String {
    Client::login(0, name, PASSWORD).await.my_id().await
}

/// A new organization with `members`; returns its name.
pub async fn org(admin: &Client, prefix: &str, members: Value) -> String {
    let name = unique(prefix);
    let body = admin
        .expect(
            Method::POST,
            "/api/v1/orgs",
            Some(json!({"name": name, "display_name": prefix, "members": members})),
            201,
        )
        .await;
    assert_eq!(body["namespace"], format!("org-{name}"), "{body}");
    name
}

/// Registers a cluster; returns the registration response.
pub async fn cluster(client: &Client, org: &str) -> Value {
    client
        .expect(
            Method::POST,
            &format!("/api/v1/orgs/{org}/clusters"),
            Some(json!({"name": unique("c")})),
            201,
        )
        .await
}

/// A project on a cluster; returns it.
pub async fn project(client: &Client, org: &str, cluster_id: &str) -> Value {
    client
        .expect(
            Method::POST,
            &format!("/api/v1/orgs/{org}/projects"),
            Some(json!({"name": unique("p"), "cluster_id": cluster_id})),
            201,
        )
        .await
}

/// A web App's body for `project_id`.
pub fn web_app(project_id: &str, name: &str, image: &str) -> Value {
    json!({
        "project_id": project_id,
        "name": name,
        "components": [{
            "name": "web", "type": "workload",
            "workload_spec": {"image": image, "replicas": 2, "port": 8080}
        }]
    })
}

/// Polls `check` every 100 ms for up to `secs`.
pub async fn eventually<F: AsyncFnMut() -> bool>(what: &str, secs: u64, mut check: F) {
    for _ in 0..secs * 10 {
        if check().await {
            return;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("timed out after {secs}s: {what}");
}

/// What an operation needs, as the product documents say (admin > member > viewer).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Needs {
    Viewer = 1,
    Member = 2,
    Admin = 3,
}

/// Where a role is bound, and where an object sits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Level {
    Org,
    Cluster,
    Project,
}

/// Whether a binding at `bound` reaches an object at `at` (of the same organization): an
/// organization role reaches everything, a cluster role its cluster and its projects, a project
/// role its project only; any role lets you see the organization itself.
pub fn reaches(bound: Level, at: Level) -> bool {
    match (bound, at) {
        (_, Level::Org) | (Level::Org, _) => true,
        (Level::Cluster, _) => true,
        (Level::Project, at) => at == Level::Project,
    }
}

/// What the status router writes once the agent has taken the project's namespace.
pub async fn agent_took_namespace(admin: &Client, kube: &kube::Client, org: &str, project: &Value) {
    let api: Api<kubenest_crds::project::Project> =
        Api::namespaced(kube.clone(), &format!("org-{org}"));
    let name = project["name"].as_str().unwrap();
    let generation = api.get(name).await.unwrap().metadata.generation.unwrap();
    let patch = json!({"status": {"clusterPhase": "Ready", "ensuredGeneration": generation}});
    api.patch_status(name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .unwrap();
    let path = format!("/api/v1/projects/{}", project["id"].as_str().unwrap());
    eventually("the project is Ready", 30, async || {
        admin.get(&path).await.1["phase"] == "Ready"
    })
    .await;
}

/// Whether the organization's RoleBinding `binding` (`kubenest-org-member`, ...) binds the
/// Kubernetes user of kubenest user id `id`.
pub async fn org_binding_has(kube: &kube::Client, org: &str, binding: &str, id: &str) -> bool {
    let bindings: Api<k8s_openapi::api::rbac::v1::RoleBinding> =
        Api::namespaced(kube.clone(), &format!("org-{org}"));
    let subject = kubenest_crds::common::kubernetes_user(id);
    bindings
        .get_opt(binding)
        .await
        .unwrap()
        .and_then(|b| b.subjects)
        .unwrap_or_default()
        .iter()
        .any(|s| s.name == subject)
}

/// The catalog's `redis` definition, as the addon tests use it (applied, so any test may).
pub async fn redis_definition() {
    let kube = plane().kube().await;
    let definitions = Api::<kubenest_crds::addon::AddonDefinition>::namespaced(kube, SYSTEM);
    definitions
        .patch(
            "redis",
            &PatchParams::apply("tests").force(),
            &Patch::Apply(json!({
                "apiVersion": "kubenest.io/v1alpha1", "kind": "AddonDefinition",
                "metadata": {"name": "redis"},
                "spec": {"displayName": "Redis",
                    "chart": {"repository": "charts/addons", "name": "redis", "version": "1.0.0"},
                    "exports": {"host": "{release}.{namespace}.svc", "port": "6379"},
                    "valuesSchema": {"type": "object", "additionalProperties": false,
                        "properties": {"maxmemory": {"type": "string", "pattern": "^[0-9]+mb$"}}}}
            })),
        )
        .await
        .unwrap();
}
