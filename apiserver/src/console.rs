//! The web console's built assets (`console/dist`), served at `/` from the API's own origin so
//! the refresh cookie stays `HttpOnly; Secure; SameSite=Strict` and the console needs no server
//! of its own. Paths the console's router owns (`/apps/…`) get `index.html`; `/api/…` paths
//! that no route took keep the API's JSON 404. These are not API routes, so the OpenAPI
//! document does not list them.

use std::path::Path;

use axum::Router;
use axum::http::{HeaderName, HeaderValue, header};
use axum::response::IntoResponse;
use tower_http::services::{ServeDir, ServeFile};
use tower_http::set_header::SetResponseHeaderLayer;

use crate::error::ApiError;

/// Only the console's own files run and load; it talks to its own origin alone and is never
/// framed. Vite emits no inline script, so none is allowed.
pub const CONTENT_SECURITY_POLICY: &str = "default-src 'self'; script-src 'self'; \
     style-src 'self'; img-src 'self' data:; connect-src 'self'; object-src 'none'; \
     base-uri 'self'; form-action 'self'; frame-ancestors 'none'";

/// Built assets carry a content hash in their names, so a browser may keep them for good;
/// `index.html` names the current ones and is revalidated every time.
const IMMUTABLE: &str = "public, max-age=31536000, immutable";
const REVALIDATE: &str = "no-cache";

async fn api_not_found() -> axum::response::Response {
    ApiError::not_found("route").into_response()
}

fn header_layer(name: HeaderName, value: &'static str) -> SetResponseHeaderLayer<HeaderValue> {
    SetResponseHeaderLayer::overriding(name, HeaderValue::from_static(value))
}

/// What answers every request no API route took: the console from `dir`.
pub fn router(dir: &Path) -> Router {
    let index = dir.join("index.html");
    let assets = Router::new()
        .fallback_service(ServeDir::new(dir.join("assets")))
        .layer(header_layer(header::CACHE_CONTROL, IMMUTABLE));
    let pages = Router::new()
        .fallback_service(ServeDir::new(dir).fallback(ServeFile::new(index)))
        .layer(header_layer(header::CACHE_CONTROL, REVALIDATE));
    Router::new()
        .route("/api", axum::routing::any(api_not_found))
        .route("/api/{*rest}", axum::routing::any(api_not_found))
        .nest("/assets", assets)
        .merge(pages)
        .layer(header_layer(
            header::CONTENT_SECURITY_POLICY,
            CONTENT_SECURITY_POLICY,
        ))
        .layer(header_layer(header::X_CONTENT_TYPE_OPTIONS, "nosniff"))
        .layer(header_layer(header::REFERRER_POLICY, "same-origin"))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;

    async fn serve(dir: &Path) -> String {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let address = listener.local_addr().unwrap();
        tokio::spawn(axum::serve(listener, router(dir)).into_future());
        format!("http://{address}")
    }

    #[tokio::test]
    async fn serves_pages_assets_and_the_api_404() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("index.html"), "<!doctype html>console").unwrap();
        std::fs::create_dir(dir.path().join("assets")).unwrap();
        std::fs::write(dir.path().join("assets/index-abc.js"), "export {}").unwrap();
        let base = serve(dir.path()).await;
        let client = reqwest::Client::new();

        for path in ["/", "/apps/123", "/clusters/x?y=1"] {
            let response = client.get(format!("{base}{path}")).send().await.unwrap();
            assert_eq!(response.status(), 200, "{path}");
            let headers = response.headers();
            assert_eq!(headers["content-security-policy"], CONTENT_SECURITY_POLICY);
            assert_eq!(headers["cache-control"], REVALIDATE);
            assert_eq!(response.text().await.unwrap(), "<!doctype html>console");
        }

        let asset = client
            .get(format!("{base}/assets/index-abc.js"))
            .send()
            .await
            .unwrap();
        assert_eq!(asset.status(), 200);
        assert_eq!(asset.headers()["cache-control"], IMMUTABLE);
        assert!(
            asset.headers()["content-type"]
                .to_str()
                .unwrap()
                .contains("javascript")
        );
        let missing = client
            .get(format!("{base}/assets/gone.js"))
            .send()
            .await
            .unwrap();
        assert_eq!(missing.status(), 404);

        for path in ["/api", "/api/v1/nothing-here"] {
            let response = client.get(format!("{base}{path}")).send().await.unwrap();
            assert_eq!(response.status(), 404, "{path}");
            let body: serde_json::Value = response.json().await.unwrap();
            assert_eq!(body["code"], "not_found", "{path}");
        }
    }
}
