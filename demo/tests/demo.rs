//! The demo app against a real PostgreSQL (the test kit's) and a real redis-server (Debian's),
//! both on loopback: the answer proves each was reached with the URL the app was given.

#![allow(clippy::expect_used, clippy::panic)]

use std::process::Command;
use std::time::Duration;

use kubenest_demo::ServeArgs;
use kubenest_testkit::{ManagedProcess, free_port};
use serde_json::Value;

/// A redis-server with a password on a free loopback port, stopped on drop.
struct Redis {
    _process: ManagedProcess,
    _dir: tempfile::TempDir,
    port: u16,
}

async fn start_redis(password: &str) -> Redis {
    let dir = tempfile::tempdir().expect("redis dir");
    let port = free_port().expect("port");
    let mut command = Command::new("redis-server");
    command.args(["--bind", "127.0.0.1", "--save", "", "--appendonly", "no"]);
    command.args(["--port", &port.to_string(), "--requirepass", password]);
    command.arg("--dir").arg(dir.path());
    let process = ManagedProcess::spawn("redis", command, dir.path().join("redis.log"))
        .expect("redis-server (apt-get install redis-server; tools/setup.sh does)");
    for _ in 0..100 {
        if tokio::net::TcpStream::connect(("127.0.0.1", port))
            .await
            .is_ok()
        {
            return Redis {
                _process: process,
                _dir: dir,
                port,
            };
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("redis-server did not listen on {port}");
}

/// Serves the app with these settings on a port-0 listener; returns its base URL.
async fn serve(database_url: Option<String>, redis_url: Option<String>) -> String {
    let args = ServeArgs {
        port: 0,
        database_url,
        redis_url,
        demo_version: "demo-test-1".into(),
        check_timeout_seconds: 3,
    };
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let url = format!("http://{}", listener.local_addr().expect("addr"));
    tokio::spawn(kubenest_demo::run(args, listener, std::future::pending()));
    url
}

async fn answer(url: &str) -> (u16, Value) {
    let response = reqwest::get(url).await.expect("GET");
    let status = response.status().as_u16();
    (status, response.json().await.expect("JSON body"))
}

#[tokio::test]
async fn the_answer_shows_a_row_written_and_read_back_and_a_redis_key_set_and_read() {
    let postgres = kubenest_testkit::shared_postgres().await.expect("postgres");
    let db = postgres.fresh_database("demo").await.expect("database");
    let redis = start_redis("s3cret").await;
    let url = serve(
        Some(db.url.clone()),
        Some(format!("redis://:s3cret@127.0.0.1:{}", redis.port)),
    )
    .await;

    let (status, first) = answer(&url).await;
    assert_eq!(status, 200, "{first:#}");
    assert_eq!(first["ok"], true);
    assert_eq!(first["version"], "demo-test-1");
    let pg = &first["postgres"];
    assert_eq!(pg["connected"], true, "{pg:#}");
    assert_eq!(pg["read_back"], true);
    assert!(
        pg["server"]
            .as_str()
            .is_some_and(|s| s.starts_with("PostgreSQL"))
    );
    assert!(
        pg["row"]["note"]
            .as_str()
            .is_some_and(|n| n.contains("demo-test-1"))
    );
    assert!(!pg["target"].as_str().unwrap_or_default().contains("s3cret"));
    let rd = &first["redis"];
    assert_eq!(rd["connected"], true, "{rd:#}");
    assert_eq!(rd["read_back"], true);
    assert_eq!(
        rd["target"],
        format!("redis://:***@127.0.0.1:{}", redis.port)
    );

    // Each request writes a new row: the table persists between them.
    let (_, second) = answer(&url).await;
    assert!(second["postgres"]["row"]["id"].as_i64() > first["postgres"]["row"]["id"].as_i64());

    let health = reqwest::get(format!("{url}/healthz")).await.expect("GET");
    assert_eq!(health.status(), 200);
}

#[tokio::test]
async fn a_backend_it_cannot_reach_makes_the_answer_503_with_the_reason() {
    let redis = start_redis("right").await;
    let closed = free_port().expect("port");
    let url = serve(
        Some(format!("postgres://app:pw@127.0.0.1:{closed}/app")),
        Some(format!("redis://:wrong@127.0.0.1:{}", redis.port)),
    )
    .await;
    let (status, body) = answer(&url).await;
    assert_eq!(status, 503, "{body:#}");
    assert_eq!(body["ok"], false);
    assert_eq!(body["postgres"]["connected"], false);
    assert!(
        body["postgres"]["error"]
            .as_str()
            .is_some_and(|e| e.contains("refused")),
        "{body:#}"
    );
    assert_eq!(body["redis"]["connected"], false);
    assert!(
        body["redis"]["error"]
            .as_str()
            .is_some_and(|e| e.contains("uthentication")),
        "{body:#}"
    );
}

#[tokio::test]
async fn without_backends_the_app_answers_its_version_alone() {
    let url = serve(None, None).await;
    let (status, body) = answer(&url).await;
    assert_eq!(status, 200);
    assert_eq!(body["postgres"]["configured"], false);
    assert_eq!(body["redis"]["configured"], false);
    assert_eq!(body["version"], "demo-test-1");
}

#[tokio::test]
async fn get_prints_the_body_and_fails_on_a_non_2xx_answer() {
    let bin = env!("CARGO_BIN_EXE_kubenest-demo");
    let good = serve(None, None).await;
    let ok = tokio::process::Command::new(bin)
        .args(["get", &good])
        .output()
        .await
        .expect("run kubenest-demo get");
    assert!(ok.status.success(), "{ok:?}");
    let body: Value = serde_json::from_slice(&ok.stdout).expect("JSON on stdout");
    assert_eq!(body["app"], "kubenest-demo");

    let closed = free_port().expect("port");
    let bad = serve(Some(format!("postgres://a:b@127.0.0.1:{closed}/a")), None).await;
    let failed = tokio::process::Command::new(bin)
        .args(["get", &bad])
        .output()
        .await
        .expect("run kubenest-demo get");
    assert!(!failed.status.success());
    assert!(String::from_utf8_lossy(&failed.stderr).contains("503"));

    let nobody = tokio::process::Command::new(bin)
        .args([
            "get",
            &format!("http://127.0.0.1:{closed}/"),
            "--timeout-seconds",
            "2",
        ])
        .output()
        .await
        .expect("run kubenest-demo get");
    assert!(!nobody.status.success());
}
