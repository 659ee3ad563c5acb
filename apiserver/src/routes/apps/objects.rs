//! `GET /api/v1/apps/{id}/objects`: the App's live objects on its cluster, asked of its agent
//! through the hub (`objects.request` → `objects.snapshot`), fail-closed: no connected agent
//! is a 503 and no answer within [`ANSWER_TIMEOUT`] a 504, never a hang and never a stale
//! copy. The agent picks the namespace from the App it holds and never lists Secrets.

use std::time::Duration;

use axum::Json;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use chrono::{DateTime, Utc};
use kube::ResourceExt;
use kubenest_contracts::{self as wire, Envelope, ObjectsRequest};
use schemars::JsonSchema;
use serde::Serialize;

use super::load;
use crate::authz::{Caller, Need};
use crate::error::{ApiError, ApiResult};
use crate::k8s;
use crate::routes::IdPath;
use crate::state::AppState;

/// How long the cluster has to answer, from the request to its snapshot.
pub const ANSWER_TIMEOUT: Duration = Duration::from_secs(5);

/// An App's live objects, flat: each names its owners, whose uids are in the same list.
#[derive(Debug, Serialize, JsonSchema)]
pub struct AppObjects {
    pub objects: Vec<LiveObjectView>,
    /// The cluster had more objects than one answer holds; the rest were left out.
    pub truncated: bool,
    /// When the cluster listed them.
    pub taken_at: DateTime<Utc>,
}

/// One object of the App on its cluster.
#[derive(Debug, Serialize, JsonSchema)]
pub struct LiveObjectView {
    /// `Deployment`, `StatefulSet`, `DaemonSet`, `ReplicaSet`, `Pod`, `Service`, `Ingress`,
    /// `PersistentVolumeClaim`, `Job` or `CronJob`.
    pub kind: String,
    pub name: String,
    pub uid: String,
    /// The uids of its owners in this list (its parents in the tree); empty for a root.
    pub owners: Vec<String>,
    /// The App component it belongs to, when it says.
    pub component: Option<String>,
    pub status: ObjectStatusView,
    pub created: Option<DateTime<Utc>>,
}

/// How an object is doing.
#[derive(Debug, Serialize, JsonSchema)]
pub struct ObjectStatusView {
    /// `ready`, `progressing`, `failed` or `unknown`.
    pub health: wire::Health,
    /// The kind's own phase (a Pod's `Running`, a claim's `Bound`, a Service's type).
    pub phase: Option<String>,
    /// Ready replicas (containers, for a Pod).
    pub ready: Option<u32>,
    /// Desired replicas (containers, for a Pod).
    pub desired: Option<u32>,
    /// Container restarts, for a Pod.
    pub restarts: Option<u32>,
    /// Why it is not ready, e.g. `CrashLoopBackOff`.
    pub reason: Option<String>,
    pub message: Option<String>,
}

impl From<wire::LiveObject> for LiveObjectView {
    fn from(o: wire::LiveObject) -> Self {
        Self {
            kind: o.kind,
            name: o.name,
            uid: o.uid,
            owners: o.owners,
            component: o.component,
            status: ObjectStatusView {
                health: o.status.health,
                phase: o.status.phase,
                ready: o.status.ready,
                desired: o.status.desired,
                restarts: o.status.restarts,
                reason: o.status.reason,
                message: o.status.message,
            },
            created: o.created,
        }
    }
}

/// The App's objects (any role that may read the App).
pub async fn objects(
    State(state): State<AppState>,
    caller: Caller,
    Path(path): Path<IdPath>,
) -> ApiResult<Json<AppObjects>> {
    let scoped = load(&state, &caller, &path.id).await?;
    scoped.require(Need::Read, "app")?;
    let app = &scoped.object;
    super::require_deployed(app, "it has no objects there")?;
    let cluster_id = scoped
        .cluster
        .as_ref()
        .and_then(|c| c.status.as_ref()?.cluster_id.clone())
        .ok_or_else(|| {
            ApiError::unavailable("cluster_unreachable", "the app's cluster is not registered")
        })?;
    let request_id = uuid::Uuid::new_v4().to_string();
    let command = Envelope::new(ObjectsRequest {
        request_id: wire::Id::new(&request_id),
        app_id: wire::Id::new(k8s::uid(app)),
    })
    .for_cluster(
        wire::Id::new(cluster_id),
        wire::Id::new(scoped.org.name_any()),
    );
    let secrets = state.secrets();
    // Registered before the request goes out, so the answer cannot arrive first.
    let mut waiting = secrets.objects().open(&request_id).ok_or_else(|| {
        ApiError::too_many(
            "too many objects requests are waiting for their clusters; try again shortly",
            2,
        )
    })?;
    let asked = async {
        secrets.route(command).await?;
        (&mut waiting.answer)
            .await
            .map_err(|_| ApiError::internal("the objects request was forgotten before its answer"))
    };
    let snapshot = tokio::time::timeout(ANSWER_TIMEOUT, asked)
        .await
        .map_err(|_| ApiError {
            status: StatusCode::GATEWAY_TIMEOUT,
            ..ApiError::unavailable(
                "cluster_not_answering",
                format!(
                    "the cluster's agent did not list the App's objects within {} seconds; it \
                     may be disconnected or busy",
                    ANSWER_TIMEOUT.as_secs()
                ),
            )
        })??;
    if let Some(refused) = snapshot.refused {
        return Err(ApiError::conflict(
            "objects_refused",
            format!(
                "the cluster did not list the App's objects: {}",
                refused.message
            ),
        ));
    }
    Ok(Json(AppObjects {
        objects: snapshot.objects.into_iter().map(Into::into).collect(),
        truncated: snapshot.truncated,
        taken_at: snapshot.taken_at,
    }))
}
