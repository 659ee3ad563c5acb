//! The app's routes: `GET /` (the report, 200 when every configured backend answered, else
//! 503) and `GET /healthz`.

use std::time::Duration;

use axum::extract::{Request, State};
use axum::http::StatusCode;
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::{Json, Router};

use crate::Backends;

/// The bound on every request: a stuck backend never holds a connection for ever (the checks
/// have their own, shorter, bounds).
const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);

/// The app's router over `backends`.
pub fn router(backends: Backends) -> Router {
    Router::new()
        .route("/", get(report))
        .route("/healthz", get(healthz))
        .layer(middleware::from_fn(bounded))
        .with_state(backends)
}

async fn report(State(backends): State<Backends>) -> impl IntoResponse {
    let report = backends.report().await;
    let status = if report.ok {
        StatusCode::OK
    } else {
        StatusCode::SERVICE_UNAVAILABLE
    };
    (status, Json(report))
}

async fn healthz() -> &'static str {
    "ok"
}

async fn bounded(request: Request, next: Next) -> Response {
    match tokio::time::timeout(REQUEST_TIMEOUT, next.run(request)).await {
        Ok(response) => response,
        Err(_) => StatusCode::GATEWAY_TIMEOUT.into_response(),
    }
}
