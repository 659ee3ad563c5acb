//! Frames validated per second against plain serde deserialisation of the same frames, for a
//! heartbeat (~300 B) and an app.deploy of ~10 KB. Run with `make bench BENCH=contracts`; the
//! last line of output is JSON.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // a benchmark aborts on error

use std::hint::black_box;
use std::time::{Duration, Instant};

use kubenest_contracts::{Envelope, Validator};
use serde_json::{Value, json};

const ROUNDS: usize = 5;

/// How long a round lasts: under `cargo bench` (`--bench`) the full 1.5 s; under `cargo test`,
/// which only checks that the benchmark runs, 20 ms. (kubenest_testkit::bench does this for the
/// other benchmarks; the contracts sit below the test kit.)
fn round() -> Duration {
    if std::env::args().any(|a| a == "--bench") {
        Duration::from_millis(1500)
    } else {
        Duration::from_millis(20)
    }
}

/// Median operations per second of `op` over `ROUNDS` timed rounds.
fn per_second(mut op: impl FnMut()) -> f64 {
    let mut rates = Vec::with_capacity(ROUNDS);
    for _ in 0..ROUNDS {
        let start = Instant::now();
        let mut n = 0u64;
        while start.elapsed() < round() {
            for _ in 0..64 {
                op();
            }
            n += 64;
        }
        rates.push(n as f64 / start.elapsed().as_secs_f64());
    }
    rates.sort_by(f64::total_cmp);
    rates[ROUNDS / 2]
}

fn fixture(path: &str) -> Value {
    // At run time: cargo reuses built tests across clone locations, so a compile-time path can
    // point at a clone that is gone.
    let dir = std::env::var_os("CARGO_MANIFEST_DIR")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")))
        .join("fixtures");
    serde_json::from_slice(&std::fs::read(dir.join(path)).unwrap()).unwrap()
}

/// The typical app.deploy grown to about 10 KB with more workloads.
fn big_deploy() -> Vec<u8> {
    let mut frame = fixture("app.deploy/pass/typical.json");
    let web = frame["payload"]["components"][1].clone();
    let components = frame["payload"]["components"].as_array_mut().unwrap();
    let mut i = 0;
    while serde_json::to_vec(components).unwrap().len() < 9_600 {
        let mut extra = web.clone();
        extra["name"] = json!(format!("web{i}"));
        extra["ingress"]["host"] = json!(format!("web{i}.example.com"));
        components.push(extra);
        i += 1;
    }
    serde_json::to_vec(&frame).unwrap()
}

fn main() {
    let validator = Validator::shared().unwrap();
    let heartbeat = serde_json::to_vec(&fixture("heartbeat/pass/typical.json")).unwrap();
    let deploy = big_deploy();
    // Both sides must accept both frames, or the comparison means nothing.
    validator.decode(&heartbeat).unwrap();
    validator.decode(&deploy).unwrap();
    serde_json::from_slice::<Envelope>(&heartbeat).unwrap();
    serde_json::from_slice::<Envelope>(&deploy).unwrap();

    let validate_heartbeat = per_second(|| {
        black_box(validator.decode(black_box(&heartbeat)).unwrap());
    });
    let serde_heartbeat = per_second(|| {
        black_box(serde_json::from_slice::<Envelope>(black_box(&heartbeat)).unwrap());
    });
    let validate_deploy = per_second(|| {
        black_box(validator.decode(black_box(&deploy)).unwrap());
    });
    let serde_deploy = per_second(|| {
        black_box(serde_json::from_slice::<Envelope>(black_box(&deploy)).unwrap());
    });
    let report = json!({
        "bench": "contracts",
        "heartbeat_bytes": heartbeat.len(),
        "deploy_bytes": deploy.len(),
        "validate_heartbeat_per_s": validate_heartbeat.round(),
        "serde_heartbeat_per_s": serde_heartbeat.round(),
        "heartbeat_ratio": (validate_heartbeat / serde_heartbeat * 1000.0).round() / 1000.0,
        "validate_deploy_per_s": validate_deploy.round(),
        "serde_deploy_per_s": serde_deploy.round(),
        "deploy_ratio": (validate_deploy / serde_deploy * 1000.0).round() / 1000.0,
    });
    println!(
        "heartbeat ({} B): validate {:.0}/s, serde {:.0}/s; app.deploy ({} B): validate {:.0}/s, serde {:.0}/s",
        heartbeat.len(),
        validate_heartbeat,
        serde_heartbeat,
        deploy.len(),
        validate_deploy,
        serde_deploy
    );
    println!("{report}");
}
