//! Judge (pure): the verdict on a revision from what its window showed, each signal against a
//! threshold relative to the baseline: the window of the last revision that passed ("the
//! previous revision" below).
//!
//! - Pod signals decide at once: an OOM kill or a crash loop of the revision's pods fails it (the
//!   previous revision's count is the threshold), and so do restarts or readiness flaps beyond
//!   twice the previous revision's (at least one of each is tolerated; a restart is a flap too,
//!   so as many flaps as restarts always are).
//! - The App's metrics, when it declares them, decide at the window's end, or earlier once
//!   [`EARLY_REQUESTS`] requests show an error ratio past its threshold: the 5xx ratio may not
//!   exceed twice the baseline's (and at least the baseline + 0.05; 0.05 without one), the p95
//!   latency twice the baseline's (and at least the baseline + 0.25 s; unjudged without one).
//! - No requests in the window is `Inconclusive` ("no requests observed"): silence is never a
//!   success.

use kubenest_contracts as wire;
use serde::{Deserialize, Serialize};

use super::metrics::Window;
use super::signals::PodSignals;

/// The requests after which a bad error ratio fails the revision before the window ends.
pub const EARLY_REQUESTS: f64 = 50.0;

/// What one revision's window measured: the baseline of the next.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct Measured {
    pub restarts: u32,
    pub oom_kills: u32,
    /// Read as 0 from a baseline kept before flaps were counted.
    #[serde(default)]
    pub readiness_flaps: u32,
    pub error_ratio: Option<f64>,
    pub p95_seconds: Option<f64>,
}

/// What is known of a window so far.
#[derive(Debug, Clone, Copy)]
pub struct Seen {
    /// The revision's pod signals over the window (restarts counted from its start).
    pub pods: PodSignals,
    /// The App's metrics over the window, when it declares them (`None` when it does not).
    pub metrics: Option<Result<Window, ()>>,
    /// The window is over.
    pub ended: bool,
}

/// A verdict, with its reason and numbers.
#[derive(Debug, Clone, PartialEq)]
pub struct Judgement {
    pub verdict: wire::Verdict,
    pub reason: String,
    pub signals: Vec<wire::Signal>,
    pub measured: Measured,
}

fn signal(name: &str, value: f64, baseline: Option<f64>, threshold: Option<f64>) -> wire::Signal {
    wire::Signal {
        name: name.into(),
        value,
        baseline,
        threshold,
        failed: threshold.is_some_and(|t| value > t),
    }
}

/// The verdict on what `seen` shows against `baseline` (the last passing revision's window), or
/// `None` while the window runs and nothing has decided it.
pub fn judge(seen: &Seen, baseline: Option<&Measured>, window_seconds: u32) -> Option<Judgement> {
    let pods = seen.pods;
    let base = baseline.copied().unwrap_or_default();
    let restarts_threshold = f64::from(base.restarts.saturating_mul(2).max(1));
    // Flaps are judged as restarts are: twice the previous revision's, at least one tolerated.
    // A single flap may be one probe missed in a burst of load, no sign of a worse revision;
    // more than twice what the previous one showed is. A restart withdraws its pod's readiness
    // too, so each restart is also a flap: the threshold is never below the restarts' (from a
    // baseline measured before flaps were counted, too), or a restart the restarts' threshold
    // lets pass would fail the revision as a flap.
    let flaps = base.readiness_flaps.saturating_mul(2).max(1);
    let flaps_threshold = f64::from(flaps).max(restarts_threshold);
    let mut signals = vec![
        signal(
            "restarts",
            f64::from(pods.restarts),
            baseline.map(|b| f64::from(b.restarts)),
            Some(restarts_threshold),
        ),
        signal(
            "oom_kills",
            f64::from(pods.oom_kills),
            baseline.map(|b| f64::from(b.oom_kills)),
            Some(f64::from(base.oom_kills)),
        ),
        signal("crash_loops", f64::from(pods.crash_loops), None, Some(0.0)),
        signal(
            "readiness_flaps",
            f64::from(pods.readiness_flaps),
            baseline.map(|b| f64::from(b.readiness_flaps)),
            Some(flaps_threshold),
        ),
    ];
    let mut measured = Measured {
        restarts: pods.restarts,
        oom_kills: pods.oom_kills,
        readiness_flaps: pods.readiness_flaps,
        error_ratio: None,
        p95_seconds: None,
    };
    let mut failing: Vec<String> = signals
        .iter()
        .filter(|s| s.failed)
        .map(|s| describe(s, window_seconds))
        .collect();
    let mut inconclusive = None;
    match seen.metrics {
        None => {}
        Some(Err(())) => {
            inconclusive = Some("the metrics endpoint did not answer".to_owned());
        }
        Some(Ok(window)) => {
            signals.push(signal("requests", window.requests, None, None));
            match window.error_ratio() {
                None => inconclusive = Some("no requests observed".to_owned()),
                Some(ratio) => {
                    measured.error_ratio = Some(ratio);
                    let threshold = base.error_ratio.map_or(0.05, |b| (2.0 * b).max(b + 0.05));
                    let judged = signal("error_ratio", ratio, base.error_ratio, Some(threshold));
                    let decides = seen.ended || window.requests >= EARLY_REQUESTS;
                    if judged.failed && decides {
                        failing.push(describe(&judged, window_seconds));
                    }
                    signals.push(judged);
                }
            }
            if let Some(p95) = window.p95_seconds {
                measured.p95_seconds = Some(p95);
                let threshold = base.p95_seconds.map(|b| (2.0 * b).max(b + 0.25));
                let judged = signal("p95_latency_seconds", p95, base.p95_seconds, threshold);
                if judged.failed && seen.ended {
                    failing.push(describe(&judged, window_seconds));
                }
                signals.push(judged);
            }
        }
    }
    let (verdict, reason) = if !failing.is_empty() {
        (wire::Verdict::Failed, failing.join("; "))
    } else if !seen.ended {
        return None;
    } else if let Some(why) = inconclusive {
        (wire::Verdict::Inconclusive, why)
    } else {
        (
            wire::Verdict::Passed,
            format!("no signal crossed its threshold in {window_seconds}s"),
        )
    };
    Some(Judgement {
        verdict,
        reason,
        signals,
        measured,
    })
}

/// A failing signal in words, with its numbers.
fn describe(signal: &wire::Signal, window_seconds: u32) -> String {
    let baseline = signal
        .baseline
        .map(|b| format!(", previous revision {}", round(b)))
        .unwrap_or_default();
    let threshold = signal.threshold.map(round).unwrap_or_default();
    format!(
        "{} {} above its threshold {threshold}{baseline} (window {window_seconds}s)",
        signal.name,
        round(signal.value)
    )
}

/// A number as people read it: at most three decimals.
fn round(n: f64) -> String {
    let text = format!("{n:.3}");
    text.trim_end_matches('0').trim_end_matches('.').to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn seen(pods: PodSignals, metrics: Option<Result<Window, ()>>, ended: bool) -> Seen {
        Seen {
            pods,
            metrics,
            ended,
        }
    }

    fn traffic(requests: f64, errors: f64) -> Option<Result<Window, ()>> {
        Some(Ok(Window {
            requests,
            errors,
            p95_seconds: Some(0.05),
        }))
    }

    #[test]
    fn an_oom_kill_or_a_crash_loop_fails_at_once() {
        let oom = PodSignals {
            pods: 2,
            oom_kills: 1,
            ..PodSignals::default()
        };
        let judged = judge(&seen(oom, None, false), None, 180).unwrap();
        assert_eq!(judged.verdict, wire::Verdict::Failed);
        assert!(
            judged
                .reason
                .starts_with("oom_kills 1 above its threshold 0"),
            "{}",
            judged.reason
        );
        let looping = PodSignals {
            pods: 1,
            crash_loops: 1,
            restarts: 1,
            ..PodSignals::default()
        };
        let judged = judge(&seen(looping, None, false), None, 180).unwrap();
        assert!(judged.reason.contains("crash_loops 1"), "{}", judged.reason);
    }

    #[test]
    fn restarts_are_judged_against_the_previous_revision() {
        let restarting = PodSignals {
            pods: 2,
            restarts: 2,
            ..PodSignals::default()
        };
        let judged = judge(&seen(restarting, None, false), None, 180).unwrap();
        assert_eq!(judged.verdict, wire::Verdict::Failed);
        let noisy = Measured {
            restarts: 3,
            ..Measured::default()
        };
        assert_eq!(
            judge(&seen(restarting, None, false), Some(&noisy), 180),
            None,
            "no worse than before: the window runs on"
        );
    }

    #[test]
    fn readiness_flaps_are_judged_against_the_previous_revision() {
        let flapping = |flaps| PodSignals {
            pods: 2,
            readiness_flaps: flaps,
            ..PodSignals::default()
        };
        // One flap is tolerated; it is measured for the next revision and shown.
        let judged = judge(&seen(flapping(1), None, true), None, 60).unwrap();
        assert_eq!(judged.verdict, wire::Verdict::Passed);
        assert_eq!(judged.measured.readiness_flaps, 1);
        let shown = judged
            .signals
            .iter()
            .find(|s| s.name == "readiness_flaps")
            .unwrap();
        assert_eq!((shown.value, shown.threshold), (1.0, Some(1.0)));
        // Two fail at once, with the numbers.
        let judged = judge(&seen(flapping(2), None, false), None, 60).unwrap();
        assert_eq!(judged.verdict, wire::Verdict::Failed);
        assert_eq!(
            judged.reason,
            "readiness_flaps 2 above its threshold 1 (window 60s)"
        );
        // Against a previous revision that flapped as much, the window runs on; past twice
        // its count, it fails.
        let flappy = Measured {
            readiness_flaps: 2,
            ..Measured::default()
        };
        assert_eq!(
            judge(&seen(flapping(4), None, false), Some(&flappy), 60),
            None
        );
        let judged = judge(&seen(flapping(5), None, false), Some(&flappy), 60).unwrap();
        assert!(
            judged.reason.contains("threshold 4, previous revision 2"),
            "{}",
            judged.reason
        );
        // A baseline kept before flaps were counted reads as none, and its restarts still
        // excuse as many flaps as they are allowed.
        let old: Measured = serde_json::from_value(serde_json::json!(
            {"restarts": 2, "oom_kills": 0, "error_ratio": null, "p95_seconds": null}
        ))
        .unwrap();
        assert_eq!(old.readiness_flaps, 0);
        let restarting = PodSignals {
            restarts: 4,
            ..flapping(4)
        };
        assert_eq!(judge(&seen(restarting, None, false), Some(&old), 60), None);
    }

    #[test]
    fn errors_fail_against_the_baseline_with_the_numbers() {
        let healthy = PodSignals {
            pods: 2,
            ..PodSignals::default()
        };
        let judged = judge(&seen(healthy, traffic(100.0, 30.0), false), None, 180).unwrap();
        assert_eq!(judged.verdict, wire::Verdict::Failed);
        assert_eq!(
            judged.reason,
            "error_ratio 0.3 above its threshold 0.05 (window 180s)"
        );
        let ratio = judged
            .signals
            .iter()
            .find(|s| s.name == "error_ratio")
            .unwrap();
        assert_eq!((ratio.value, ratio.threshold), (0.3, Some(0.05)));
        // A few requests decide nothing before the window ends.
        assert_eq!(
            judge(&seen(healthy, traffic(10.0, 3.0), false), None, 180),
            None
        );
        // Against a baseline that erred as much, it passes at the end.
        let erring = Measured {
            error_ratio: Some(0.25),
            ..Measured::default()
        };
        let judged = judge(
            &seen(healthy, traffic(100.0, 30.0), true),
            Some(&erring),
            180,
        );
        assert_eq!(judged.unwrap().verdict, wire::Verdict::Passed);
    }

    #[test]
    fn silence_is_inconclusive_never_a_pass() {
        let healthy = PodSignals {
            pods: 1,
            ..PodSignals::default()
        };
        let idle = Some(Ok(Window {
            requests: 0.0,
            errors: 0.0,
            p95_seconds: None,
        }));
        assert_eq!(judge(&seen(healthy, idle, false), None, 60), None);
        let judged = judge(&seen(healthy, idle, true), None, 60).unwrap();
        assert_eq!(
            (judged.verdict, judged.reason.as_str()),
            (wire::Verdict::Inconclusive, "no requests observed")
        );
        let unanswered = judge(&seen(healthy, Some(Err(())), true), None, 60).unwrap();
        assert_eq!(unanswered.verdict, wire::Verdict::Inconclusive);
        // Pods alone, when no metrics are declared: a quiet window passes.
        let judged = judge(&seen(healthy, None, true), None, 60).unwrap();
        assert_eq!(judged.verdict, wire::Verdict::Passed);
    }
}
