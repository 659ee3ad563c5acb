//! Metrics of an axum server's requests, by route template (axum's [`MatchedPath`], e.g.
//! `/api/v1/apps/{id}`, never the path itself: ids would make the label unbounded), method and
//! status.
//!
//! [`HttpMetrics::instrument`] adds the layer as a *route* layer: only matched routes have a
//! template, so requests that match no route (a fallback answering 404 or the console's assets)
//! are not counted.

use std::time::Instant;

use axum::Router;
use axum::extract::{MatchedPath, Request, State};
use axum::http::Method;
use axum::middleware::Next;
use axum::response::Response;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

/// The labels of a request.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct RequestLabels {
    pub method: &'static str,
    /// The route template.
    pub route: String,
    pub status: u16,
}

/// The labels of a request's duration.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct RouteLabels {
    pub method: &'static str,
    pub route: String,
}

fn histogram() -> Histogram {
    // 1 ms … ~16 s.
    Histogram::new(exponential_buckets(0.001, 2.0, 15))
}

/// Requests and their durations; cheap to clone.
#[derive(Debug, Clone)]
pub struct HttpMetrics {
    requests: Family<RequestLabels, Counter>,
    duration: Family<RouteLabels, Histogram, fn() -> Histogram>,
}

impl Default for HttpMetrics {
    fn default() -> Self {
        Self {
            requests: Family::default(),
            duration: Family::new_with_constructor(histogram),
        }
    }
}

impl HttpMetrics {
    /// Registers `http_requests` (counter) and `http_request_duration_seconds` (histogram, until
    /// the response head: a stream's body may last for hours).
    pub fn register(&self, registry: &mut Registry) {
        registry.register(
            "http_requests",
            "HTTP requests answered, by method, route template and status",
            self.requests.clone(),
        );
        registry.register(
            "http_request_duration_seconds",
            "Time until the response head, by method and route template",
            self.duration.clone(),
        );
    }

    /// `router` with every route counted.
    pub fn instrument<S: Clone + Send + Sync + 'static>(&self, router: Router<S>) -> Router<S> {
        router.route_layer(axum::middleware::from_fn_with_state(self.clone(), track))
    }

    /// Requests answered so far with `status` on `method route` (for tests).
    pub fn count(&self, method: &'static str, route: &str, status: u16) -> u64 {
        self.requests
            .get_or_create(&RequestLabels {
                method,
                route: route.to_owned(),
                status,
            })
            .get()
    }
}

/// The method as a constant: a client could send any token as a method.
fn method_label(method: &Method) -> &'static str {
    match *method {
        Method::GET => "GET",
        Method::POST => "POST",
        Method::PUT => "PUT",
        Method::PATCH => "PATCH",
        Method::DELETE => "DELETE",
        Method::HEAD => "HEAD",
        Method::OPTIONS => "OPTIONS",
        _ => "other",
    }
}

async fn track(State(metrics): State<HttpMetrics>, request: Request, next: Next) -> Response {
    let started = Instant::now();
    let method = method_label(request.method());
    let route = request
        .extensions()
        .get::<MatchedPath>()
        .map_or_else(|| "unmatched".to_owned(), |p| p.as_str().to_owned());
    let response = next.run(request).await;
    let status = response.status().as_u16();
    metrics
        .duration
        .get_or_create(&RouteLabels {
            method,
            route: route.clone(),
        })
        .observe(started.elapsed().as_secs_f64());
    metrics
        .requests
        .get_or_create(&RequestLabels {
            method,
            route,
            status,
        })
        .inc();
    response
}

#[cfg(test)]
mod tests {
    use axum::http::StatusCode;
    use axum::routing::post;
    use tower::ServiceExt as _;

    use super::*;

    #[tokio::test]
    async fn requests_are_counted_by_route_template_and_status() {
        let metrics = HttpMetrics::default();
        let router = metrics.instrument(Router::new().route(
            "/apps/{id}",
            post(|| async { (StatusCode::CREATED, "made") }),
        ));
        for id in ["a", "b"] {
            let request = axum::http::Request::post(format!("/apps/{id}"))
                .body(axum::body::Body::empty())
                .unwrap();
            router.clone().oneshot(request).await.unwrap();
        }
        assert_eq!(metrics.count("POST", "/apps/{id}", 201), 2);
        let mut registry = Registry::default();
        metrics.register(&mut registry);
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, &registry).unwrap();
        assert!(
            text.contains(
                r#"http_requests_total{method="POST",route="/apps/{id}",status="201"} 2"#
            ),
            "{text}"
        );
    }
}
