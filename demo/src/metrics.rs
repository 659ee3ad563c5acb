//! The app's Prometheus metrics, under the names a platform expects of any web app:
//! `http_requests_total{code, method}` and `http_request_duration_seconds{method}`, of every
//! request to the app's pages (`/metrics` itself is not counted).
//!
//! Each router has its own registry: two apps in one process (the tests) count apart.

use std::sync::Arc;
use std::time::Instant;

use axum::extract::{Request, State};
use axum::http::{Method, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;

/// The content type of the text prometheus-client's encoder writes.
const OPENMETRICS: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// The bounds of the duration buckets, in seconds: Prometheus's client defaults.
const BUCKETS: [f64; 11] = [
    0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0,
];

/// The labels of a request's count.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct RequestLabels {
    /// The answer's status code.
    code: u16,
    /// The request's method.
    method: &'static str,
}

/// The label of a request's duration.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct MethodLabel {
    /// The request's method.
    method: &'static str,
}

/// The app's metrics and the registry that encodes them.
#[derive(Debug)]
pub struct Metrics {
    registry: Registry,
    requests: Family<RequestLabels, Counter>,
    durations: Family<MethodLabel, Histogram, fn() -> Histogram>,
}

fn duration_histogram() -> Histogram {
    Histogram::new(BUCKETS)
}

impl Default for Metrics {
    fn default() -> Self {
        let requests = Family::<RequestLabels, Counter>::default();
        let durations: Family<MethodLabel, Histogram, fn() -> Histogram> =
            Family::new_with_constructor(duration_histogram);
        let mut registry = Registry::default();
        // The encoder appends `_total` to a counter's name.
        registry.register(
            "http_requests",
            "Requests answered by the app's pages, by status code and method",
            requests.clone(),
        );
        registry.register(
            "http_request_duration_seconds",
            "Time the app's pages took to answer, by method",
            durations.clone(),
        );
        Self {
            registry,
            requests,
            durations,
        }
    }
}

impl Metrics {
    /// Counts a request answered with `code` after `seconds`.
    fn record(&self, method: &'static str, code: StatusCode, seconds: f64) {
        let code = code.as_u16();
        self.requests
            .get_or_create(&RequestLabels { code, method })
            .inc();
        self.durations
            .get_or_create(&MethodLabel { method })
            .observe(seconds);
    }

    /// The metrics in the OpenMetrics text format.
    fn encode(&self) -> Result<String, std::fmt::Error> {
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, &self.registry)?;
        Ok(text)
    }
}

/// The middleware that counts and times each request to the pages it wraps.
pub async fn count(State(metrics): State<Arc<Metrics>>, request: Request, next: Next) -> Response {
    let method = method_label(request.method());
    let started = Instant::now();
    let response = next.run(request).await;
    metrics.record(method, response.status(), started.elapsed().as_secs_f64());
    response
}

/// `GET /metrics`.
pub async fn page(State(metrics): State<Arc<Metrics>>) -> Response {
    match metrics.encode() {
        Ok(text) => ([(header::CONTENT_TYPE, OPENMETRICS)], text).into_response(),
        Err(error) => {
            tracing::warn!(%error, "metrics could not be encoded");
            StatusCode::INTERNAL_SERVER_ERROR.into_response()
        }
    }
}

/// The method as a label value; any method beyond the standard ones is `other`, so that
/// clients cannot grow the label set without bound.
fn method_label(method: &Method) -> &'static str {
    match *method {
        Method::GET => "GET",
        Method::HEAD => "HEAD",
        Method::POST => "POST",
        Method::PUT => "PUT",
        Method::DELETE => "DELETE",
        Method::PATCH => "PATCH",
        Method::OPTIONS => "OPTIONS",
        Method::CONNECT => "CONNECT",
        Method::TRACE => "TRACE",
        _ => "other",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_encoder_writes_the_standard_names_and_labels() {
        let metrics = Metrics::default();
        metrics.record("GET", StatusCode::OK, 0.003);
        metrics.record("GET", StatusCode::INTERNAL_SERVER_ERROR, 0.2);
        let text = metrics.encode().expect("encode");
        assert!(
            text.contains("http_requests_total{code=\"200\",method=\"GET\"} 1\n"),
            "{text}"
        );
        assert!(
            text.contains("http_requests_total{code=\"500\",method=\"GET\"} 1\n"),
            "{text}"
        );
        assert!(
            text.contains("http_request_duration_seconds_count{method=\"GET\"} 2\n"),
            "{text}"
        );
        assert!(
            text.contains("http_request_duration_seconds_bucket{le=\"0.005\",method=\"GET\"} 1\n"),
            "{text}"
        );
    }

    #[test]
    fn unknown_methods_share_one_label() {
        let odd = Method::from_bytes(b"BREW").expect("a method");
        assert_eq!(method_label(&odd), "other");
        assert_eq!(method_label(&Method::GET), "GET");
    }
}
