//! `?dryRun=true` on a write: the request is checked, authorized and written to the management
//! API server as a dry run (`dryRun=All`: its schema, CEL rules and kubenest's own admission
//! webhooks judge it, and nothing is stored), and the answer is the one the write would have
//! had. The answer carries `kubenest-dry-run: true`; the audit log records the request,
//! its action marked `(dry run)`.
//!
//! Which writes have a dry run is one table ([`SUPPORTED`]), closed by default: a write whose
//! effect is not only objects on the management cluster (sessions, passwords and accounts in
//! the database, secrets the hub carries to a cluster, a token the controllers mint) refuses
//! `dryRun=true` with a 422 saying why, rather than doing it for real. A new write route is in
//! that group until it is added to the table, and the document declares `dryRun` on exactly
//! the writes of the table.
//!
//! Handlers learn of a dry run from a task-local ([`active`]): the write parameters
//! ([`crate::routes::post_params`] and its siblings) carry it to the management API server,
//! and the waits for what a stored object leads to (the watch catching up, the controllers,
//! the agent) are skipped, since nothing will come.

use aide::openapi::{
    Parameter, ParameterData, ParameterSchemaOrContent, ReferenceOr, SchemaObject,
};
use axum::extract::{MatchedPath, Request};
use axum::http::{HeaderValue, Method, Uri};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use crate::error::ApiError;

/// The query parameter.
pub const PARAMETER: &str = "dryRun";

/// The header a dry run's answer carries.
pub const HEADER: &str = "kubenest-dry-run";

/// The writes that have a dry run: (method, path template). Each writes only objects on the
/// management cluster, through the API's write parameters.
pub const SUPPORTED: &[(&str, &str)] = &[
    ("POST", "/api/v1/orgs"),
    ("PATCH", "/api/v1/orgs/{org}"),
    ("DELETE", "/api/v1/orgs/{org}"),
    ("PUT", "/api/v1/orgs/{org}/members"),
    ("DELETE", "/api/v1/orgs/{org}/members/{user}"),
    ("POST", "/api/v1/orgs/{org}/projects"),
    ("DELETE", "/api/v1/clusters/{id}"),
    ("POST", "/api/v1/clusters/{id}/scale"),
    ("PUT", "/api/v1/clusters/{id}/budget"),
    ("PUT", "/api/v1/clusters/{id}/members"),
    ("DELETE", "/api/v1/clusters/{id}/members/{user}"),
    ("DELETE", "/api/v1/projects/{id}"),
    ("PUT", "/api/v1/projects/{id}/members"),
    ("DELETE", "/api/v1/projects/{id}/members/{user}"),
    ("PUT", "/api/v1/projects/{id}/fences"),
    ("POST", "/api/v1/apps"),
    ("PATCH", "/api/v1/apps/{id}"),
    ("DELETE", "/api/v1/apps/{id}"),
    ("POST", "/api/v1/apps/{id}/pause"),
    ("POST", "/api/v1/apps/{id}/resume"),
    ("POST", "/api/v1/apps/{id}/redeploy"),
    ("POST", "/api/v1/apps/{id}/rollback"),
    ("POST", "/api/v1/addon-instances"),
    ("PATCH", "/api/v1/addon-instances/{id}"),
    ("DELETE", "/api/v1/addon-instances/{id}"),
    ("POST", "/api/v1/addon-instances/{id}/rollback"),
    ("POST", "/api/v1/templates"),
    ("POST", "/api/v1/templates/from-app"),
    ("POST", "/api/v1/templates/import"),
    ("POST", "/api/v1/templates/from-chart"),
    ("PATCH", "/api/v1/templates/{id}"),
    ("DELETE", "/api/v1/templates/{id}"),
    ("POST", "/api/v1/templates/{id}/deploy"),
];

tokio::task_local! {
    static DRY_RUN: bool;
}

/// Whether the request being handled is a dry run.
pub fn active() -> bool {
    DRY_RUN.try_with(|dry| *dry).unwrap_or(false)
}

fn supported(method: &Method, path: &str) -> bool {
    SUPPORTED
        .iter()
        .any(|(m, p)| *m == method.as_str() && *p == path)
}

fn is_write(method: &Method) -> bool {
    matches!(
        *method,
        Method::POST | Method::PUT | Method::PATCH | Method::DELETE
    )
}

fn dry_run_value(query: &str) -> Option<String> {
    form_urlencoded::parse(query.as_bytes())
        .filter(|(name, _)| name == PARAMETER)
        .map(|(_, value)| value.into_owned())
        .last()
}

/// Takes `dryRun` out of a write's query string (so the handler's own query sees only its
/// parameters) and runs the handler as a dry run when it is `true`. A value other than `true`
/// or `false`, or a dry run of a write without one, is refused naming the parameter.
pub async fn layer(matched: Option<MatchedPath>, mut request: Request, next: Next) -> Response {
    let Some(query) = request.uri().query().map(str::to_owned) else {
        return next.run(request).await;
    };
    let Some(value) = dry_run_value(&query).filter(|_| is_write(request.method())) else {
        return next.run(request).await;
    };
    let dry = match value.as_str() {
        "true" => true,
        "false" => false,
        other => {
            return ApiError::invalid(PARAMETER, format!("dryRun is true or false, not {other:?}"))
                .into_response();
        }
    };
    let path = matched
        .as_ref()
        .map(MatchedPath::as_str)
        .unwrap_or_default();
    if dry && !supported(request.method(), path) {
        return ApiError::invalid(
            PARAMETER,
            format!(
                "{} {path} has no dry run: what it changes is not only objects on the \
                 management cluster (a session, an account, a secret the hub carries to the \
                 cluster, or a token the controllers mint), so it cannot be tried without \
                 being done",
                request.method()
            ),
        )
        .into_response();
    }
    let rest: Vec<(String, String)> = form_urlencoded::parse(query.as_bytes())
        .filter(|(name, _)| name != PARAMETER)
        .map(|(n, v)| (n.into_owned(), v.into_owned()))
        .collect();
    let rest = form_urlencoded::Serializer::new(String::new())
        .extend_pairs(rest)
        .finish();
    let path_and_query = if rest.is_empty() {
        request.uri().path().to_owned()
    } else {
        format!("{}?{rest}", request.uri().path())
    };
    let mut parts = request.uri().clone().into_parts();
    parts.path_and_query = path_and_query.parse().ok();
    if let Ok(uri) = Uri::from_parts(parts) {
        *request.uri_mut() = uri;
    }
    let mut response = DRY_RUN.scope(dry, next.run(request)).await;
    if dry {
        response
            .headers_mut()
            .insert(HEADER, HeaderValue::from_static("true"));
    }
    response
}

/// Declares `dryRun` on every write of `api` that has one.
pub fn declare(api: &mut aide::openapi::OpenApi) {
    for (path, item) in api
        .paths
        .iter_mut()
        .flat_map(|paths| paths.paths.iter_mut())
    {
        let ReferenceOr::Item(item) = item else {
            continue;
        };
        let operations = [
            ("POST", item.post.as_mut()),
            ("PUT", item.put.as_mut()),
            ("PATCH", item.patch.as_mut()),
            ("DELETE", item.delete.as_mut()),
        ];
        for (method, operation) in operations {
            let Some(operation) = operation else { continue };
            if !SUPPORTED.contains(&(method, path.as_str())) {
                continue;
            }
            operation
                .parameters
                .push(ReferenceOr::Item(Parameter::Query {
                    parameter_data: ParameterData {
                        name: PARAMETER.into(),
                        description: Some(
                            "`true`: check, authorize and admit the write (the management API \
                         server's dry run) and answer as it would, storing nothing; the \
                         answer carries `kubenest-dry-run: true`"
                                .into(),
                        ),
                        required: false,
                        deprecated: None,
                        format: ParameterSchemaOrContent::Schema(SchemaObject {
                            json_schema: schemars::json_schema!({
                                "type": "string",
                                "enum": ["true", "false"]
                            }),
                            external_docs: None,
                            example: None,
                        }),
                        example: None,
                        examples: Default::default(),
                        explode: None,
                        extensions: Default::default(),
                    },
                    allow_reserved: false,
                    style: Default::default(),
                    allow_empty_value: None,
                }));
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn every_supported_write_is_a_route_of_the_document() {
        let api = crate::openapi();
        for (method, path) in SUPPORTED {
            let item = api
                .paths
                .as_ref()
                .and_then(|p| p.paths.get(*path))
                .unwrap_or_else(|| panic!("{path} is no route"));
            let ReferenceOr::Item(item) = item else {
                panic!("{path}")
            };
            let operation = match *method {
                "POST" => item.post.as_ref(),
                "PUT" => item.put.as_ref(),
                "PATCH" => item.patch.as_ref(),
                _ => item.delete.as_ref(),
            }
            .unwrap_or_else(|| panic!("{method} {path} is no operation"));
            assert!(
                operation.parameters.iter().any(|p| matches!(
                    p,
                    ReferenceOr::Item(Parameter::Query { parameter_data, .. })
                        if parameter_data.name == PARAMETER
                )),
                "{method} {path} does not declare dryRun"
            );
        }
    }

    #[test]
    fn the_value_is_read_from_the_query() {
        assert_eq!(
            dry_run_value("dryRun=true&force=1").as_deref(),
            Some("true")
        );
        assert_eq!(dry_run_value("force=1"), None);
        assert_eq!(dry_run_value("dryRun=All").as_deref(), Some("All"));
    }
}
