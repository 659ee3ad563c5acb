//! The audit log of the REST path: one entry for every mutating request an authenticated
//! caller makes (who, which request, on what, in which organization, with which outcome),
//! written before the answer leaves. The kubectl and GitOps paths are recorded by the admission
//! webhook ([`crate::admission`]); the REST API's own writes skip it, so each mutation is
//! recorded once.
//!
//! The caller and the organization are learnt as the handler runs: the `Caller` extractor and
//! the scope lookups note them in a task-local slot ([`note_caller`], [`note_org`]) that this
//! layer reads once the handler has answered.

use std::sync::{Arc, Mutex};

use axum::extract::{MatchedPath, Request, State};
use axum::http::Method;
use axum::middleware::Next;
use axum::response::Response;
use kubenest_store::{AuditPath, NewAuditEntry, Outcome};
use serde_json::json;

use crate::state::AppState;

#[derive(Debug, Default)]
struct Facts {
    caller: Option<(String, String)>,
    org: Option<String>,
    /// The handler wrote its own, richer entry (a forced removal).
    recorded: bool,
}

tokio::task_local! {
    static FACTS: Arc<Mutex<Facts>>;
}

/// Notes the authenticated caller of the request being handled.
pub fn note_caller(user: &str, id: &str) {
    let _ = FACTS.try_with(|facts| {
        if let Ok(mut facts) = facts.lock() {
            facts.caller = Some((user.to_owned(), id.to_owned()));
        }
    });
}

/// Notes the organization the request acts in (the first one noted wins).
pub fn note_org(org: &str) {
    let _ = FACTS.try_with(|facts| {
        if let Ok(mut facts) = facts.lock() {
            facts.org.get_or_insert_with(|| org.to_owned());
        }
    });
}

/// Notes that the handler wrote this request's entry itself.
pub fn note_recorded() {
    let _ = FACTS.try_with(|facts| {
        if let Ok(mut facts) = facts.lock() {
            facts.recorded = true;
        }
    });
}

/// Session requests change no kubenest object; their failures are the login limiter's.
const UNAUDITED: &[&str] = &["/api/v1/login", "/api/v1/refresh", "/api/v1/logout"];

/// The route's parameters, by name, from its template and the request's path.
fn parameters(template: &str, path: &str) -> Vec<(String, String)> {
    template
        .split('/')
        .zip(path.split('/'))
        .filter_map(|(t, p)| {
            let name = t.strip_prefix('{')?.strip_suffix('}')?;
            Some((name.to_owned(), p.to_owned()))
        })
        .collect()
}

/// The kind of object a route acts on: what follows `/api/v1/`, or an organization's
/// collection (`/api/v1/orgs/{org}/clusters` → `clusters`, `/api/v1/apps/{id}/rollback` →
/// `apps`).
fn kind_of(template: &str) -> String {
    let segments: Vec<&str> = template.trim_start_matches("/api/v1/").split('/').collect();
    match segments.as_slice() {
        ["orgs", "{org}", collection, ..] => (*collection).to_owned(),
        [first, ..] => (*first).to_owned(),
        [] => String::new(),
    }
}

/// The layer (a `route_layer`, so the route's template is known).
pub async fn record(State(state): State<AppState>, request: Request, next: Next) -> Response {
    let mutating = matches!(
        *request.method(),
        Method::POST | Method::PUT | Method::PATCH | Method::DELETE
    );
    let template = request
        .extensions()
        .get::<MatchedPath>()
        .map(|m| m.as_str().to_owned());
    // A dry run changes nothing, but who tried what (and was refused) is still recorded,
    // marked as such.
    let dry = crate::dry_run::active();
    let Some(template) = template.filter(|t| mutating && !UNAUDITED.contains(&t.as_str())) else {
        return next.run(request).await;
    };
    let method = request.method().clone();
    let path = request.uri().path().to_owned();
    let facts = Arc::new(Mutex::new(Facts::default()));
    let response = FACTS.scope(facts.clone(), next.run(request)).await;
    let facts = std::mem::take(&mut *facts.lock().unwrap_or_else(|e| e.into_inner()));
    let Some((actor, actor_id)) = facts.caller.filter(|_| !facts.recorded) else {
        // Nobody to name (the request was refused before it was authenticated), or the
        // handler's own entry stands for it.
        return response;
    };
    let params = parameters(&template, &path);
    let param = |name: &str| {
        params
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.clone())
    };
    let org = facts.org.or_else(|| param("org")).unwrap_or_default();
    let resource_name = params
        .iter()
        .rev()
        .find(|(n, _)| n != "org")
        .map(|(_, v)| v.clone())
        .or_else(|| param("org"))
        .unwrap_or_default();
    let status = response.status().as_u16();
    let entry = NewAuditEntry {
        org_id: org,
        actor,
        actor_id: Some(actor_id),
        action: if dry {
            format!("{method} {template} (dry run)")
        } else {
            format!("{method} {template}")
        },
        resource_kind: kind_of(&template),
        resource_name,
        path: AuditPath::Rest,
        outcome: Outcome::of_status(status),
        status,
        details: json!({"path": path}),
    };
    if let Err(error) = state.history().audit(&entry).await {
        tracing::error!(%error, "audit entry of a REST request not written");
    }
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_route_names_its_kind_and_parameters() {
        assert_eq!(kind_of("/api/v1/apps/{id}/rollback"), "apps");
        assert_eq!(kind_of("/api/v1/orgs/{org}/clusters"), "clusters");
        assert_eq!(kind_of("/api/v1/orgs/{org}/members/{user}"), "members");
        assert_eq!(kind_of("/api/v1/orgs"), "orgs");
        assert_eq!(kind_of("/api/v1/users/{username}/disable"), "users");
        assert_eq!(
            parameters(
                "/api/v1/orgs/{org}/members/{user}",
                "/api/v1/orgs/acme/members/bob"
            ),
            vec![
                ("org".to_owned(), "acme".to_owned()),
                ("user".to_owned(), "bob".to_owned())
            ]
        );
    }
}
