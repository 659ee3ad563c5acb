//! Unknown query parameters are refused on every operation, by the OpenAPI document's own list
//! of each operation's query parameters. A handler that reads no query string would otherwise
//! ignore `?colour=red` without a word, and one that does would answer in its own words; this
//! way every operation refuses the same way, naming the parameter, and the document and the
//! server can never disagree on what an operation takes.

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;

use aide::openapi::{OpenApi, Parameter, ReferenceOr};
use axum::extract::{MatchedPath, Request, State};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use crate::error::ApiError;

/// Each operation's query parameters: (lowercase method, path template) → names.
#[derive(Debug, Default)]
pub struct Declared(HashMap<(String, String), BTreeSet<String>>);

impl Declared {
    /// The query parameters every operation of `api` declares.
    pub fn of(api: &OpenApi) -> Self {
        let mut declared = HashMap::new();
        for (path, item) in api.paths.iter().flat_map(|paths| paths.iter()) {
            let ReferenceOr::Item(item) = item else {
                continue;
            };
            for (method, operation) in item.iter() {
                let names = operation
                    .parameters
                    .iter()
                    .filter_map(|parameter| match parameter {
                        ReferenceOr::Item(Parameter::Query { parameter_data, .. }) => {
                            Some(parameter_data.name.clone())
                        }
                        _ => None,
                    })
                    .collect();
                declared.insert((method.to_owned(), path.clone()), names);
            }
        }
        Self(declared)
    }

    /// The first parameter of `query` that operation (`method`, `path`) does not declare.
    fn unknown(&self, method: &str, path: &str, query: &str) -> Option<(String, Vec<&str>)> {
        let known = self.0.get(&(method.to_owned(), path.to_owned()))?;
        form_urlencoded::parse(query.as_bytes())
            .map(|(name, _)| name.into_owned())
            .find(|name| !known.contains(name))
            .map(|name| (name, known.iter().map(String::as_str).collect()))
    }
}

/// Refuses a request whose query string names a parameter its operation does not declare:
/// 400 in the API's error shape, the parameter as the field.
pub async fn refuse_unknown(
    State(declared): State<Arc<Declared>>,
    matched: Option<MatchedPath>,
    request: Request,
    next: Next,
) -> Response {
    if let (Some(path), Some(query)) = (&matched, request.uri().query()) {
        let method = match request.method().as_str() {
            "HEAD" => "get".to_owned(),
            other => other.to_ascii_lowercase(),
        };
        if let Some((name, known)) = declared.unknown(&method, path.as_str(), query) {
            let takes = if known.is_empty() {
                "this operation takes no query parameters".to_owned()
            } else {
                format!("this operation takes {}", known.join(", "))
            };
            return ApiError {
                field: Some(name.clone()),
                ..ApiError::bad_request(format!("unknown query parameter {name}: {takes}"))
            }
            .into_response();
        }
    }
    next.run(request).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parameters_are_checked_against_the_operation_that_declares_them() {
        let declared = Declared::of(&crate::openapi());
        assert_eq!(
            declared.unknown("get", "/api/v1/apps", "limit=5&org=x"),
            None
        );
        let (name, known) = declared
            .unknown("get", "/api/v1/apps", "limit=5&colour=red")
            .unwrap();
        assert_eq!(name, "colour");
        assert!(known.contains(&"limit"), "{known:?}");
        let (name, known) = declared.unknown("get", "/api/v1/orgs", "x=1").unwrap();
        assert_eq!((name.as_str(), known.len()), ("x", 0));
        // An operation the document does not hold is left to the router (404, 405).
        assert_eq!(declared.unknown("get", "/nowhere", "x=1"), None);
    }
}
