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

/// Serves the app with these backends on a port-0 listener; returns its base URL.
async fn serve(database_url: Option<String>, redis_url: Option<String>) -> String {
    serve_with(ServeArgs {
        database_url,
        redis_url,
        ..settings()
    })
    .await
}

/// The settings of a test's app: no backends, no misbehaviour.
fn settings() -> ServeArgs {
    ServeArgs {
        port: 0,
        database_url: None,
        redis_url: None,
        demo_version: "demo-test-1".into(),
        check_timeout_seconds: 3,
        error_ratio: 0.0,
        leak_mb_per_s: 0,
        exit_after_s: None,
        load_url: None,
        load_per_second: 10,
    }
}

/// Serves the app with `args` on a port-0 listener; returns its base URL.
async fn serve_with(args: ServeArgs) -> String {
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

/// The value of the sample `name` in the Prometheus text `metrics`, if it is there.
fn sample(metrics: &str, name: &str) -> Option<f64> {
    metrics.lines().find_map(|line| {
        let (key, value) = line.rsplit_once(' ')?;
        (key == name).then(|| value.parse().ok()).flatten()
    })
}

#[tokio::test]
async fn half_the_requests_fail_on_purpose_and_the_metrics_count_them() {
    let url = serve_with(ServeArgs {
        error_ratio: 0.5,
        ..settings()
    })
    .await;
    let mut codes = Vec::new();
    for _ in 0..10 {
        let response = reqwest::get(&url).await.expect("GET /");
        codes.push(response.status().as_u16());
        if response.status() == 500 {
            let body = response.text().await.expect("body");
            assert!(body.contains("on purpose"), "{body}");
        }
    }
    assert_eq!(codes.iter().filter(|&&c| c == 500).count(), 5, "{codes:?}");
    assert_eq!(codes.iter().filter(|&&c| c == 200).count(), 5, "{codes:?}");

    let response = reqwest::get(format!("{url}/metrics"))
        .await
        .expect("GET /metrics");
    assert_eq!(response.status(), 200);
    let content_type = response.headers()[reqwest::header::CONTENT_TYPE].clone();
    assert!(
        content_type
            .to_str()
            .is_ok_and(|t| t.starts_with("application/openmetrics-text")),
        "{content_type:?}"
    );
    let text = response.text().await.expect("metrics");
    let failed = sample(&text, r#"http_requests_total{code="500",method="GET"}"#);
    let answered = sample(&text, r#"http_requests_total{code="200",method="GET"}"#);
    let timed = sample(
        &text,
        r#"http_request_duration_seconds_count{method="GET"}"#,
    );
    assert_eq!(failed, Some(5.0), "{text}");
    assert_eq!(answered, Some(5.0), "{text}");
    assert_eq!(timed, Some(10.0), "{text}");

    // Neither the health check nor the metrics fail on purpose, and neither is counted (a
    // probe must not make an idle app look busy).
    for _ in 0..4 {
        let health = reqwest::get(format!("{url}/healthz")).await.expect("GET");
        assert_eq!(health.status(), 200);
        let metrics = reqwest::get(format!("{url}/metrics")).await.expect("GET");
        assert_eq!(metrics.status(), 200);
    }
    let text = reqwest::get(format!("{url}/metrics"))
        .await
        .expect("GET /metrics")
        .text()
        .await
        .expect("metrics");
    let answered = sample(&text, r#"http_requests_total{code="200",method="GET"}"#);
    let timed = sample(
        &text,
        r#"http_request_duration_seconds_count{method="GET"}"#,
    );
    assert_eq!(answered, Some(5.0), "{text}");
    assert_eq!(timed, Some(10.0), "{text}");
}

#[tokio::test]
async fn an_error_ratio_out_of_range_stops_the_app_naming_the_setting() {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let args = ServeArgs {
        error_ratio: 1.5,
        ..settings()
    };
    let error = kubenest_demo::run(args, listener, std::future::pending())
        .await
        .expect_err("refused");
    assert!(error.to_string().contains("DEMO_ERROR_RATIO"), "{error}");
}

/// The binary with its settings from `args` alone (none inherited from the test's env).
fn demo_process(args: &[&str]) -> tokio::process::Command {
    let mut command = tokio::process::Command::new(env!("CARGO_BIN_EXE_kubenest-demo"));
    for name in [
        "PORT",
        "DATABASE_URL",
        "REDIS_URL",
        "DEMO_ERROR_RATIO",
        "DEMO_LEAK_MB_PER_S",
        "DEMO_EXIT_AFTER_S",
    ] {
        command.env_remove(name);
    }
    command.args(["--port", "0"]).args(args).kill_on_drop(true);
    command
}

#[tokio::test]
async fn exit_after_ends_the_process_with_status_one_and_says_why() {
    let child = demo_process(&["--exit-after-s", "1"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("run kubenest-demo");
    // Generous: the point is that it exits, and how, not how promptly.
    let output = tokio::time::timeout(Duration::from_secs(60), child.wait_with_output())
        .await
        .expect("the process exits")
        .expect("its output");
    assert_eq!(output.status.code(), Some(1), "{output:?}");
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(said.contains("DEMO_EXIT_AFTER_S"), "{said}");
}

#[tokio::test]
async fn a_leaking_process_keeps_growing_its_resident_memory() {
    let mut child = demo_process(&["--leak-mb-per-s", "16"])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("run kubenest-demo");
    let pid = child.id().expect("pid");
    let resident_kib = || -> Option<u64> {
        let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
        let line = status.lines().find(|l| l.starts_with("VmRSS:"))?;
        line.split_whitespace().nth(1)?.parse().ok()
    };
    // 64 MiB is far above what the app needs to serve, and four seconds of leaking; the
    // deadline is generous, what counts is that the memory stays taken.
    let mut resident = 0;
    for _ in 0..600 {
        resident = resident_kib().unwrap_or_default();
        if resident > 64 * 1024 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    child.kill().await.expect("kill");
    assert!(resident > 64 * 1024, "resident: {resident} KiB");
}

/// With `DEMO_LOAD_URL`, one app sends another steady traffic, which the other's metrics count.
#[tokio::test]
async fn an_app_with_a_load_url_sends_its_requests_to_another() {
    let target = serve_with(settings()).await;
    let _loader = serve_with(ServeArgs {
        load_url: Some(format!("{target}/")),
        load_per_second: 50,
        ..settings()
    })
    .await;
    let mut counted = 0.0;
    for _ in 0..100 {
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        let text = reqwest::get(format!("{target}/metrics"))
            .await
            .expect("GET /metrics")
            .text()
            .await
            .expect("metrics");
        counted = sample(&text, r#"http_requests_total{code="200",method="GET"}"#).unwrap_or(0.0);
        if counted >= 10.0 {
            break;
        }
    }
    assert!(counted >= 10.0, "the load reached the target: {counted}");
}

#[test]
fn a_load_url_that_is_not_http_or_a_rate_out_of_range_is_refused_naming_it() {
    let bad_url = ServeArgs {
        load_url: Some("file:///etc/passwd".into()),
        ..settings()
    };
    assert!(
        bad_url
            .validate()
            .unwrap_err()
            .to_string()
            .contains("DEMO_LOAD_URL")
    );
    let bad_rate = ServeArgs {
        load_per_second: 0,
        ..settings()
    };
    assert!(
        bad_rate
            .validate()
            .unwrap_err()
            .to_string()
            .contains("DEMO_LOAD_PER_SECOND")
    );
}
