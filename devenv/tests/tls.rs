//! The API over HTTPS, as the release programs run it: the API server serves TLS (rustls) with
//! its certificate, the `kubenest` CLI logs in over https trusting it with `--ca-file` (kept
//! with the session for the commands after), refuses a server it cannot verify, and never sends
//! a password over plain HTTP to another machine; the refresh cookie is `Secure`; the API
//! server refuses to serve plain HTTP off loopback unless told it sits behind a TLS proxy.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // a test fails by panicking

// A System of its own, on a management cluster of its own: a binary of its own (see
// tests/it/main.rs).
#[path = "it/common/mod.rs"]
mod common;

use std::process::Command;

use common::{kubenest, run, text};
use kubenest_devenv::system::{Options, Programs, System};

#[test]
fn the_cli_logs_in_over_https_with_the_ca_it_is_given_and_refuses_what_it_cannot_trust() {
    run(async {
        let env = kubenest_testkit::shared().await.unwrap();
        let database = env.postgres().unwrap().fresh_database("tls").await.unwrap();
        let dir = tempfile::tempdir().unwrap();
        let options = Options {
            hubs: 1,
            controllers: 1,
            api_tls: true,
            ..Options::default()
        };
        let system = System::start(env, &database.url, dir.path(), options, &|_| {})
            .await
            .unwrap();
        let api = system.api_url();
        assert!(api.starts_with("https://"), "{api}");
        let ca = system.api_ca().unwrap().to_str().unwrap().to_owned();
        let password = system.options().admin_password.clone();
        let session = dir.path().join("session.json");

        // Without the CA the server cannot be verified: no login, no password sent.
        let refused = kubenest(
            &session,
            &["--api", &api, "login", "-u", "admin", "--password-stdin"],
            &password,
        );
        assert!(!refused.status.success(), "{}", text(&refused));
        assert!(
            text(&refused).to_lowercase().contains("certificate"),
            "the error names the certificate: {}",
            text(&refused)
        );

        let login = kubenest(
            &session,
            &[
                "--api",
                &api,
                "--ca-file",
                &ca,
                "login",
                "-u",
                "admin",
                "--password-stdin",
            ],
            &password,
        );
        assert!(login.status.success(), "{}", text(&login));
        // The session remembers the CA: the next command needs no flag.
        let orgs = kubenest(&session, &["orgs", "list"], "");
        assert!(orgs.status.success(), "{}", text(&orgs));

        // A password never crosses the network in the clear (refused before any connection).
        let plain = kubenest(
            &session,
            &[
                "--api",
                "http://192.0.2.10:8080",
                "login",
                "-u",
                "admin",
                "--password-stdin",
            ],
            &password,
        );
        assert!(!plain.status.success());
        assert!(text(&plain).contains("plain HTTP"), "{}", text(&plain));

        // The refresh cookie is Secure and HttpOnly on the HTTPS API.
        let pem = std::fs::read(&ca).unwrap();
        let http = reqwest::Client::builder()
            .add_root_certificate(reqwest::Certificate::from_pem(&pem).unwrap())
            .build()
            .unwrap();
        let answer = http
            .post(format!("{api}/api/v1/login"))
            .json(&serde_json::json!({"username": "admin", "password": password}))
            .send()
            .await
            .unwrap();
        assert_eq!(answer.status(), 200);
        let cookie = answer
            .headers()
            .get_all(reqwest::header::SET_COOKIE)
            .iter()
            .map(|v| v.to_str().unwrap().to_owned())
            .collect::<Vec<_>>()
            .join("; ");
        assert!(
            cookie.contains("Secure") && cookie.contains("HttpOnly"),
            "{cookie}"
        );
        drop(system);
    });
}

#[test]
fn the_api_server_refuses_plain_http_off_loopback_unless_behind_a_tls_proxy() {
    let apiserver = Programs::locate().unwrap().apiserver;
    let refused = Command::new(&apiserver)
        .args([
            "--listen=0.0.0.0:0",
            "--database-url=postgres://unused",
            "--api-signing-key=/nonexistent",
        ])
        .output()
        .unwrap();
    assert!(!refused.status.success());
    assert!(
        text(&refused).contains("is not loopback"),
        "{}",
        text(&refused)
    );
    // With the proxy named, the check passes and the server goes on to read its key.
    let behind_proxy = Command::new(&apiserver)
        .args([
            "--listen=0.0.0.0:0",
            "--insecure-plaintext",
            "--database-url=postgres://unused",
            "--api-signing-key=/nonexistent",
        ])
        .output()
        .unwrap();
    assert!(!behind_proxy.status.success());
    assert!(
        !text(&behind_proxy).contains("is not loopback"),
        "{}",
        text(&behind_proxy)
    );
}
