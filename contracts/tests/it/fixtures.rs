//! Every message type has valid and invalid examples under `fixtures/<type>/{pass,fail}/`; the
//! validator accepts every valid one and refuses every invalid one with the expected code and
//! JSON path.

use std::path::{Path, PathBuf};

use kubenest_contracts::{Envelope, ErrorCode, MessageType, Validator};
use serde_json::Value;

fn fixtures() -> PathBuf {
    // At run time: cargo reuses built tests across clone locations, so a compile-time path can
    // point at a clone that is gone.
    std::env::var_os("CARGO_MANIFEST_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")))
        .join("fixtures")
}

fn json_files(dir: &Path) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut files: Vec<PathBuf> = entries
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "json"))
        .collect();
    files.sort();
    files
}

#[test]
fn every_message_type_has_pass_and_fail_examples() {
    for kind in MessageType::ALL {
        let dir = fixtures().join(kind.as_str());
        assert!(
            !json_files(&dir.join("pass")).is_empty(),
            "{kind} has no pass/ example"
        );
        assert!(
            !json_files(&dir.join("fail")).is_empty(),
            "{kind} has no fail/ example"
        );
    }
}

#[test]
fn every_pass_example_decodes_and_round_trips() {
    let validator = Validator::shared().unwrap();
    let mut count = 0;
    for dir in std::fs::read_dir(fixtures()).unwrap() {
        for file in json_files(&dir.unwrap().path().join("pass")) {
            let raw = std::fs::read(&file).unwrap();
            let envelope = validator
                .decode(&raw)
                .unwrap_or_else(|e| panic!("{} was refused: {e}", file.display()));
            let text = validator.encode(&envelope).unwrap();
            let again: Envelope = validator.decode(text.as_bytes()).unwrap();
            assert_eq!(again, envelope, "{} does not round-trip", file.display());
            count += 1;
        }
    }
    assert!(count >= MessageType::ALL.len());
}

#[test]
fn every_fail_example_is_refused_with_the_expected_code_and_path() {
    let validator = Validator::shared().unwrap();
    let mut count = 0;
    let mut wrong = Vec::new();
    for dir in std::fs::read_dir(fixtures()).unwrap() {
        for file in json_files(&dir.unwrap().path().join("fail")) {
            let case: Value = serde_json::from_slice(&std::fs::read(&file).unwrap()).unwrap();
            let raw = match (&case["raw"], &case["frame"]) {
                (Value::String(raw), _) => raw.clone().into_bytes(),
                (_, frame) => serde_json::to_vec(frame).unwrap(),
            };
            let name = file.strip_prefix(fixtures()).unwrap().display().to_string();
            count += 1;
            let error = match validator.decode(&raw) {
                Ok(_) => {
                    wrong.push(format!("{name}: accepted"));
                    continue;
                }
                Err(e) => e,
            };
            let expected_code: ErrorCode =
                serde_json::from_value(case["expect"]["code"].clone()).unwrap();
            if error.code != expected_code || error.path != case["expect"]["path"] {
                wrong.push(format!("{name}: expected {}, got {error}", case["expect"]));
            }
            assert!(!error.reason.is_empty());
        }
    }
    assert!(
        wrong.is_empty(),
        "{} of {count} fail examples wrong:\n{}",
        wrong.len(),
        wrong.join("\n")
    );
    assert!(count >= MessageType::ALL.len());
}

#[test]
fn a_frame_over_the_size_limit_is_refused_before_parsing() {
    let validator = Validator::shared().unwrap();
    let limit = validator.limits().max_frame_bytes;
    let raw = format!("{{\"padding\":\"{}\"}}", "x".repeat(limit));
    let error = validator.decode(raw.as_bytes()).unwrap_err();
    assert_eq!(error.code, ErrorCode::TooLarge);
    assert_eq!(error.path, "");
}

#[test]
fn refusals_never_quote_a_secret_value() {
    let validator = Validator::shared().unwrap();
    let path = fixtures().join("secret.set/pass/typical.json");
    let mut frame: Value = serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap();
    let secret = "hunter2-".repeat(40_000); // longer than a secret value may be
    frame["payload"]["values"]["STRIPE_KEY"] = Value::String(secret);
    let error = validator
        .decode(&serde_json::to_vec(&frame).unwrap())
        .unwrap_err();
    assert_eq!(error.path, "/payload/values/STRIPE_KEY");
    assert!(
        !error.reason.contains("hunter2"),
        "reason quotes the secret: {}",
        error.reason
    );
    assert!(!format!("{error:?}").contains("hunter2"));
}

#[test]
fn outgoing_frames_are_checked_too() {
    let validator = Validator::shared().unwrap();
    let path = fixtures().join("hello/pass/typical.json");
    let mut envelope = validator.decode(&std::fs::read(path).unwrap()).unwrap();
    envelope.cluster_id = None;
    let error = validator.encode(&envelope).unwrap_err();
    assert_eq!(error.path, "/cluster_id");
    assert_eq!(error.frame_id, Some(envelope.id));
}
