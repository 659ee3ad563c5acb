//! The API reference page (`GET /api/v1/reference`): Swagger UI over the OpenAPI document the
//! server serves beside it, to read every operation and try it with an access token
//! ("Authorize"). The page is aide's Swagger UI build, carried in the binary, so it works with
//! no network beyond this server.
//!
//! The page is one document with its script and style inline; its Content-Security-Policy
//! allows exactly those, by their SHA-256 hashes, and nothing else from anywhere but this
//! origin. Swagger UI sets styles on elements it draws, which the policy must allow
//! (`'unsafe-inline'` for styles only: the page shows no user content but the document).

use std::sync::LazyLock;

use axum::http::{HeaderValue, header};
use axum::response::{Html, IntoResponse, Response};
use base64::Engine;
use sha2::{Digest, Sha256};

/// Where the page is served.
pub const PATH: &str = "/api/v1/reference";

struct Page {
    html: String,
    policy: HeaderValue,
}

static PAGE: LazyLock<Page> = LazyLock::new(|| {
    let html = aide::swagger::Swagger::new("/api/v1/openapi.json")
        .with_title("kubenest API reference")
        .html();
    let scripts: Vec<String> = inline(&html, "<script>", "</script>")
        .map(|script| format!("'sha256-{}'", digest(script)))
        .collect();
    let policy = format!(
        "default-src 'self'; script-src {}; style-src 'self' 'unsafe-inline'; \
         img-src 'self' data:; connect-src 'self'; object-src 'none'; base-uri 'self'; \
         form-action 'self'; frame-ancestors 'none'",
        scripts.join(" ")
    );
    Page {
        policy: HeaderValue::from_str(&policy)
            .unwrap_or_else(|_| HeaderValue::from_static("default-src 'none'")),
        html,
    }
});

/// The contents of each `open`…`close` element of `html`, in order: from each opening tag to
/// the first closing one after it (Swagger UI's script holds the text `<script>`, never
/// `</script>`).
fn inline<'a>(html: &'a str, open: &'a str, close: &'a str) -> impl Iterator<Item = &'a str> {
    let mut rest = html;
    std::iter::from_fn(move || {
        let start = rest.find(open)? + open.len();
        let length = rest[start..].find(close)?;
        let content = &rest[start..start + length];
        rest = &rest[start + length + close.len()..];
        Some(content)
    })
}

fn digest(content: &str) -> String {
    base64::engine::general_purpose::STANDARD.encode(Sha256::digest(content.as_bytes()))
}

/// The page, with its policy.
pub async fn page() -> Response {
    let page = &*PAGE;
    let mut response = Html(page.html.clone()).into_response();
    let headers = response.headers_mut();
    headers.insert(header::CONTENT_SECURITY_POLICY, page.policy.clone());
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    headers.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("same-origin"),
    );
    response
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn the_policy_allows_the_page_s_own_scripts_and_no_other() {
        let page = &*PAGE;
        let policy = page.policy.to_str().unwrap();
        let scripts: Vec<&str> = inline(&page.html, "<script>", "</script>").collect();
        assert_eq!(scripts.len(), 2, "Swagger UI and its start");
        for script in scripts {
            assert!(policy.contains(&format!("'sha256-{}'", digest(script))));
        }
        assert!(!policy.contains("script-src 'self' 'unsafe-inline'"));
        assert!(!policy.contains("unsafe-eval"));
        assert!(page.html.contains("/api/v1/openapi.json"));
        // What the start script is: the last inline script, calling Swagger UI.
        assert!(
            inline(&page.html, "<script>", "</script>")
                .last()
                .is_some_and(|s| s.contains("SwaggerUIBundle({"))
        );
    }
}
