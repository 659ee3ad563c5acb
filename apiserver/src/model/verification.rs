//! Verified deployments as the API spells them: an App's `verification` (how each of its
//! revisions is judged once it runs, and what a failed one does) and an organization's, the
//! default of its Apps that set none. Every value is checked at the door, naming its field, by
//! the bounds and the pattern of the resources' schema, which refuses the same values to
//! kubectl and GitOps writers.
//!
//! The metrics path becomes part of the URL through which the agent reaches the pods (the
//! Kubernetes API's pod proxy): it never holds `..`, nor a segment that is empty or ends with a
//! dot, so it cannot climb out of the pod's proxy path to other parts of the cluster's API.
//! The series read there are the App's to name (`requests_metric`, `latency_metric`), each a
//! Prometheus metric name.

pub use kubenest_api::verification::{
    MetricsBody, MetricsView, VerificationBody, VerificationView,
};

use serde_json::Value;

use kubenest_contracts::{
    DEFAULT_LATENCY_METRIC, DEFAULT_REQUESTS_METRIC, MAX_METRIC_NAME, METRIC_NAME_PATTERN, patterns,
};
use kubenest_crds::verification::{MetricsSpec, OnFailure, VerificationSpec};

use crate::error::ApiError;

/// The shortest and longest window, in seconds.
const WINDOW_SECONDS: std::ops::RangeInclusive<u32> = 30..=3600;

/// The window when a body gives none.
const DEFAULT_WINDOW_SECONDS: u32 = 180;

/// The metrics path when a body gives none.
const DEFAULT_METRICS_PATH: &str = "/metrics";

/// The longest metrics path.
const MAX_METRICS_PATH: usize = 256;

/// A stored `verification` as the API answers it, every default filled in.
pub fn verification_view(spec: &VerificationSpec) -> VerificationView {
    let or = |name: &Option<String>, default: &str| name.as_deref().unwrap_or(default).into();
    VerificationView {
        window_seconds: spec.window_seconds,
        on_failure: spec.on_failure,
        metrics: spec.metrics.as_ref().map(|m| MetricsView {
            port: m.port,
            path: m.path.clone(),
            requests_metric: or(&m.requests_metric, DEFAULT_REQUESTS_METRIC),
            latency_metric: or(&m.latency_metric, DEFAULT_LATENCY_METRIC),
        }),
    }
}

/// The `verification` of a body (the field `at`) as the resources store it, defaults filled
/// in, or a 422 naming the field at fault (`verification.metrics.path`).
pub fn check(at: &str, body: &VerificationBody) -> Result<VerificationSpec, ApiError> {
    let invalid = |field: &str, reason: String| ApiError::invalid(format!("{at}.{field}"), reason);
    let window_seconds = body.window_seconds.unwrap_or(DEFAULT_WINDOW_SECONDS);
    if let Some(reason) = window_refusal(window_seconds) {
        return Err(invalid("window_seconds", reason));
    }
    let on_failure = match body.on_failure.as_deref() {
        None => OnFailure::default(),
        Some(given) => [OnFailure::Rollback, OnFailure::Hold, OnFailure::None]
            .into_iter()
            .find(|known| known.as_str() == given)
            .ok_or_else(|| {
                invalid(
                    "on_failure",
                    format!("{given:?} is none of rollback, hold or none"),
                )
            })?,
    };
    let metrics = match &body.metrics {
        None => None,
        Some(metrics) => {
            let port = u16::try_from(metrics.port)
                .ok()
                .filter(|port| *port != 0)
                .ok_or_else(|| invalid("metrics.port", port_rule(metrics.port)))?;
            let path = metrics
                .path
                .clone()
                .unwrap_or_else(|| DEFAULT_METRICS_PATH.to_owned());
            if let Some(reason) = path_refusal(&path) {
                return Err(invalid("metrics.path", reason));
            }
            // Kept as given: a name left out stays out, so the App's revision does not move.
            for (field, name) in [
                ("metrics.requests_metric", &metrics.requests_metric),
                ("metrics.latency_metric", &metrics.latency_metric),
            ] {
                if let Some(reason) = name.as_deref().and_then(metric_name_refusal) {
                    return Err(invalid(field, reason));
                }
            }
            Some(MetricsSpec {
                port,
                path,
                requests_metric: metrics.requests_metric.clone(),
                latency_metric: metrics.latency_metric.clone(),
            })
        }
    };
    Ok(VerificationSpec {
        window_seconds,
        on_failure,
        metrics,
    })
}

/// `verification` in a JSON merge patch: the whole value, with a `null` for the metrics (and
/// the metric names) it does not have, so none of the stored one's is kept; `null` removes it.
pub fn merge_patch(spec: Option<&VerificationSpec>) -> Result<Value, ApiError> {
    let Some(spec) = spec else {
        return Ok(Value::Null);
    };
    let mut value = serde_json::to_value(spec).map_err(ApiError::internal)?;
    if let Value::Object(map) = &mut value {
        let metrics = map.entry("metrics").or_insert(Value::Null);
        if let Value::Object(metrics) = metrics {
            for name in ["requestsMetric", "latencyMetric"] {
                metrics.entry(name).or_insert(Value::Null);
            }
        }
    }
    Ok(value)
}

fn window_refusal(seconds: u32) -> Option<String> {
    (!WINDOW_SECONDS.contains(&seconds)).then(|| {
        format!(
            "between {} and {} seconds",
            WINDOW_SECONDS.start(),
            WINDOW_SECONDS.end()
        )
    })
}

fn port_rule(port: u32) -> String {
    format!("a port is 1 to 65535, not {port}")
}

/// Why `name` is no Prometheus metric name, in words; `None` when it is one.
fn metric_name_refusal(name: &str) -> Option<String> {
    if name.is_empty() || name.len() > MAX_METRIC_NAME {
        Some(format!("1 to {MAX_METRIC_NAME} characters"))
    } else if !patterns::matches(METRIC_NAME_PATTERN, name) {
        Some("a Prometheus metric name: letters, digits, _ and :, not starting with a digit".into())
    } else {
        None
    }
}

fn path_refusal(path: &str) -> Option<String> {
    if path.len() > MAX_METRICS_PATH {
        return Some(format!("at most {MAX_METRICS_PATH} characters"));
    }
    if !path.starts_with('/') {
        return Some("an absolute path, starting with /".into());
    }
    if let Some(bad) = path
        .chars()
        .find(|c| !c.is_ascii_alphanumeric() && !"._~/-".contains(*c))
    {
        return Some(format!(
            "letters, digits and ._~/- only, not {bad:?} (the path is part of a URL)"
        ));
    }
    if path.contains("..") {
        return Some("no .. (the path may not climb out of the pod's proxy path)".into());
    }
    let inner = path.strip_suffix('/').unwrap_or(path);
    if inner
        .split('/')
        .skip(1)
        .any(|s| s.is_empty() || s.ends_with('.'))
    {
        return Some(
            "segments of letters, digits and _~- joined by single dots: none is empty or ends \
             with a dot"
                .into(),
        );
    }
    None
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use kubenest_api::verification::METRICS_PATH_PATTERN;

    fn body(value: Value) -> VerificationBody {
        serde_json::from_value(value).unwrap()
    }

    #[test]
    fn defaults_are_filled_in() {
        let spec = check("verification", &body(json!({"metrics": {"port": 9090}}))).unwrap();
        assert_eq!(spec.window_seconds, 180);
        assert_eq!(spec.on_failure, OnFailure::Rollback);
        let metrics = spec.metrics.as_ref().unwrap();
        assert_eq!(metrics.path, "/metrics");
        // The metric names are shown filled in, and stored only when given.
        assert_eq!(metrics.requests_metric, None);
        let shown = verification_view(&spec).metrics.unwrap();
        assert_eq!(shown.requests_metric, "http_requests_total");
        assert_eq!(shown.latency_metric, "http_request_duration_seconds");
    }

    #[test]
    fn metric_names_given_are_kept_in_the_resources_spelling() {
        let given = json!({"metrics": {"port": 9090, "requests_metric": "shop:requests_total",
                                       "latency_metric": "shop_latency_seconds"}});
        let spec = check("verification", &body(given)).unwrap();
        let stored = serde_json::to_value(&spec).unwrap();
        assert_eq!(
            stored["metrics"],
            json!({"port": 9090, "path": "/metrics", "requestsMetric": "shop:requests_total",
                   "latencyMetric": "shop_latency_seconds"})
        );
        let shown = verification_view(&spec).metrics.unwrap();
        assert_eq!(shown.requests_metric, "shop:requests_total");
    }

    #[test]
    fn each_bad_value_names_its_field() {
        let cases = [
            (json!({"window_seconds": 29}), "verification.window_seconds"),
            (
                json!({"window_seconds": 3601}),
                "verification.window_seconds",
            ),
            (json!({"on_failure": "Rollback"}), "verification.on_failure"),
            (json!({"metrics": {"port": 0}}), "verification.metrics.port"),
            (
                json!({"metrics": {"port": 65536}}),
                "verification.metrics.port",
            ),
            (
                json!({"metrics": {"port": 1, "path": "metrics"}}),
                "verification.metrics.path",
            ),
            (
                json!({"metrics": {"port": 1, "path": "/a?b"}}),
                "verification.metrics.path",
            ),
            (
                json!({"metrics": {"port": 1, "path": "/a/../b"}}),
                "verification.metrics.path",
            ),
            (
                json!({"metrics": {"port": 1, "path": format!("/{}", "a".repeat(256))}}),
                "verification.metrics.path",
            ),
            (
                json!({"metrics": {"port": 1, "requests_metric": "http-requests"}}),
                "verification.metrics.requests_metric",
            ),
            (
                json!({"metrics": {"port": 1, "requests_metric": ""}}),
                "verification.metrics.requests_metric",
            ),
            (
                json!({"metrics": {"port": 1, "latency_metric": "2xx_seconds"}}),
                "verification.metrics.latency_metric",
            ),
            (
                json!({"metrics": {"port": 1, "latency_metric": "a".repeat(201)}}),
                "verification.metrics.latency_metric",
            ),
        ];
        for (value, field) in cases {
            let error = check("verification", &body(value.clone())).unwrap_err();
            assert_eq!(error.field.as_deref(), Some(field), "{value}");
            assert_eq!(error.status, 422);
        }
    }

    /// The pattern the OpenAPI document gives is the resources' own and the rule the API
    /// applies.
    #[test]
    fn the_documented_pattern_is_the_rule() {
        let resource = schemars::schema_for!(MetricsSpec).to_value();
        assert_eq!(
            resource["properties"]["path"]["pattern"],
            METRICS_PATH_PATTERN
        );
        let schema = json!({"type": "string", "minLength": 1, "maxLength": 256,
                            "pattern": METRICS_PATH_PATTERN});
        let validator = jsonschema::validator_for(&schema).unwrap();
        for path in [
            "/",
            "/metrics",
            "/metrics/",
            "/a.b/c",
            "/.well-known/x",
            "/x.",
            "/./x",
            "/..",
            "/a/../b",
            "/a..b",
            "/...",
            "metrics",
            "/a b",
            "/ä",
            "/x/.",
            "//x",
            "/x//",
            "//",
            "",
            &format!("/{}", "a".repeat(256)),
        ] {
            assert_eq!(
                validator.is_valid(&json!(path)),
                path_refusal(path).is_none(),
                "{path}"
            );
        }
    }

    /// A metric name is refused by the pattern and the length the resources' schema gives.
    #[test]
    fn the_documented_metric_name_rule_is_the_resources() {
        let resource = schemars::schema_for!(MetricsSpec).to_value();
        for field in ["requestsMetric", "latencyMetric"] {
            let schema = &resource["properties"][field];
            assert_eq!(schema["pattern"], METRIC_NAME_PATTERN, "{field}");
            assert_eq!(schema["maxLength"], MAX_METRIC_NAME, "{field}");
        }
        for good in ["http_requests_total", "_x", ":job:rate5m", "A9"] {
            assert_eq!(metric_name_refusal(good), None, "{good}");
        }
        for bad in ["9x", "http-requests", "a b", "a{code}", "ä", ""] {
            assert!(metric_name_refusal(bad).is_some(), "{bad}");
        }
    }

    #[test]
    fn a_merge_patch_drops_stored_metrics_it_does_not_have() {
        let spec = check("verification", &body(json!({"on_failure": "hold"}))).unwrap();
        assert_eq!(
            merge_patch(Some(&spec)).unwrap(),
            json!({"windowSeconds": 180, "onFailure": "hold", "metrics": null})
        );
        assert_eq!(merge_patch(None).unwrap(), Value::Null);
        // Nor a stored metric name the new metrics leave out.
        let spec = check("verification", &body(json!({"metrics": {"port": 9090}}))).unwrap();
        assert_eq!(
            merge_patch(Some(&spec)).unwrap()["metrics"],
            json!({"port": 9090, "path": "/metrics", "requestsMetric": null,
                   "latencyMetric": null})
        );
    }
}
