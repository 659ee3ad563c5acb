//! `kubenest-apiserver`: the REST facade and live event stream over the management cluster.
//!
//! # How it works
//!
//! - It is a facade: every write is a write to the kubenest custom resources on the management
//!   cluster, made under the field manager `kubenest-apiserver` with the caller recorded in the
//!   `kubenest.io/actor` annotation (the controllers put that name in the history). kubectl and
//!   REST see the same objects; the controllers do the rest.
//! - History (deployments, addon revisions) is read from PostgreSQL; users, password hashes
//!   (argon2id), refresh-token families, failed logins and the event log live there too.
//! - No request state in memory: any replica answers any request the same way. The id index
//!   ([`k8s::Index`]), the live event fan-out ([`events`]) and the mirror of the Apps the
//!   fence check counts over ([`mirror`]) are caches that every replica
//!   rebuilds from the management cluster and PostgreSQL.
//! - Authorization ([`authz`]) reads the members of Organizations, Clusters and Projects; an
//!   object the caller has no role on answers 404, a role too weak 403.
//! - Component secrets are fail-closed ([`secrets`]): sent through the hub to the agent, never
//!   stored, 2xx only once the agent confirms.
//! - It is also the door for everyone else: its admission webhooks ([`admission`]) apply the
//!   same rules to kubectl and GitOps writes, stamp their true actor and audit them; REST
//!   requests are audited by [`audit`]. Objects kept in Git answer 409 to REST changes
//!   ([`routes::not_in_git`]).
//! - Errors have one shape ([`error`]); the OpenAPI document is generated from the routes and
//!   their types (`GET /api/v1/openapi.json`, committed as `apiserver/openapi.json`).

pub mod admission;
pub mod args;
pub mod audit;
pub mod auth;
pub mod authz;
pub mod charts;
pub mod client_address;
pub mod console;
pub mod dry_run;
pub mod error;
pub mod events;
pub mod extract;
pub mod k8s;
pub mod limits;
pub mod logs;
pub mod metrics;
pub mod mirror;
pub mod model;
pub mod objects;
pub mod parameters;
pub mod reference;
pub mod reply;
pub mod routes;
pub mod run;
pub mod secrets;
mod serve;
pub mod state;

use std::sync::Arc;

use aide::axum::ApiRouter;
use aide::axum::routing::{delete, get, get_with, post, post_with, put, put_with};
use aide::openapi::{Info, OpenApi, SecurityScheme};
use axum::extract::DefaultBodyLimit;
use axum::http::{HeaderName, HeaderValue, Request, header};
use axum::response::IntoResponse;
use axum::{Json, Router};
use tower_http::request_id::{MakeRequestUuid, PropagateRequestIdLayer, SetRequestIdLayer};
use tower_http::set_header::SetResponseHeaderLayer;
use tower_http::trace::TraceLayer;

use crate::routes::{
    addons, alerts, apps, audit as audit_log, clusters, fences, ingress_ca, orgs, projects,
    registry, session, stream, templates, users,
};
use crate::state::AppState;

pub use serve::{Tls, serve, serve_admission, serve_tls};

/// Largest request body accepted (an App with 64 components and Helm values fits easily).
pub const MAX_BODY_BYTES: usize = 1024 * 1024;
pub(crate) const REQUEST_ID: HeaderName = HeaderName::from_static("x-request-id");

/// Every route, documented.
fn api_routes() -> ApiRouter<AppState> {
    ApiRouter::new()
        .api_route(
            "/api/v1/login",
            post_with(session::login, |op| {
                op.summary("Log in")
                    .response::<200, Json<session::TokenResponse>>()
            }),
        )
        .api_route(
            "/api/v1/refresh",
            post_with(session::refresh, |op| {
                op.summary("Rotate the refresh cookie for a new access token")
                    .response::<200, Json<session::TokenResponse>>()
            }),
        )
        .api_route(
            "/api/v1/logout",
            post_with(session::logout, |op| {
                op.summary("Log out").response::<204, ()>()
            }),
        )
        .api_route("/api/v1/me", get(session::me))
        .api_route(
            "/api/v1/users",
            get(session::list_users).post(session::create_user),
        )
        .api_route("/api/v1/users/{username}", delete(users::delete_user))
        .api_route("/api/v1/users/{username}/disable", post(users::disable))
        .api_route("/api/v1/users/{username}/enable", post(users::enable))
        .api_route(
            "/api/v1/users/{username}/password",
            put(session::set_password),
        )
        .api_route("/api/v1/orgs", get(orgs::list).post(orgs::create))
        .api_route(
            "/api/v1/orgs/{org}",
            get(orgs::get).patch(orgs::patch).delete(orgs::delete),
        )
        .api_route(
            "/api/v1/orgs/{org}/members",
            get(orgs::members).put(orgs::put_member),
        )
        .api_route(
            "/api/v1/orgs/{org}/members/{user}",
            delete(orgs::delete_member),
        )
        .api_route(
            "/api/v1/orgs/{org}/clusters",
            get(clusters::list).post(clusters::create),
        )
        .api_route(
            "/api/v1/orgs/{org}/projects",
            get(projects::list).post(projects::create),
        )
        .api_route(
            "/api/v1/orgs/{org}/usage",
            get_with(fences::org_usage, |op| {
                op.summary("What the organization's projects use, in all, per cluster and per project, against its budgets")
                    .response::<200, Json<fences::OrgUsageResponse>>()
            }),
        )
        .api_route(
            "/api/v1/orgs/{org}/alerts",
            get_with(alerts::list, |op| {
                op.summary("Alerts you may see: silent clusters, Apps past their deadline")
                    .response::<200, Json<Vec<alerts::AlertResponse>>>()
            }),
        )
        .api_route(
            "/api/v1/orgs/{org}/audit",
            get_with(audit_log::list, |op| {
                op.summary("The audit log: every mutation by REST, kubectl and GitOps (admins)")
                    .response::<200, Json<audit_log::AuditPage>>()
            }),
        )
        .api_route(
            "/api/v1/orgs/{org}/alerts/{id}/ack",
            post_with(alerts::acknowledge, |op| {
                op.summary("Acknowledge an alert")
                    .response::<200, Json<alerts::AlertResponse>>()
            }),
        )
        .api_route(
            "/api/v1/clusters/{id}",
            get(clusters::get).delete(clusters::delete),
        )
        .api_route(
            "/api/v1/clusters/{id}/rotate-token",
            post(clusters::rotate_token),
        )
        .api_route("/api/v1/clusters/{id}/scale", post(clusters::scale))
        .api_route(
            "/api/v1/clusters/{id}/budget",
            put_with(fences::put_cluster_budget, |op| {
                op.summary("Set the CPU and memory requests the cluster's projects may hold in all (organization admins); `{}` removes it")
                    .response::<200, Json<Option<fences::BudgetBody>>>()
            }),
        )
        .api_route("/api/v1/clusters/{id}/members", put(clusters::put_member))
        .api_route(
            "/api/v1/clusters/{id}/members/{user}",
            delete(clusters::delete_member),
        )
        .api_route(
            "/api/v1/projects/{id}",
            get(projects::get).delete(projects::delete),
        )
        .api_route("/api/v1/projects/{id}/members", put(projects::put_member))
        .api_route(
            "/api/v1/projects/{id}/fences",
            put_with(fences::put_project_fences, |op| {
                op.summary("Set the project's quota, default limits and network isolation (organization admins)")
                    .description(
                        "Replaces all three: absent parts mean no quota, no defaults, isolated. \
                         The agent keeps them as a ResourceQuota, a LimitRange and a \
                         NetworkPolicy in the project's namespace and puts them back when \
                         they are changed there.",
                    )
                    .response::<200, Json<fences::ProjectUsageResponse>>()
            }),
        )
        .api_route(
            "/api/v1/projects/{id}/usage",
            get_with(fences::project_usage, |op| {
                op.summary("What the project uses against its quota")
                    .response::<200, Json<fences::ProjectUsageResponse>>()
            }),
        )
        .api_route(
            "/api/v1/projects/{id}/registry-credentials",
            put(registry::put_registry_credentials).delete(registry::delete_registry_credentials),
        )
        .api_route(
            "/api/v1/projects/{id}/ingress-ca",
            get_with(ingress_ca::get, |op| {
                op.summary("The project's ingress CA certificate (never its key)")
                    .response::<200, Json<ingress_ca::IngressCaResponse>>()
            })
            .put_with(ingress_ca::put, |op| {
                op.summary("Set the project's ingress CA (admins)")
                    .description(
                        "The CA from which the agent issues a certificate for every ingress \
                         with `tls` and no `tls_secret`, kept as the `kubernetes.io/tls` Secret \
                         `kubenest-ingress-ca` in the project's namespace (which no chart's \
                         pods may read). The certificate must be one PEM `CERTIFICATE` with \
                         basicConstraints CA:TRUE, valid now; the key one unencrypted PEM \
                         private key matching it; each at most 16 KiB, refused by field \
                         otherwise. Fail-closed through the hub: 2xx only once the agent \
                         stored it; the key is never stored or echoed by kubenest.",
                    )
                    .response::<200, Json<ingress_ca::IngressCaResponse>>()
            })
            .delete_with(ingress_ca::delete, |op| {
                op.summary("Remove the project's ingress CA (admins)")
                    .description(
                        "409 `ingress_ca_in_use` naming the Apps whose ingresses still take \
                         their certificates from it (`tls` without `tls_secret`); otherwise \
                         the Secret is removed from the cluster (fail-closed), then from the \
                         project.",
                    )
                    .response::<200, Json<ingress_ca::IngressCaRemoved>>()
            }),
        )
        .api_route(
            "/api/v1/projects/{id}/members/{user}",
            delete(projects::delete_member),
        )
        .api_route("/api/v1/apps", get(apps::list).post(apps::create))
        .api_route(
            "/api/v1/apps/{id}",
            get(apps::get).patch(apps::patch).delete(apps::delete),
        )
        .api_route("/api/v1/apps/{id}/pause", post(apps::pause))
        .api_route("/api/v1/apps/{id}/resume", post(apps::resume))
        .api_route("/api/v1/apps/{id}/redeploy", post(apps::redeploy))
        .api_route("/api/v1/apps/{id}/rollback", post(apps::rollback))
        .api_route("/api/v1/apps/{id}/deployments", get(apps::deployments))
        .api_route(
            "/api/v1/apps/{id}/components/{component}/secret",
            put(apps::put_secret).delete(apps::delete_secret),
        )
        .api_route(
            "/api/v1/apps/{id}/components/{component}/git-credentials",
            put(apps::put_git_credentials).delete(apps::delete_git_credentials),
        )
        .api_route(
            "/api/v1/apps/{id}/logs",
            get_with(apps::logs, |op| {
                op.summary("Container logs of an App component")
                    .description(
                        "Log lines of every container of the component's pods, each tagged with \
                         its pod and container, as Server-Sent Events (`event: log`, data \
                         `{timestamp, pod, container, line}`; a last `event: end` with data \
                         `{reason, message}` says why the stream stopped) or, with \
                         `Accept: text/plain`, as chunked text lines `pod/container line`. \
                         Fail-closed through the hub: 503 when the cluster's agent is not \
                         connected, 409 when the App is not deployed, 504 without an answer \
                         in time. A reader that does not keep up is cut (reason `limit`).",
                    )
                    .response::<200, String>()
            }),
        )
        .api_route(
            "/api/v1/apps/{id}/objects",
            get_with(apps::objects, |op| {
                op.summary("The App's live objects on its cluster")
                    .description(
                        "Every object the App has in its project's namespace now — what the \
                         agent applied (workloads, Services, Ingresses, claims, Jobs, addons' \
                         chart objects) and what those own (ReplicaSets, Pods) — as a flat \
                         list in which each object names its owners' uids, with a status \
                         summary. Never Secrets. Asked of the cluster's agent through the hub: \
                         409 when the App is not deployed, 503 when the agent is not \
                         connected, 504 without an answer within 5 seconds.",
                    )
                    .response::<200, Json<apps::AppObjects>>()
            }),
        )
        .api_route("/api/v1/addon-definitions", get(addons::definitions))
        .api_route("/api/v1/addon-definitions/{name}", get(addons::definition))
        .api_route(
            "/api/v1/addon-instances",
            get(addons::list).post(addons::create),
        )
        .api_route(
            "/api/v1/addon-instances/{id}",
            get(addons::get).patch(addons::patch).delete(addons::delete),
        )
        .api_route(
            "/api/v1/addon-instances/{id}/rollback",
            post(addons::rollback),
        )
        .api_route(
            "/api/v1/templates",
            get(templates::list).post(templates::create),
        )
        .api_route("/api/v1/templates/from-app", post(templates::from_app))
        .api_route("/api/v1/templates/import", post(templates::import))
        .api_route("/api/v1/templates/from-chart", post(templates::from_chart))
        .api_route(
            "/api/v1/templates/{id}",
            get(templates::get)
                .patch(templates::patch)
                .delete(templates::delete),
        )
        .api_route("/api/v1/templates/{id}/export", get(templates::export))
        .api_route("/api/v1/templates/{id}/deploy", post(templates::deploy))
        .api_route(
            "/api/v1/events/stream",
            get_with(stream::stream, |op| {
                op.summary("Live events (Server-Sent Events)")
                    .description(
                        "Phase changes, deployments, drift, cluster connectivity and alerts \
                         (`alert`, opened and resolved) you may see, as `text/event-stream`; \
                         resume with `Last-Event-ID`. A \
                         `: heartbeat` comment comes every 15 s.",
                    )
                    .response::<200, String>()
            }),
        )
}

/// The document's header, before the routes fill in its paths.
fn document() -> OpenApi {
    OpenApi {
        info: Info {
            title: "kubenest API".into(),
            version: env!("CARGO_PKG_VERSION").into(),
            description: Some(
                "Organizations, clusters, projects, apps, addons and stack templates on many \
                 Kubernetes clusters. Errors are RFC 9457 problems \
                 (`application/problem+json`: `type`, `title`, `status`, `detail`, `instance` = \
                 the request id) with the extension members `code` and `field`; a 409 for an \
                 App or addon that does not converge also lists `ways_out`, the requests that \
                 remain allowed."
                    .into(),
            ),
            ..Info::default()
        },
        ..OpenApi::default()
    }
}

/// The OpenAPI document of the API (what `/api/v1/openapi.json` serves).
pub fn openapi() -> OpenApi {
    let mut api = document();
    let _ = api_routes().finish_api_with(&mut api, with_security);
    dry_run::declare(&mut api);
    api
}

fn with_security(
    api: aide::transform::TransformOpenApi<'_>,
) -> aide::transform::TransformOpenApi<'_> {
    api.security_scheme(
        "bearer",
        SecurityScheme::Http {
            scheme: "bearer".into(),
            bearer_format: Some("JWT".into()),
            description: Some("An access token from POST /api/v1/login".into()),
            extensions: Default::default(),
        },
    )
}

/// The application: routes, limits, request ids and tracing; and the web console when its
/// assets are configured.
pub fn app(state: AppState) -> Router {
    // One pass over the routes gives both the router and its document.
    let mut api = document();
    let routes = api_routes().finish_api_with(&mut api, with_security);
    dry_run::declare(&mut api);
    let declared = Arc::new(parameters::Declared::of(&api));
    let routes = routes
        .route_layer(axum::middleware::from_fn_with_state(
            declared,
            parameters::refuse_unknown,
        ))
        // The audit log runs inside the dry run, so it knows one from the task-local.
        .route_layer(axum::middleware::from_fn_with_state(
            state.clone(),
            audit::record,
        ))
        .route_layer(axum::middleware::from_fn(dry_run::layer));
    let routes = metrics::metrics().http.instrument(routes);
    // A known path with a method it does not take: the API's error shape, not an empty 405.
    let routes = routes.method_not_allowed_fallback(
        |method: axum::http::Method, uri: axum::http::Uri| async move {
            error::ApiError::method_not_allowed(format!(
                "{method} is not a method of {} (the Allow header lists those that are)",
                uri.path()
            ))
            .into_response()
        },
    );
    let document = Arc::new(api);
    let routes = match &state.settings().console_dir {
        Some(dir) => routes.fallback_service(console::router(dir)),
        None => routes.fallback(|| async { error::ApiError::not_found("route").into_response() }),
    };
    routes
        .route(
            "/api/v1/openapi.json",
            axum::routing::get(move || {
                let document = document.clone();
                async move { Json(document.as_ref().clone()).into_response() }
            }),
        )
        .route(reference::PATH, axum::routing::get(reference::page))
        .route("/healthz", axum::routing::get(|| async { "ok" }))
        .layer(DefaultBodyLimit::max(MAX_BODY_BYTES))
        .layer(axum::middleware::from_fn(error::with_instance))
        .layer(
            TraceLayer::new_for_http().make_span_with(|request: &Request<_>| {
                let id = request
                    .headers()
                    .get(REQUEST_ID)
                    .and_then(|v| v.to_str().ok())
                    .unwrap_or_default();
                let span = tracing::info_span!("request", method = %request.method(), path = %request.uri().path(), request_id = %id);
                // A caller that traces its own requests makes this request part of its trace.
                if let Some(parent) = request
                    .headers()
                    .get(kubenest_runtime::traces::TRACEPARENT)
                    .and_then(|v| v.to_str().ok())
                {
                    kubenest_runtime::traces::continue_from(&span, parent);
                }
                span
            }),
        )
        .layer(PropagateRequestIdLayer::new(REQUEST_ID))
        .layer(SetRequestIdLayer::new(REQUEST_ID, MakeRequestUuid))
        // Outermost, so every answer carries them: API, console, errors, streams, unknown paths.
        .layer(SetResponseHeaderLayer::overriding(
            header::STRICT_TRANSPORT_SECURITY,
            HeaderValue::from_static(HSTS),
        ))
        .layer(SetResponseHeaderLayer::overriding(
            header::X_CONTENT_TYPE_OPTIONS,
            HeaderValue::from_static("nosniff"),
        ))
        .with_state(state)
}

/// Browsers that reached the API over HTTPS keep to HTTPS for a year, subdomains included.
const HSTS: &str = "max-age=31536000; includeSubDomains";
