//! Verified deployments: how an App's (or an organization's default) revisions are judged, and
//! the verdict on each.

use std::fmt;
use std::marker::PhantomData;

use kubenest_contracts::METRIC_NAME_PATTERN;
use schemars::JsonSchema;
use serde::de::value::MapAccessDeserializer;
use serde::de::{MapAccess, Visitor};
use serde::{Deserialize, Deserializer, Serialize};

/// The pattern of a metrics path, the resources' own: segments of letters, digits and `_~-`
/// joined by single dots (one may lead), and an optional last `/`.
pub const METRICS_PATH_PATTERN: &str = r"^(/\.?[A-Za-z0-9_~-]+(\.[A-Za-z0-9_~-]+)*)*/?$";

/// The verdict on a revision once it ran, with its numbers and what kubenest did with it.
#[derive(Debug, Serialize, Deserialize, JsonSchema)]
pub struct VerdictView {
    pub revision: String,
    /// `Passed`, `Failed` or `Inconclusive`.
    pub verdict: String,
    /// Why: the failing signal with its numbers, or what could not be observed.
    pub reason: String,
    pub window_seconds: u32,
    pub started_at: String,
    pub observed_at: String,
    pub signals: Vec<SignalView>,
    /// What was done with a `Failed` verdict (`rolling back to deployment …`, `held: …`,
    /// `automation stopped: …`); `null` otherwise or before it was acted on.
    pub action: Option<String>,
}

/// One measured signal of a verdict.
#[derive(Debug, Serialize, Deserialize, JsonSchema)]
pub struct SignalView {
    /// `restarts`, `oom_kills`, `crash_loops`, `readiness_flaps`, `requests`, `error_ratio`,
    /// `p95_latency_seconds`.
    pub name: String,
    pub value: f64,
    /// The previous revision's value.
    pub baseline: Option<f64>,
    pub threshold: Option<f64>,
    pub failed: bool,
}

/// How each revision of an App is judged once it runs, and what a failed one does.
#[derive(Debug, Clone, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct VerificationBody {
    /// Seconds each revision is watched once it runs (30 to 3600, default 180).
    #[serde(default)]
    #[schemars(range(min = 30, max = 3600))]
    pub window_seconds: Option<u32>,
    /// What a `Failed` verdict does: `rollback` to the last revision that passed (the
    /// default), `hold` (nothing is changed; the App says why) or `none`.
    #[serde(default)]
    #[schemars(with = "Option<OnFailure>")]
    pub on_failure: Option<String>,
    /// The workloads' own Prometheus endpoint, judged beside the pods' signals when given.
    #[serde(
        default,
        deserialize_with = "object_or_null",
        skip_serializing_if = "Option::is_none"
    )]
    pub metrics: Option<MetricsBody>,
}

/// Where the workloads' pods serve Prometheus metrics.
#[derive(Debug, Clone, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct MetricsBody {
    /// The pods' port (1 to 65535).
    #[schemars(range(min = 1, max = 65535))]
    pub port: u32,
    /// An absolute path of at most 256 characters (default `/metrics`): segments of letters,
    /// digits and `_~-` joined by single dots, none empty or ending with a dot, never `..`.
    #[serde(default)]
    #[schemars(length(min = 1, max = 256), regex(pattern = METRICS_PATH_PATTERN))]
    pub path: Option<String>,
    /// The request counter, labelled by status code (`code`, `status` or `status_code`): a
    /// Prometheus metric name of at most 200 characters (default `http_requests_total`).
    #[serde(default)]
    #[schemars(length(min = 1, max = 200), regex(pattern = METRIC_NAME_PATTERN))]
    pub requests_metric: Option<String>,
    /// The latency histogram's base name, whose `_bucket` series are read: a Prometheus metric
    /// name of at most 200 characters (default `http_request_duration_seconds`).
    #[serde(default)]
    #[schemars(length(min = 1, max = 200), regex(pattern = METRIC_NAME_PATTERN))]
    pub latency_metric: Option<String>,
}

/// A stored `verification`, every default filled in.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct VerificationView {
    /// Seconds each revision is watched once it runs.
    pub window_seconds: u32,
    /// What a `Failed` verdict does: `rollback`, `hold` or `none`.
    pub on_failure: OnFailure,
    /// The workloads' Prometheus endpoint, when one is judged.
    pub metrics: Option<MetricsView>,
}

/// A stored metrics endpoint.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct MetricsView {
    /// The pods' port.
    #[schemars(range(min = 1, max = 65535))]
    pub port: u16,
    /// The path scraped on it.
    pub path: String,
    /// The request counter read.
    pub requests_metric: String,
    /// The latency histogram read.
    pub latency_metric: String,
}

/// What a `Failed` verdict does.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum OnFailure {
    #[default]
    Rollback,
    Hold,
    None,
}

impl OnFailure {
    /// The policy as the API spells it.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Rollback => "rollback",
            Self::Hold => "hold",
            Self::None => "none",
        }
    }
}

/// A value read only from a JSON object: serde's derived structs also take an array of their
/// fields in order (`[9090]` for `{"port": 9090}`), which no body's schema allows.
struct Object<T>(T);

impl<'de, T: Deserialize<'de>> Deserialize<'de> for Object<T> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Fields<T>(PhantomData<T>);
        impl<'de, T: Deserialize<'de>> Visitor<'de> for Fields<T> {
            type Value = T;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("an object")
            }
            fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<T, A::Error> {
                T::deserialize(MapAccessDeserializer::new(map))
            }
        }
        deserializer
            .deserialize_map(Fields(PhantomData))
            .map(Object)
    }
}

/// Reads an object field that may be left out or `null` (`None`), never an array. Use with
/// `#[serde(default, deserialize_with)]`.
pub fn object_or_null<'de, D, T>(deserializer: D) -> Result<Option<T>, D::Error>
where
    D: Deserializer<'de>,
    T: Deserialize<'de>,
{
    Option::<Object<T>>::deserialize(deserializer).map(|given| given.map(|Object(value)| value))
}

/// Reads an object field of a change that is left out (`None`: unchanged), `null`
/// (`Some(None)`: removed) or given (`Some(Some(_))`). Use with
/// `#[serde(default, deserialize_with)]`.
pub fn given_or_null<'de, D, T>(deserializer: D) -> Result<Option<Option<T>>, D::Error>
where
    D: Deserializer<'de>,
    T: Deserialize<'de>,
{
    object_or_null(deserializer).map(Some)
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    use super::*;

    /// What serde's derived structs would take for an object, an array of its fields, is
    /// refused; `null` and an object are read.
    #[test]
    fn only_an_object_is_a_verification() {
        #[derive(Debug, Deserialize)]
        struct Change {
            #[serde(
                default,
                deserialize_with = "given_or_null",
                skip_serializing_if = "Option::is_none"
            )]
            verification: Option<Option<VerificationBody>>,
        }
        let read = |value: Value| serde_json::from_value::<Change>(value).map(|c| c.verification);
        assert!(read(json!({"verification": [null, null]})).is_err());
        assert!(read(json!({"verification": {"metrics": [9090]}})).is_err());
        assert!(matches!(read(json!({})), Ok(None)));
        assert!(matches!(
            read(json!({"verification": null})),
            Ok(Some(None))
        ));
        let given = read(json!({"verification": {"metrics": {"port": 9090}}})).unwrap();
        assert_eq!(given.unwrap().unwrap().metrics.unwrap().port, 9090);
    }
}
