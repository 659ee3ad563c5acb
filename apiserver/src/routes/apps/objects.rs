//! `GET /api/v1/apps/{id}/objects`: the App's live objects on its cluster, asked of its agent
//! through the hub (`objects.request` → `objects.snapshot`), fail-closed: no connected agent
//! is a 503 and no answer within [`ANSWER_TIMEOUT`] a 504, never a hang and never a stale
//! copy. The agent picks the namespace from the App it holds and never lists Secrets.

pub use kubenest_api::apps::{AppObjects, LiveObjectView, ObjectStatusView};

use std::time::Duration;

use axum::Json;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use kube::ResourceExt;
use kubenest_contracts::{self as wire, Envelope, ObjectsRequest};

use super::load;
use crate::authz::{Caller, Need};
use crate::error::{ApiError, ApiResult};
use crate::k8s;
use crate::routes::IdPath;
use crate::state::AppState;

/// How long the cluster has to answer, from the request to its snapshot.
pub const ANSWER_TIMEOUT: Duration = Duration::from_secs(5);

/// A live object the agent reported, as the API answers it.
pub fn live_object_view(o: wire::LiveObject) -> LiveObjectView {
    LiveObjectView {
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
        objects: snapshot.objects.into_iter().map(live_object_view).collect(),
        truncated: snapshot.truncated,
        taken_at: snapshot.taken_at,
    }))
}
