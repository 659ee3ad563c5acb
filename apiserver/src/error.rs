//! The one error shape of the API: an RFC 9457 problem (`application/problem+json`) with
//! `type`, `title`, `status`, `detail` and `instance` (the request id, also in the
//! `x-request-id` header), and the extension members `code`, `field` and `ways_out`; a status
//! that says who is at fault. [`with_instance`] fills `instance` in as the answer leaves.

pub use kubenest_api::problem::{Problem, WayOut, WayOutAction};

use aide::OperationOutput;
use aide::generate::GenContext;
use aide::openapi::{Operation, Response};
use axum::Json;
use axum::body::Body;
use axum::extract::Request;
use axum::http::{HeaderValue, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response as AxumResponse};
use kubenest_store::StoreError;

use crate::auth::accounts::AccountError;

// The problem's media type, `type` and `title` are the API's (the hub answers the same way).
pub use kubenest_api::problem::{PROBLEM_JSON, problem_title, problem_type};

/// An error response.
#[derive(Debug)]
pub struct ApiError {
    pub status: StatusCode,
    pub code: &'static str,
    pub message: String,
    pub field: Option<String>,
    /// Seconds, for 429 and 503.
    pub retry_after: Option<u64>,
    pub ways_out: Option<Vec<WayOut>>,
}

/// Results of handlers.
pub type ApiResult<T> = Result<T, ApiError>;

impl ApiError {
    fn new(status: StatusCode, code: &'static str, message: impl Into<String>) -> Self {
        Self {
            status,
            code,
            message: message.into(),
            field: None,
            retry_after: None,
            ways_out: None,
        }
    }

    /// A field's value is unacceptable.
    pub fn invalid(field: impl Into<String>, message: impl Into<String>) -> Self {
        Self {
            field: Some(field.into()),
            ..Self::new(
                StatusCode::UNPROCESSABLE_ENTITY,
                "validation_failed",
                message,
            )
        }
    }

    /// A field names an object that is not there, or not for this caller (a 404 naming the
    /// field: the request is well-formed, what it points at is missing).
    pub fn missing(field: impl Into<String>, message: impl Into<String>) -> Self {
        Self {
            field: Some(field.into()),
            ..Self::new(StatusCode::NOT_FOUND, "not_found", message)
        }
    }

    /// A method the path does not take (405).
    pub fn method_not_allowed(message: impl Into<String>) -> Self {
        Self::new(
            StatusCode::METHOD_NOT_ALLOWED,
            "method_not_allowed",
            message,
        )
    }

    pub fn bad_request(message: impl Into<String>) -> Self {
        Self::new(StatusCode::BAD_REQUEST, "bad_request", message)
    }

    /// No such object for this caller (also what another organization's objects answer).
    pub fn not_found(what: impl Into<String>) -> Self {
        Self::new(
            StatusCode::NOT_FOUND,
            "not_found",
            format!("{} not found", what.into()),
        )
    }

    pub fn unauthenticated(message: impl Into<String>) -> Self {
        Self::new(StatusCode::UNAUTHORIZED, "unauthenticated", message)
    }

    /// The caller sees the object but their role does not allow the operation.
    pub fn forbidden(message: impl Into<String>) -> Self {
        Self::new(StatusCode::FORBIDDEN, "forbidden", message)
    }

    /// A change that would take more than a quota or a budget allows (a 422 naming the field
    /// that asks for it): `quota_exceeded` or `budget_exceeded`.
    pub fn exceeded(
        code: &'static str,
        field: impl Into<String>,
        message: impl Into<String>,
    ) -> Self {
        Self {
            field: Some(field.into()),
            ..Self::new(StatusCode::UNPROCESSABLE_ENTITY, code, message)
        }
    }

    /// The operation conflicts with the object's state.
    pub fn conflict(code: &'static str, message: impl Into<String>) -> Self {
        Self::new(StatusCode::CONFLICT, code, message)
    }

    /// The object does not converge and the operation would pile onto that; `ways_out` are the
    /// requests that remain allowed.
    pub fn stuck(code: &'static str, message: impl Into<String>, ways_out: Vec<WayOut>) -> Self {
        Self {
            ways_out: Some(ways_out),
            ..Self::conflict(code, message)
        }
    }

    pub fn too_many(message: impl Into<String>, retry_after: u64) -> Self {
        Self {
            retry_after: Some(retry_after),
            ..Self::new(StatusCode::TOO_MANY_REQUESTS, "rate_limited", message)
        }
    }

    /// A dependency (the hub, a cluster) is not reachable now; retrying may help.
    pub fn unavailable(code: &'static str, message: impl Into<String>) -> Self {
        Self {
            retry_after: Some(5),
            ..Self::new(StatusCode::SERVICE_UNAVAILABLE, code, message)
        }
    }

    /// Something on our side; logged, not shown in detail.
    pub fn internal(error: impl std::fmt::Display) -> Self {
        tracing::error!(%error, "internal error");
        Self::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            "internal",
            "internal error; see the server log for this request id",
        )
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> AxumResponse {
        let body = Problem {
            field: self.field,
            ways_out: self.ways_out,
            ..Problem::new(self.status.as_u16(), self.code, self.message)
        };
        let mut response = (self.status, Json(&body)).into_response();
        response
            .headers_mut()
            .insert(header::CONTENT_TYPE, HeaderValue::from_static(PROBLEM_JSON));
        // For `with_instance`, which adds the request id without reading the body back.
        response.extensions_mut().insert(body);
        if let Some(secs) = self.retry_after
            && let Ok(value) = HeaderValue::from_str(&secs.to_string())
        {
            response.headers_mut().insert(header::RETRY_AFTER, value);
        }
        response
    }
}

/// Fills in the `instance` of a problem answer with the request id. Errors are made where the
/// id is not at hand (extractors, handlers, fallbacks); this layer, inside the one that sets
/// the id, sees every answer, and writes the problem [`ApiError`] left beside its body again
/// with the id. Other answers pass untouched.
pub async fn with_instance(request: Request, next: Next) -> AxumResponse {
    let id = request
        .headers()
        .get(crate::REQUEST_ID)
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    let mut response = next.run(request).await;
    let Some(mut problem) = response.extensions_mut().remove::<Problem>() else {
        return response;
    };
    let Some(id) = id else {
        return response;
    };
    problem.instance = Some(id);
    let Ok(body) = serde_json::to_vec(&problem) else {
        return response;
    };
    let (mut parts, _) = response.into_parts();
    parts.headers.remove(header::CONTENT_LENGTH);
    AxumResponse::from_parts(parts, Body::from(body))
}

impl OperationOutput for ApiError {
    type Inner = Problem;

    fn operation_response(ctx: &mut GenContext, operation: &mut Operation) -> Option<Response> {
        let mut response = Json::<Problem>::operation_response(ctx, operation)?;
        // The same schema, under the media type the answer carries.
        if let Some(media) = response.content.shift_remove("application/json") {
            response.content.insert(PROBLEM_JSON.into(), media);
        }
        Some(response)
    }

    fn inferred_responses(
        ctx: &mut GenContext,
        operation: &mut Operation,
    ) -> Vec<(Option<aide::openapi::StatusCode>, Response)> {
        let Some(response) = Self::operation_response(ctx, operation) else {
            return Vec::new();
        };
        [400, 401, 403, 404, 409, 422, 429]
            .into_iter()
            .map(|code| {
                (
                    Some(aide::openapi::StatusCode::Code(code)),
                    Response {
                        description: "error".into(),
                        ..response.clone()
                    },
                )
            })
            .collect()
    }
}

impl From<kube::Error> for ApiError {
    fn from(error: kube::Error) -> Self {
        match &error {
            kube::Error::Api(status) if status.code == 404 => Self::not_found("object"),
            // The management API server refused what the request carried.
            kube::Error::Api(status) if status.code == 400 => {
                Self::bad_request(status.message.clone())
            }
            kube::Error::Api(status) if status.code == 409 => Self::conflict(
                "conflict",
                format!("changed concurrently or already exists: {}", status.message),
            ),
            // The management API server's own validation (CRD schema, CEL rules): its message
            // names the field (`spec.components[0].name: Invalid value: ...`).
            kube::Error::Api(status) if status.code == 422 => {
                let field = status
                    .message
                    .split(": ")
                    .find(|part| part.starts_with("spec."))
                    .map(str::to_owned);
                Self {
                    field,
                    ..Self::new(
                        StatusCode::UNPROCESSABLE_ENTITY,
                        "validation_failed",
                        status.message.clone(),
                    )
                }
            }
            // The management API server is down, unreachable, overloaded or timing out: an
            // outage the caller may retry, not a fault of ours.
            kube::Error::Api(status) if matches!(status.code, 429 | 503 | 504) => {
                Self::outage("management_unavailable", "the management cluster", &error)
            }
            kube::Error::HyperError(_) | kube::Error::Service(_) | kube::Error::ReadEvents(_) => {
                Self::outage("management_unavailable", "the management cluster", &error)
            }
            _ => Self::internal(error),
        }
    }
}

impl ApiError {
    /// A 503 with `Retry-After` for a dependency that cannot answer now; the cause is logged.
    fn outage(code: &'static str, what: &str, error: &dyn std::fmt::Display) -> Self {
        tracing::warn!(%error, "{what} is unavailable");
        Self::unavailable(
            code,
            format!("{what} cannot be reached now; retry after the time Retry-After gives"),
        )
    }
}

impl From<StoreError> for ApiError {
    fn from(error: StoreError) -> Self {
        match error {
            StoreError::NotFound => Self::not_found("record"),
            StoreError::UserExists => Self::conflict("exists", "the user exists"),
            StoreError::Conflict { constraint } => {
                Self::conflict("conflict", format!("conflicts with {constraint}"))
            }
            other if other.unavailable() => {
                Self::outage("database_unavailable", "the database", &other)
            }
            other => Self::internal(other),
        }
    }
}

impl From<AccountError> for ApiError {
    fn from(error: AccountError) -> Self {
        match error {
            AccountError::Store(error) => error.into(),
            AccountError::Hash(error) => Self::internal(error),
        }
    }
}
