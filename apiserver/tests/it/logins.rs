//! Login limits behind a reverse proxy, tried as an attacker would: attempts and failures count
//! per client address, read from `X-Forwarded-For` only when the peer is a trusted proxy and
//! only from its right end; failing for a user from one address never locks them out at
//! another. Each test runs its own API servers on loopback over a fresh database, on a real
//! PostgreSQL and management kube-apiserver. The test client is the peer 127.0.0.1, which a
//! test trusts as its proxy or not.
//!
//! The per-minute attempt buckets are held at one attempt a minute, so that a second attempt
//! within a minute is refused whatever the pace of the machine; failures count over 15 minutes.

use std::time::Duration;

use kubenest_apiserver::client_address::TrustedProxies;
use kubenest_apiserver::limits::LimitsConfig;
use kubenest_apiserver::run::{Config, start};
use kubenest_apiserver::state::Settings;
use kubenest_store::DatabaseUrl;
use reqwest::StatusCode;
use serde_json::{Value, json};
use tokio_util::sync::{CancellationToken, DropGuard};

const ADMIN: &str = "admin";
const ADMIN_PASSWORD: &str = "admin-password-for-tests";
const PASSWORD: &str = "a-long-enough-password";
const WRONG: &str = "wrong password!";
/// Failures for one user from one address before that user is refused there.
const PAIR_LIMIT: usize = 5;
/// Failures from one address before every login from it is refused.
const ADDRESS_LIMIT: usize = 20;

/// API servers over one fresh database; they stop when this is dropped.
struct Servers {
    database_url: String,
    _stop: DropGuard,
    stop: CancellationToken,
}

impl Servers {
    async fn new() -> Self {
        let postgres = kubenest_testkit::shared_postgres().await.unwrap();
        let database = postgres.fresh_database("logins").await.unwrap();
        let stop = CancellationToken::new();
        Self {
            database_url: database.url,
            _stop: stop.clone().drop_guard(),
            stop,
        }
    }

    /// Starts one that trusts `proxies` and takes `per_minute` login attempts per address;
    /// its base URL.
    async fn start(&self, proxies: &[&str], per_minute: u32) -> String {
        let mgmt = kubenest_testkit::shared_management().await.unwrap();
        let client = mgmt.client().await.unwrap();
        kubenest_controllers::ensure_crds(&client).await.unwrap();
        let proxies: Vec<String> = proxies.iter().map(|p| (*p).to_owned()).collect();
        let config = Config {
            client,
            database_url: DatabaseUrl::new(self.database_url.clone()),
            signing_key_pem: rcgen::KeyPair::generate_for(&rcgen::PKCS_ED25519)
                .unwrap()
                .serialize_pem(),
            issuer: "kubenest".into(),
            admin: Some((ADMIN.into(), ADMIN_PASSWORD.into())),
            hub: None,
            settings: Settings {
                public_hub_url: "wss://hub.example.test/v1/connect".into(),
                agent_chart: "charts/kubenest-agent".into(),
                system_namespace: "kubenest-system".into(),
                secure_cookies: false,
                mint_timeout: Duration::from_secs(5),
                event_buffer: 64,
                console_dir: None,
                charts: Default::default(),
            },
            limits: LimitsConfig {
                logins_per_minute_per_address: per_minute,
                trusted_proxies: TrustedProxies::parse(&proxies, "X-Forwarded-For").unwrap(),
                ..LimitsConfig::default()
            },
        };
        let state = start(config, &self.stop).await.unwrap();
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let base = format!("http://{}", listener.local_addr().unwrap());
        let stop = self.stop.clone();
        tokio::spawn(kubenest_apiserver::serve(listener, state, async move {
            stop.cancelled().await
        }));
        base
    }
}

/// What a login attempt got.
struct Answer {
    status: StatusCode,
    retry_after: Option<u64>,
    body: Value,
}

impl Answer {
    /// Asserts a 429 with a `Retry-After` within the failure window.
    fn assert_refused(&self, what: &str) {
        assert_eq!(
            self.status,
            StatusCode::TOO_MANY_REQUESTS,
            "{what}: {}",
            self.body
        );
        assert_eq!(self.body["code"], "rate_limited", "{what}");
        let retry = self
            .retry_after
            .unwrap_or_else(|| panic!("{what}: no Retry-After"));
        assert!(
            (1..=15 * 60).contains(&retry),
            "{what}: Retry-After {retry}"
        );
    }
}

/// Logs in at `base` as `username`, with `X-Forwarded-For: forwarded_for` when given.
async fn login(base: &str, forwarded_for: Option<&str>, username: &str, password: &str) -> Answer {
    let mut request = reqwest::Client::new()
        .post(format!("{base}/api/v1/login"))
        .json(&json!({"username": username, "password": password}));
    if let Some(header) = forwarded_for {
        request = request.header("x-forwarded-for", header);
    }
    let response = request.send().await.unwrap();
    let status = response.status();
    let retry_after = response
        .headers()
        .get("retry-after")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse().ok());
    let text = response.text().await.unwrap();
    let body = serde_json::from_str(&text).unwrap_or(Value::String(text));
    Answer {
        status,
        retry_after,
        body,
    }
}

/// Creates `username` (with [`PASSWORD`]) as the bootstrap administrator, logging in from
/// `forwarded_for`.
async fn create_user(base: &str, forwarded_for: Option<&str>, username: &str) {
    let admin = login(base, forwarded_for, ADMIN, ADMIN_PASSWORD).await;
    assert_eq!(admin.status, StatusCode::OK, "{}", admin.body);
    let created = reqwest::Client::new()
        .post(format!("{base}/api/v1/users"))
        .bearer_auth(admin.body["access_token"].as_str().unwrap())
        .json(&json!({"username": username, "password": PASSWORD}))
        .send()
        .await
        .unwrap();
    assert_eq!(created.status(), StatusCode::CREATED);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn behind_a_trusted_proxy_each_forwarded_client_has_its_own_attempts_and_failures() {
    let servers = Servers::new().await;
    let tight = servers.start(&["127.0.0.1/32"], 1).await;
    let loose = servers.start(&["127.0.0.1/32"], 1000).await;
    create_user(&loose, Some("192.0.2.1"), "ada").await;
    let (x, y) = ("203.0.113.10", "198.51.100.20");

    // X spends its attempt, then invents a new address on the left of the header for each
    // try: the proxy's entry on the right is still X, and X is refused.
    let first = login(&tight, Some(x), "ada", PASSWORD).await;
    assert_eq!(first.status, StatusCode::OK, "{}", first.body);
    for invented in [
        "198.51.100.99",
        "127.0.0.1",
        "10.0.0.1, 192.0.2.77",
        "nonsense",
    ] {
        login(&tight, Some(&format!("{invented}, {x}")), "ada", PASSWORD)
            .await
            .assert_refused(&format!("X claiming {invented}"));
    }
    // Y, behind the same proxy, has its own attempt.
    let ada = login(&tight, Some(y), "ada", PASSWORD).await;
    assert_eq!(ada.status, StatusCode::OK, "Y: {}", ada.body);

    // X fails for many users until its address is refused for everyone, ada included.
    for i in 0..ADDRESS_LIMIT {
        let failed = login(&loose, Some(x), &format!("guess-{i}"), WRONG).await;
        assert_eq!(failed.status, StatusCode::UNAUTHORIZED, "{}", failed.body);
    }
    login(&loose, Some(x), "ada", PASSWORD)
        .await
        .assert_refused("X after its failures");
    // Y's failures are Y's: ada logs in from Y.
    let ada = login(&loose, Some(y), "ada", PASSWORD).await;
    assert_eq!(ada.status, StatusCode::OK, "Y after X failed: {}", ada.body);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_untrusted_peers_forwarded_for_is_ignored_and_it_stays_one_client() {
    let servers = Servers::new().await;
    let tight = servers.start(&[], 1).await;
    let loose = servers.start(&[], 1000).await;
    create_user(&loose, None, "bob").await;

    // A fresh X-Forwarded-For on every try: still the peer's one attempt a minute.
    let first = login(&tight, Some("203.0.113.1"), "bob", PASSWORD).await;
    assert_eq!(first.status, StatusCode::OK, "{}", first.body);
    for claimed in [
        "203.0.113.2",
        "198.51.100.3, 203.0.113.4",
        "[2001:db8::5]:443",
    ] {
        login(&tight, Some(claimed), "bob", PASSWORD)
            .await
            .assert_refused(&format!("claiming {claimed}"));
    }

    // Nor do fresh headers escape the failures: bob is refused at the peer's address.
    for i in 0..PAIR_LIMIT {
        let failed = login(&loose, Some(&format!("203.0.113.{}", 10 + i)), "bob", WRONG).await;
        assert_eq!(failed.status, StatusCode::UNAUTHORIZED, "{}", failed.body);
    }
    login(&loose, Some("198.51.100.200"), "bob", PASSWORD)
        .await
        .assert_refused("bob under a fresh header");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failing_for_a_user_from_one_address_never_stops_them_logging_in_from_another() {
    let servers = Servers::new().await;
    let replicas = [
        servers.start(&["127.0.0.1/32"], 1000).await,
        servers.start(&["127.0.0.1/32"], 1000).await,
    ];
    create_user(&replicas[0], Some("192.0.2.1"), "carol").await;
    let attacker = "203.0.113.66";
    let carol = "2001:db8:c::7";

    // The attacker guesses carol's password from A on both replicas, and goes on guessing.
    for i in 0..PAIR_LIMIT {
        let failed = login(&replicas[i % 2], Some(attacker), "carol", WRONG).await;
        assert_eq!(failed.status, StatusCode::UNAUTHORIZED, "{}", failed.body);
    }
    for replica in &replicas {
        login(replica, Some(attacker), "carol", WRONG)
            .await
            .assert_refused("the attacker guessing on");
    }

    // Carol, from B, logs in on either replica.
    for replica in &replicas {
        let answer = login(
            replica,
            Some(&format!("[{carol}]:50000")),
            "carol",
            PASSWORD,
        )
        .await;
        assert_eq!(answer.status, StatusCode::OK, "carol: {}", answer.body);
    }
    // Her login at B leaves A refused, even with the right password.
    for replica in &replicas {
        login(replica, Some(attacker), "carol", PASSWORD)
            .await
            .assert_refused("the attacker after carol's login");
    }

    // Her own mistakes at B are forgotten when she gets it right there.
    for round in 0..2 {
        for _ in 0..PAIR_LIMIT - 1 {
            let failed = login(&replicas[round], Some(carol), "carol", WRONG).await;
            assert_eq!(failed.status, StatusCode::UNAUTHORIZED, "{}", failed.body);
        }
        let answer = login(&replicas[1 - round], Some(carol), "carol", PASSWORD).await;
        assert_eq!(
            answer.status,
            StatusCode::OK,
            "round {round}: {}",
            answer.body
        );
    }
}
