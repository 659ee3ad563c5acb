//! The REST API as the tests call it: the real API server started on loopback with a hub
//! session of its own, and a client holding the admin's bearer token, JSON both ways.

use std::sync::Arc;
use std::time::Duration;

use kubenest_apiserver::limits::LimitsConfig;
use kubenest_apiserver::run::{Config, HubConfig};
use kubenest_apiserver::state::Settings;
use kubenest_contracts::TokenSigner;
use reqwest::Method;
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

pub struct Rest {
    pub base: String,
    pub http: reqwest::Client,
    pub token: String,
}

impl Rest {
    /// Starts the API server over `client` and the database at `database_url` (with hub replica
    /// `hub_url` for component secrets) until `shutdown`, and logs in as its admin.
    pub async fn start(
        client: &kube::Client,
        database_url: &kubenest_store::DatabaseUrl,
        hub_url: &str,
        signer: &Arc<TokenSigner>,
        admin_password: &str,
        shutdown: &CancellationToken,
    ) -> Self {
        let api_key = rcgen::KeyPair::generate_for(&rcgen::PKCS_ED25519)
            .unwrap()
            .serialize_pem();
        let state = kubenest_apiserver::run::start(
            Config {
                client: client.clone(),
                database_url: database_url.clone(),
                signing_key_pem: api_key,
                issuer: "kubenest".into(),
                admin: Some(("admin".into(), admin_password.into())),
                hub: Some(HubConfig {
                    urls: vec![hub_url.to_owned()],
                    signer: Arc::clone(signer),
                    session_namespace: super::SYSTEM.into(),
                }),
                settings: Settings {
                    public_hub_url: hub_url.to_owned(),
                    agent_chart: "charts/kubenest-agent".into(),
                    system_namespace: super::SYSTEM.into(),
                    secure_cookies: false,
                    mint_timeout: Duration::from_secs(30),
                    event_buffer: 4096,
                    console_dir: None,
                    charts: Default::default(),
                },
                limits: LimitsConfig::default(),
            },
            shutdown,
        )
        .await
        .unwrap();
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let base = format!("http://{}", listener.local_addr().unwrap());
        let stop = shutdown.clone();
        tokio::spawn(kubenest_apiserver::serve(listener, state, async move {
            stop.cancelled().await
        }));
        let http = reqwest::Client::new();
        let login: Value = http
            .post(format!("{base}/api/v1/login"))
            .json(&json!({"username": "admin", "password": admin_password}))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        let token = login["access_token"].as_str().unwrap().to_owned();
        Self { base, http, token }
    }

    pub async fn call(&self, method: Method, path: &str, body: Option<Value>) -> (u16, Value) {
        let mut request = self
            .http
            .request(method, format!("{}{path}", self.base))
            .bearer_auth(&self.token);
        if let Some(body) = body {
            request = request.json(&body);
        }
        let response = request.send().await.unwrap();
        let status = response.status().as_u16();
        let text = response.text().await.unwrap();
        (
            status,
            serde_json::from_str(&text).unwrap_or(Value::String(text)),
        )
    }

    pub async fn expect(
        &self,
        method: Method,
        path: &str,
        body: Option<Value>,
        want: u16,
    ) -> Value {
        let (status, value) = self.call(method.clone(), path, body).await;
        assert_eq!(status, want, "{method} {path}: {value}");
        value
    }

    pub async fn get(&self, path: &str) -> Value {
        self.expect(Method::GET, path, None, 200).await
    }
}
