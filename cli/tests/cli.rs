//! The `kubenest` binary itself, as a user runs it: it says its version, and a command that
//! cannot know which API to talk to says how to tell it, before any network traffic. (Its
//! commands against a running system are exercised by the end-to-end tests in `devenv/tests`,
//! which run this same binary; this test also makes `cargo test` build it for them.)

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::process::Command;

fn kubenest(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_kubenest"))
        .args(args)
        .env_remove("KUBENEST_API")
        .env("KUBENEST_SESSION", "/nonexistent/kubenest-session.json")
        .output()
        .unwrap()
}

#[test]
fn it_says_its_version() {
    let out = kubenest(&["--version"]);
    assert!(out.status.success());
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains(env!("CARGO_PKG_VERSION")), "{text}");
}

#[test]
fn a_login_without_an_api_says_how_to_name_one() {
    let out = kubenest(&["login", "-u", "admin", "--password-stdin"]);
    assert!(!out.status.success());
    let text = String::from_utf8_lossy(&out.stderr);
    assert!(
        text.contains("--api") && text.contains("KUBENEST_API"),
        "{text}"
    );
}
