//! Extractors with the API's own errors: a JSON body whose errors name the field, a query
//! string whose errors name the parameter, and the
//! authenticated caller (bearer access token, per-user rate limits). Every request checks the
//! token's user against PostgreSQL: a deleted or disabled user, one created again under the
//! same name (another id) or a token from before a password change (an older token epoch) is
//! refused at once, on every replica; the platform-administrator flag is the current one.

use aide::OperationInput;
use aide::generate::GenContext;
use aide::openapi::{Operation, SecurityRequirement};
use axum::body::Bytes;
use axum::extract::{FromRequest, FromRequestParts, Request};
use axum::http::{Method, header, request::Parts};
use schemars::JsonSchema;
use serde::de::DeserializeOwned;

use crate::authz::Caller;
use crate::error::ApiError;
use crate::state::AppState;

/// A JSON request body. Unknown fields, wrong types and missing fields are a 400 naming the
/// field (`components[0].workload_spec.replicas`).
#[derive(Debug)]
pub struct Body<T>(pub T);

impl<T: DeserializeOwned, S: Send + Sync> FromRequest<S> for Body<T> {
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &S) -> Result<Self, Self::Rejection> {
        let json = req
            .headers()
            .get(header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.starts_with("application/json"));
        if !json {
            return Err(ApiError::bad_request(
                "the body must be JSON (Content-Type: application/json)",
            ));
        }
        let bytes = Bytes::from_request(req, state).await.map_err(|e| {
            if e.status() == axum::http::StatusCode::PAYLOAD_TOO_LARGE {
                ApiError {
                    status: e.status(),
                    code: "too_large",
                    message: "the body is larger than this endpoint takes".into(),
                    field: None,
                    retry_after: None,
                    ways_out: None,
                }
            } else {
                ApiError::bad_request(e.body_text())
            }
        })?;
        let mut deserializer = serde_json::Deserializer::from_slice(&bytes);
        let value = serde_path_to_error::deserialize(&mut deserializer).map_err(|e| {
            let path = e.path().to_string();
            let message = e.inner().to_string();
            ApiError {
                field: (path != ".").then_some(path),
                ..ApiError::bad_request(message)
            }
        })?;
        deserializer
            .end()
            .map_err(|e| ApiError::bad_request(e.to_string()))?;
        Ok(Self(value))
    }
}

impl<T: JsonSchema> OperationInput for Body<T> {
    fn operation_input(ctx: &mut GenContext, operation: &mut Operation) {
        axum::Json::<T>::operation_input(ctx, operation);
    }
}

/// The query string of a request. An unknown parameter or a value of the wrong type is a 400
/// in the API's error shape naming the parameter (`limit`), where axum's own extractor would
/// answer plain text.
#[derive(Debug)]
pub struct Query<T>(pub T);

impl<T: DeserializeOwned, S: Send + Sync> FromRequestParts<S> for Query<T> {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, _state: &S) -> Result<Self, Self::Rejection> {
        let query = parts.uri.query().unwrap_or_default();
        let pairs = serde_urlencoded::Deserializer::new(form_urlencoded::parse(query.as_bytes()));
        serde_path_to_error::deserialize(pairs)
            .map(Self)
            .map_err(|e| query_error(&e.path().to_string(), &e.inner().to_string()))
    }
}

/// The 400 of a query string that does not deserialize: the parameter at `path`, or for an
/// unknown one (serde reports it at the top) the name it quotes.
fn query_error(path: &str, message: &str) -> ApiError {
    let parameter = if path == "." {
        message
            .strip_prefix("unknown field `")
            .and_then(|rest| rest.split_once('`'))
            .map(|(name, _)| name.to_owned())
    } else {
        Some(path.to_owned())
    };
    let message = match &parameter {
        Some(name) => format!("query parameter {name}: {message}"),
        None => format!("query string: {message}"),
    };
    ApiError {
        field: parameter,
        ..ApiError::bad_request(message)
    }
}

impl<T: JsonSchema> OperationInput for Query<T> {
    fn operation_input(ctx: &mut GenContext, operation: &mut Operation) {
        axum::extract::Query::<T>::operation_input(ctx, operation);
    }
}

fn bearer(parts: &Parts) -> Option<&str> {
    parts
        .headers
        .get(header::AUTHORIZATION)?
        .to_str()
        .ok()?
        .strip_prefix("Bearer ")
}

impl FromRequestParts<AppState> for Caller {
    type Rejection = ApiError;

    async fn from_request_parts(
        parts: &mut Parts,
        state: &AppState,
    ) -> Result<Self, Self::Rejection> {
        let token = bearer(parts).ok_or_else(|| {
            ApiError::unauthenticated("send an access token: Authorization: Bearer <token>")
        })?;
        let claims = state
            .tokens()
            .verify(token)
            .map_err(|e| ApiError::unauthenticated(format!("invalid access token: {e}")))?;
        let write = !matches!(parts.method, Method::GET | Method::HEAD);
        let route = parts
            .extensions
            .get::<axum::extract::MatchedPath>()
            .map_or_else(|| parts.uri.path().to_owned(), |m| m.as_str().to_owned());
        let endpoint = format!("{} {route}", parts.method);
        state.limits().check_user(&claims.sub, &endpoint, write)?;
        let user = state
            .accounts()
            .user_by_id(claims.uid)
            .await?
            .filter(|u| u.username == claims.sub)
            .ok_or_else(|| ApiError::unauthenticated("this user no longer exists; log in"))?;
        if user.disabled_at.is_some() {
            return Err(ApiError::unauthenticated("this account is disabled"));
        }
        if user.token_epoch != claims.epo {
            return Err(ApiError::unauthenticated(
                "this session ended (the password changed); log in",
            ));
        }
        crate::audit::note_caller(&user.username, &user.id.to_string());
        Ok(Caller {
            user: user.username,
            id: user.id.to_string(),
            platform_admin: user.platform_admin,
        })
    }
}

impl OperationInput for Caller {
    fn operation_input(_ctx: &mut GenContext, operation: &mut Operation) {
        operation
            .security
            .push(SecurityRequirement::from([("bearer".to_owned(), vec![])]));
    }
}
