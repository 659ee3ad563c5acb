//! The app's routes: `GET /` (the report, 200 when every configured backend answered, else
//! 503; or 500 on purpose, at `DEMO_ERROR_RATIO`), `GET /healthz` (never fails on purpose) and
//! `GET /metrics` (the requests to `/`, for Prometheus; probes of `/healthz` are not counted).

use std::sync::Arc;
use std::time::Duration;

use axum::extract::{Request, State};
use axum::http::StatusCode;
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::{Json, Router};

use crate::metrics::{self, Metrics};
use crate::{Backends, ErrorSchedule};

/// The bound on every request: a stuck backend never holds a connection for ever (the checks
/// have their own, shorter, bounds).
const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);

/// What the main page needs.
#[derive(Debug, Clone)]
struct Page {
    backends: Backends,
    errors: ErrorSchedule,
}

/// The app's router over `backends`, failing the requests to `/` that `errors` says.
pub fn router(backends: Backends, errors: ErrorSchedule) -> Router {
    let metrics = Arc::new(Metrics::default());
    // Only the main page is counted: probes of `/healthz` would make an idle app look busy
    // (and dilute its error ratio) to whoever judges it by these numbers.
    let pages = Router::new()
        .route("/", get(report))
        .with_state(Page { backends, errors })
        .route_layer(middleware::from_fn(bounded))
        // Outside the bound, so that a request that timed out is counted with its 504.
        .route_layer(middleware::from_fn_with_state(
            metrics.clone(),
            metrics::count,
        ));
    Router::new()
        .route("/metrics", get(metrics::page))
        .with_state(metrics)
        .route("/healthz", get(healthz))
        .merge(pages)
}

/// `GET /`: the report of the backends, unless this request is one to fail on purpose.
async fn report(State(page): State<Page>) -> Response {
    let (n, fails) = page.errors.next();
    if fails {
        let body = format!("request {n} failed on purpose (DEMO_ERROR_RATIO)\n");
        return (StatusCode::INTERNAL_SERVER_ERROR, body).into_response();
    }
    let report = page.backends.report().await;
    let status = if report.ok {
        StatusCode::OK
    } else {
        StatusCode::SERVICE_UNAVAILABLE
    };
    (status, Json(report)).into_response()
}

/// `GET /healthz`: answers while the process serves.
async fn healthz() -> &'static str {
    "ok"
}

/// Answers `504` to a request not answered within [`REQUEST_TIMEOUT`].
async fn bounded(request: Request, next: Next) -> Response {
    match tokio::time::timeout(REQUEST_TIMEOUT, next.run(request)).await {
        Ok(response) => response,
        Err(_) => StatusCode::GATEWAY_TIMEOUT.into_response(),
    }
}
