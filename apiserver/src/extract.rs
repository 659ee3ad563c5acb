//! Extractors with the API's own errors: a JSON body whose errors name the field, a query
//! string whose errors name the parameter, and the
//! authenticated caller (bearer access token, per-user rate limits). Every request checks the
//! token's user against PostgreSQL: a deleted or disabled user, one created again under the
//! same name (another id) or a token from before a password change (an older token epoch) is
//! refused at once, on every replica; the platform-administrator flag is the current one.

mod client;
mod integral;

pub use client::ClientAddress;

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
use integral::Integral;

/// A JSON request body: an object. Unknown fields, wrong types and missing fields are a 400
/// naming the field (`components[0].workload_spec.replicas`).
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
        // Every body this API takes is a JSON object. serde also builds a struct from an array
        // of its fields in order (`[null, null]`), which no document of this API allows.
        if bytes.iter().find(|b| !b.is_ascii_whitespace()) != Some(&b'{') {
            return Err(ApiError::bad_request("the body must be a JSON object"));
        }
        let mut deserializer = serde_json::Deserializer::from_slice(&bytes);
        let value = match serde_path_to_error::deserialize(&mut deserializer) {
            Ok(value) => value,
            // Read again as a whole document, which checks that nothing follows it.
            Err(error) if integral_float(&error) => {
                return with_integral_floats(&bytes, error).map(Self);
            }
            Err(error) => return Err(body_error(&error)),
        };
        deserializer
            .end()
            .map_err(|e| ApiError::bad_request(e.to_string()))?;
        Ok(Self(value))
    }
}

/// The 400 of a body that does not deserialize, naming the field at fault.
fn body_error(error: &serde_path_to_error::Error<serde_json::Error>) -> ApiError {
    let path = error.path().to_string();
    ApiError {
        field: (path != ".").then_some(path),
        ..ApiError::bad_request(error.inner().to_string())
    }
}

/// Whether `error` is a number with a fraction where an integer was wanted. serde says so in
/// words only (`invalid type: floating point `2034.0`, expected u32`), hence the text.
fn integral_float(error: &serde_path_to_error::Error<serde_json::Error>) -> bool {
    error
        .inner()
        .to_string()
        .starts_with("invalid type: floating point")
}

/// How many times the old repair (one number fixed by the path serde names, then the whole
/// document read again) may follow the one-pass read: only for shapes serde buffers before the
/// target sees them (flattened structs, internally tagged enums), which [`Integral`] cannot
/// reach. A constant, so the work stays linear in the body.
const REPAIRS: usize = 4;

/// The body again, with each number written like `2034.0` that stands where an integer is
/// wanted read as that integer. JSON has one number type, so `2034.0` and `2034` are the same
/// value and JSON Schema's `integer` holds both; serde tells them apart. The document is read
/// once through [`Integral`], which hands the integer to whatever asks for one, so a float a
/// free-form map holds stays as it was; a fraction that is not zero stays the 400 it was.
fn with_integral_floats<T: DeserializeOwned>(
    bytes: &[u8],
    first: serde_path_to_error::Error<serde_json::Error>,
) -> Result<T, ApiError> {
    read_integral(bytes, first).0
}

/// [`with_integral_floats`], and how many times the document was deserialized.
fn read_integral<T: DeserializeOwned>(
    bytes: &[u8],
    first: serde_path_to_error::Error<serde_json::Error>,
) -> (Result<T, ApiError>, usize) {
    let Ok(mut document) = serde_json::from_slice::<serde_json::Value>(bytes) else {
        return (Err(body_error(&first)), 0);
    };
    let mut passes = 1;
    let mut error = match serde_path_to_error::deserialize(Integral(&document)) {
        Ok(value) => return (Ok(value), passes),
        Err(error) if integral_float(&error) => error,
        Err(error) => return (Err(body_error(&error)), passes),
    };
    for _ in 0..REPAIRS {
        let Some(number) = value_at(&mut document, error.path()) else {
            break;
        };
        let Some(integer) = as_integer(number) else {
            break;
        };
        *number = integer;
        passes += 1;
        match serde_path_to_error::deserialize(Integral(&document)) {
            Ok(value) => return (Ok(value), passes),
            Err(next) if integral_float(&next) => error = next,
            Err(next) => return (Err(body_error(&next)), passes),
        }
    }
    (Err(body_error(&error)), passes)
}

/// The value at `path` in `document`, where serde's path is one of map keys and list indexes.
fn value_at<'a>(
    document: &'a mut serde_json::Value,
    path: &serde_path_to_error::Path,
) -> Option<&'a mut serde_json::Value> {
    use serde_path_to_error::Segment;
    path.iter()
        .try_fold(document, |value, segment| match segment {
            Segment::Map { key } => value.as_object_mut()?.get_mut(key),
            Segment::Seq { index } => value.as_array_mut()?.get_mut(*index),
            Segment::Enum { .. } | Segment::Unknown => None,
        })
}

/// A number without a fraction as an integer; `None` for anything else (or one too large).
fn as_integer(value: &serde_json::Value) -> Option<serde_json::Value> {
    let float = value
        .as_f64()
        .filter(|f| f.is_finite() && f.fract() == 0.0)?;
    // The casts are exact: the float is whole and inside the integer type's range.
    #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
    if (0.0..u64::MAX as f64).contains(&float) {
        Some(serde_json::Value::from(float as u64))
    } else if (i64::MIN as f64..0.0).contains(&float) {
        Some(serde_json::Value::from(float as i64))
    } else {
        None
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

#[cfg(test)]
mod tests {
    use super::*;
    use serde::Deserialize;

    #[derive(Debug, Deserialize, PartialEq)]
    #[serde(deny_unknown_fields)]
    struct Scale {
        replicas: u32,
        offsets: Vec<i32>,
        values: serde_json::Map<String, serde_json::Value>,
    }

    async fn body(text: &str) -> Result<Scale, ApiError> {
        let request = Request::builder()
            .header(header::CONTENT_TYPE, "application/json")
            .body(axum::body::Body::from(text.to_owned()))
            .unwrap();
        Body::<Scale>::from_request(request, &()).await.map(|b| b.0)
    }

    #[tokio::test]
    async fn a_whole_number_written_with_a_fraction_is_the_integer_it_is() {
        let scale = body(r#"{"replicas": 3.0, "offsets": [1, -2.0, 4e1], "values": {"x": 1.0}}"#)
            .await
            .unwrap();
        assert_eq!((scale.replicas, scale.offsets), (3, vec![1, -2, 40]));
        // A float in a free-form map is not the API's to change.
        assert_eq!(scale.values["x"], serde_json::json!(1.0));
    }

    #[tokio::test]
    async fn a_fraction_or_a_number_out_of_range_is_still_refused_with_its_field() {
        for (text, field) in [
            (
                r#"{"replicas": 2.5, "offsets": [], "values": {}}"#,
                "replicas",
            ),
            (
                r#"{"replicas": 1, "offsets": [0, 1.5], "values": {}}"#,
                "offsets[1]",
            ),
            (
                r#"{"replicas": -1.0, "offsets": [], "values": {}}"#,
                "replicas",
            ),
            (
                r#"{"replicas": 1e30, "offsets": [], "values": {}}"#,
                "replicas",
            ),
        ] {
            let error = body(text).await.unwrap_err();
            assert_eq!(error.status, axum::http::StatusCode::BAD_REQUEST, "{text}");
            assert_eq!(
                error.field.as_deref(),
                Some(field),
                "{text}: {}",
                error.message
            );
        }
        let error = body(r#"{"replicas": 1.0, "offsets": [], "values": {}, "x": 1}"#)
            .await
            .unwrap_err();
        assert_eq!(error.field.as_deref(), Some("x"), "{}", error.message);
        assert!(
            error.message.contains("unknown field `x`"),
            "{}",
            error.message
        );
    }

    #[derive(Debug, Deserialize, PartialEq)]
    #[serde(rename_all = "snake_case")]
    enum Size {
        Fixed(u16),
        Range { low: Option<u8>, high: i64 },
        Auto,
    }

    #[derive(Debug, Deserialize, PartialEq)]
    struct Shapes {
        sizes: Vec<Size>,
        limit: Option<u64>,
        pair: (u8, f64),
    }

    #[test]
    fn thousands_of_whole_floats_are_read_in_one_pass_at_every_depth() {
        let offsets = vec!["-1.0"; 3000].join(", ");
        let text =
            format!(r#"{{"replicas": 7.0, "offsets": [{offsets}], "values": {{"x": 1.0}}}}"#);
        let first = serde_path_to_error::deserialize::<_, Scale>(
            &mut serde_json::Deserializer::from_str(&text),
        )
        .unwrap_err();
        let (scale, passes) = read_integral::<Scale>(text.as_bytes(), first);
        let scale = scale.unwrap();
        assert_eq!(passes, 1, "the document is read once, whatever it holds");
        assert_eq!((scale.replicas, scale.offsets.len()), (7, 3000));
        assert!(scale.offsets.iter().all(|o| *o == -1));
        assert_eq!(scale.values["x"], serde_json::json!(1.0));

        let text = r#"{"sizes": [{"fixed": 80.0}, {"range": {"low": 1.0, "high": -3.0}}, "auto"],
                       "limit": 5.0, "pair": [2.0, 2.5]}"#;
        let value: serde_json::Value = serde_json::from_str(text).unwrap();
        let shapes: Shapes = serde_path_to_error::deserialize(Integral(&value)).unwrap();
        assert_eq!(
            shapes,
            Shapes {
                sizes: vec![
                    Size::Fixed(80),
                    Size::Range {
                        low: Some(1),
                        high: -3
                    },
                    Size::Auto
                ],
                limit: Some(5),
                pair: (2, 2.5),
            }
        );
        let value = serde_json::json!({"sizes": [{"range": {"low": 300.0, "high": 0}}],
                                       "limit": null, "pair": [1, 1]});
        let error = serde_path_to_error::deserialize::<_, Shapes>(Integral(&value)).unwrap_err();
        assert_eq!(error.path().to_string(), "sizes[0].range.low", "{error}");
    }

    #[derive(Debug, Deserialize)]
    #[allow(dead_code)] // only whether it deserializes matters
    struct Flat {
        #[serde(flatten)]
        inner: Inner,
    }

    #[derive(Debug, Deserialize)]
    #[allow(dead_code)] // only whether it deserializes matters
    struct Inner {
        counts: Vec<u32>,
    }

    #[test]
    fn what_serde_buffers_costs_a_bounded_number_of_passes() {
        // A flattened struct is buffered before its fields are read, out of reach of
        // `Integral`; the repairs after it are bounded, not one per number.
        let counts = vec!["1.0"; 2000].join(",");
        let many = format!(r#"{{"counts": [{counts}]}}"#);
        let first = serde_path_to_error::deserialize::<_, Flat>(
            &mut serde_json::Deserializer::from_str(&many),
        )
        .unwrap_err();
        let (flat, passes) = read_integral::<Flat>(many.as_bytes(), first);
        assert!(flat.is_err());
        assert!(passes <= 1 + REPAIRS, "{passes} passes");
    }
}
