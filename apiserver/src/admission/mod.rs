//! The admission webhooks: the same rules, and a true actor, for every writer of the management
//! cluster.
//!
//! The REST handlers check an object before they store it; a kubectl or GitOps writer reaches
//! the custom resources directly. These two webhooks, which the kube-apiserver calls for every
//! write of a kubenest resource by anyone other than this API and the controllers, close that
//! gap:
//!
//! - `POST /admission/mutate` stamps who really acted: `kubenest.io/actor` (the kubenest user's
//!   name when the requester is one, else `kubernetes:{user}`) and `kubenest.io/actor-path`
//!   (`kubectl` or `gitops`) from the request's authenticated identity, overwriting whatever
//!   the writer put there. The controllers put that actor in the history. It also keeps a
//!   Cluster's `spec.tokenVersion` from going down: a manifest kept in Git still says the
//!   version it was written with after a rotation, and stays appliable.
//! - `POST /admission/validate` applies the rules of the REST handlers ([`rules`]) to the
//!   object as written, refusing with the same reason and the same field (in the resource's own
//!   spelling, `spec.components[0].workload.image`), and writes one audit entry per mutation
//!   (creates, spec changes, requests by annotation, deletes).
//!
//! Which identities skip the webhooks is decided in their registration ([`register`]), by the
//! API server's `matchConditions`: this server's own identity (it checked and stamped its writes
//! itself) and the controllers'. Their writes therefore never wait on this server.
//!
//! A review is believed because of who sent it: with `--admission-client-ca` the listener
//! takes only the kube-apiserver's client certificate (its `--admission-control-config-file`),
//! so nobody else can post a review and forge an audit row; and the actor is always the
//! review's `userInfo`, never the object's annotations.

pub mod register;
pub mod rules;

use std::collections::BTreeMap;
use std::sync::Arc;

use axum::extract::State;
use axum::routing::post;
use axum::{Json, Router};
use kube::core::admission::{AdmissionRequest, AdmissionResponse, AdmissionReview, Operation};
use kube::core::response::{StatusCause, StatusDetails};
use kube::core::{DynamicObject, Status};
use kubenest_crds::names::annotations;
use kubenest_store::{AuditPath, NewAuditEntry, Outcome};
use serde_json::{Value, json};

use crate::error::ApiError;
use crate::k8s;
use crate::state::AppState;

pub use kubenest_domain::gitops::{MANAGED_BY_LABEL, MANAGERS as GITOPS_MANAGERS};

/// What the webhooks share: the API's state and the identities they trust.
#[derive(Clone)]
pub struct Admission {
    state: AppState,
    trusted: Arc<Vec<String>>,
}

impl std::fmt::Debug for Admission {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Admission")
            .field("trusted", &self.trusted)
            .finish_non_exhaustive()
    }
}

impl Admission {
    /// `trusted`: Kubernetes user names whose writes are taken as they are (the API server's
    /// own and the controllers'); also excluded in the registration, this is the second line.
    pub fn new(state: AppState, trusted: Vec<String>) -> Self {
        Self {
            state,
            trusted: Arc::new(trusted),
        }
    }

    fn trusts(&self, user: Option<&str>) -> bool {
        user.is_some_and(|u| self.trusted.iter().any(|t| t == u))
    }
}

/// The webhooks' routes.
pub fn router(admission: Admission) -> Router {
    Router::new()
        .route("/admission/mutate", post(mutate))
        .route("/admission/validate", post(validate))
        .with_state(admission)
}

type Review = AdmissionReview<DynamicObject>;

/// The review's request, or the answer to a review without one.
fn request(review: Review) -> Result<AdmissionRequest<DynamicObject>, Box<Json<Review>>> {
    review
        .try_into()
        .map_err(|e: kube::core::admission::ConvertAdmissionReviewError| {
            Box::new(Json(AdmissionResponse::invalid(e).into_review()))
        })
}

/// Who made a request, as the history and the audit log name them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Actor {
    pub name: String,
    /// The kubenest user's id, when the requester is one.
    pub id: Option<String>,
    pub path: AuditPath,
}

/// Names the requester: a kubenest user (`kubenest:{id}`) by name, anyone else as
/// `kubernetes:{user}`; the path is `gitops` for a GitOps engine's field manager or an object
/// labelled `kubenest.io/managed-by: gitops`.
async fn actor(state: &AppState, request: &AdmissionRequest<DynamicObject>) -> Actor {
    let user = request.user_info.username.clone().unwrap_or_default();
    let manager = request
        .options
        .as_ref()
        .and_then(|o| o.0.get("fieldManager"))
        .and_then(Value::as_str)
        .unwrap_or_default();
    let labelled = request
        .object
        .as_ref()
        .or(request.old_object.as_ref())
        .and_then(|o| o.metadata.labels.as_ref())
        .and_then(|l| l.get(MANAGED_BY_LABEL))
        .is_some_and(|v| v == "gitops");
    let path = if labelled || GITOPS_MANAGERS.contains(&manager) {
        AuditPath::Gitops
    } else {
        AuditPath::Kubectl
    };
    let kubenest_user = user
        .strip_prefix(kubenest_crds::common::KUBERNETES_USER_PREFIX)
        .and_then(|id| uuid::Uuid::parse_str(id).ok());
    if let Some(id) = kubenest_user {
        match state.accounts().user_by_id(id).await {
            Ok(Some(found)) => {
                return Actor {
                    name: found.username,
                    id: Some(id.to_string()),
                    path,
                };
            }
            Ok(None) => {}
            Err(error) => tracing::warn!(%error, "admission: user lookup failed"),
        }
    }
    Actor {
        name: format!("kubernetes:{user}"),
        id: None,
        path,
    }
}

/// Stamps the actor on every create and update by an untrusted writer.
async fn mutate(State(admission): State<Admission>, Json(review): Json<Review>) -> Json<Review> {
    let request = match request(review) {
        Ok(r) => r,
        Err(answer) => return *answer,
    };
    let response = AdmissionResponse::from(&request);
    let writes = matches!(request.operation, Operation::Create | Operation::Update);
    let Some(object) = request.object.as_ref().filter(|_| writes) else {
        return Json(response.into_review());
    };
    if admission.trusts(request.user_info.username.as_deref()) {
        return Json(response.into_review());
    }
    let actor = actor(&admission.state, &request).await;
    let stamp = json!({
        annotations::ACTOR: actor.name,
        annotations::ACTOR_PATH: actor.path.as_str(),
    });
    let mut ops = if object.metadata.annotations.is_some() {
        vec![
            json!({"op": "add", "path": pointer(annotations::ACTOR), "value": stamp[annotations::ACTOR]}),
            json!({"op": "add", "path": pointer(annotations::ACTOR_PATH), "value": stamp[annotations::ACTOR_PATH]}),
        ]
    } else {
        vec![json!({"op": "add", "path": "/metadata/annotations", "value": stamp})]
    };
    if let Some(kept) = kept_token_version(&request) {
        ops.push(json!({"op": "add", "path": "/spec/tokenVersion", "value": kept}));
    }
    let patched = serde_json::from_value::<json_patch::Patch>(Value::Array(ops))
        .map_err(|e| e.to_string())
        .and_then(|patch| {
            response
                .clone()
                .with_patch(patch)
                .map_err(|e| e.to_string())
        });
    match patched {
        Ok(response) => Json(response.into_review()),
        Err(error) => Json(
            response
                .deny(format!("kubenest admission: {error}"))
                .into_review(),
        ),
    }
}

/// A Cluster's token version never goes down (rotations raise it; the hubs' revocation floor
/// follows it): when a writer sends a lower one, or none, the current one is kept.
fn kept_token_version(request: &AdmissionRequest<DynamicObject>) -> Option<u64> {
    if request.resource.resource != "clusters" || request.operation != Operation::Update {
        return None;
    }
    let version = |o: &DynamicObject| o.data["spec"]["tokenVersion"].as_u64();
    let old = version(request.old_object.as_ref()?)?;
    let new = request.object.as_ref().and_then(version);
    new.is_none_or(|new| new < old).then_some(old)
}

/// The JSON pointer of an annotation.
fn pointer(annotation: &str) -> String {
    format!(
        "/metadata/annotations/{}",
        annotation.replace('~', "~0").replace('/', "~1")
    )
}

/// Whether a write changes what kubenest acts on: a create, a delete, a spec change, or a
/// change of kubenest's request annotations (rollback, redeploy). Metadata-only writes (labels,
/// finalizers, the garbage collector's) are neither checked nor audited.
fn is_mutation(request: &AdmissionRequest<DynamicObject>) -> bool {
    match request.operation {
        Operation::Create | Operation::Delete => true,
        Operation::Update => {
            let (Some(new), Some(old)) = (&request.object, &request.old_object) else {
                return true;
            };
            new.data.get("spec") != old.data.get("spec") || requests(new) != requests(old)
        }
        Operation::Connect => false,
    }
}

/// kubenest's request annotations on an object.
fn requests(object: &DynamicObject) -> BTreeMap<String, String> {
    object
        .metadata
        .annotations
        .iter()
        .flatten()
        .filter(|(k, _)| [annotations::ROLLBACK_TO, annotations::REDEPLOY].contains(&k.as_str()))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect()
}

/// Checks creates and updates with [`rules::check`] and audits every mutation.
async fn validate(State(admission): State<Admission>, Json(review): Json<Review>) -> Json<Review> {
    let request = match request(review) {
        Ok(r) => r,
        Err(answer) => return *answer,
    };
    let response = AdmissionResponse::from(&request);
    if admission.trusts(request.user_info.username.as_deref()) || !is_mutation(&request) {
        return Json(response.into_review());
    }
    let state = &admission.state;
    let verdict = match request.operation {
        Operation::Create | Operation::Update => rules::check(state, &request).await,
        Operation::Delete | Operation::Connect => Ok(()),
    };
    if !request.dry_run {
        audit(state, &request, verdict.as_ref().err()).await;
    }
    match verdict {
        Ok(()) => Json(response.into_review()),
        Err(error) => Json(refuse(response, &error).into_review()),
    }
}

/// The refusal as the Kubernetes client shows it: the API's code as the reason, the field
/// first in the message and as the cause.
fn refuse(mut response: AdmissionResponse, error: &ApiError) -> AdmissionResponse {
    let message = match &error.field {
        Some(field) => format!("{field}: {}", error.message),
        None => error.message.clone(),
    };
    let mut status = Status::failure(&message, error.code).with_code(error.status.as_u16());
    if let Some(field) = &error.field {
        status = status.with_details(StatusDetails {
            causes: vec![StatusCause {
                reason: error.code.to_owned(),
                message: error.message.clone(),
                field: field.clone(),
            }],
            name: String::new(),
            group: String::new(),
            kind: String::new(),
            uid: String::new(),
            retry_after_seconds: 0,
        });
    }
    response.allowed = false;
    response.result = status;
    response
}

/// Writes the audit entry of a kubectl or GitOps mutation; a failure is logged (the write is
/// the requester's and already decided).
async fn audit(
    state: &AppState,
    request: &AdmissionRequest<DynamicObject>,
    refused: Option<&ApiError>,
) {
    let namespace = request.namespace.clone().unwrap_or_default();
    let org = if request.resource.resource == "organizations" {
        request.name.clone()
    } else {
        k8s::org_name_of(&namespace).unwrap_or_default().to_owned()
    };
    // Always the request's authenticated user, never the object's actor annotation: a review
    // names only who the kube-apiserver says made the request (trusted identities, which may
    // act for a REST user and stamp that user, never reach this code).
    let actor = actor(state, request).await;
    let operation = match request.operation {
        Operation::Create => "create",
        Operation::Update => "update",
        Operation::Delete => "delete",
        Operation::Connect => "connect",
    };
    let status = refused.map_or(200, |e| e.status.as_u16());
    let entry = NewAuditEntry {
        org_id: org,
        actor: actor.name,
        actor_id: actor.id,
        action: format!("{}.{operation}", request.resource.resource),
        resource_kind: request.kind.kind.clone(),
        resource_name: request.name.clone(),
        path: actor.path,
        outcome: Outcome::of_status(status),
        status,
        details: json!({
            "namespace": namespace,
            "kubernetes_user": request.user_info.username,
            "reason": refused.map(|e| e.code),
            "message": refused.map(|e| match &e.field {
                Some(field) => format!("{field}: {}", e.message),
                None => e.message.clone(),
            }),
        }),
    };
    // The API server may call again for one request when it retries it (a write racing the
    // controllers'): the same entry within 2 s is that request.
    if let Err(error) = state.history().audit_once(&entry, 2000).await {
        tracing::error!(%error, "audit entry of an admission not written");
    }
}
