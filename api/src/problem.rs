//! The one error shape of the API: an RFC 9457 problem with `code`, `field` and `ways_out`.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// The body of every error response: a problem document (RFC 9457) whose `type` is one per
/// `code`.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct Problem {
    /// What kind of problem: `tag:kubenest.io,2026:problem:{code}`, one per `code`; an
    /// identifier, not a page to fetch.
    #[serde(rename = "type")]
    pub problem_type: String,
    /// The kind of problem for people, the same for every occurrence of `code`
    /// (`Validation failed`).
    pub title: String,
    /// The HTTP status, as in the response's status line.
    pub status: u16,
    /// This occurrence, for people.
    pub detail: String,
    /// The request id (the `x-request-id` header), which finds this occurrence in the
    /// server's log.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub instance: Option<String>,
    /// A stable, machine-readable code (`validation_failed`, `not_found`, ...).
    pub code: String,
    /// The offending field as a dotted path, when one field is at fault.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub field: Option<String>,
    /// On a 409 for an App or addon that does not converge: the requests that are still
    /// allowed, each ready to send.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ways_out: Option<Vec<WayOut>>,
}

/// The media type of every error response (RFC 9457).
pub const PROBLEM_JSON: &str = "application/problem+json";

/// The `type` of the problems with `code`: a tag URI (RFC 4151), an identifier that names the
/// kind of problem and is never fetched.
pub fn problem_type(code: &str) -> String {
    format!("tag:kubenest.io,2026:problem:{code}")
}

/// The `title` of the problems with `code`: the code in words (`validation_failed` →
/// `Validation failed`), so it never varies between occurrences.
pub fn problem_title(code: &str) -> String {
    let words = code.replace('_', " ");
    let mut chars = words.chars();
    match chars.next() {
        Some(first) => first.to_uppercase().chain(chars).collect(),
        None => String::new(),
    }
}

impl Problem {
    /// The problem of `code` with HTTP `status` and `detail`, its `type` and `title` derived
    /// from the code; no instance, field or ways out.
    pub fn new(status: u16, code: &str, detail: impl Into<String>) -> Self {
        Self {
            problem_type: problem_type(code),
            title: problem_title(code),
            status,
            detail: detail.into(),
            instance: None,
            code: code.to_owned(),
            field: None,
            ways_out: None,
        }
    }
}

/// What a way out of a non-converging App or addon does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum WayOutAction {
    /// Restore any recorded deployment (App) or revision (addon).
    Rollback,
    /// Change what fails: for an App, one of `components`; for an addon, its version or values.
    Patch,
    /// Scale every workload to zero, keeping the spec (Apps).
    Pause,
    Delete,
}

/// A request that is always allowed on an App or addon that does not converge.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct WayOut {
    pub action: WayOutAction,
    /// `POST`, `PATCH` or `DELETE`.
    pub method: String,
    /// The request's path, e.g. `/api/v1/apps/{id}/rollback`.
    pub path: String,
    /// For an App's `patch`: the failing components; a change that touches none of them is
    /// refused.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub components: Vec<String>,
}
