//! What platform administrators do to accounts beyond creating them: delete a user (with every
//! membership they hold, at every scope, and every session) and disable or enable one.
//!
//! Memberships bind a user's immutable id, so even a membership this sweep missed (an object
//! written concurrently) binds nobody once the user is gone: a user created again under the
//! same name is another id.

use axum::Json;
use axum::extract::{Path, State};
use axum::response::NoContent;
use kube::api::Api;
use kube::{Resource, ResourceExt};
use kubenest_crds::cluster::Cluster;
use kubenest_crds::common::Member;
use kubenest_crds::organization::Organization;
use kubenest_crds::project::Project;
use serde::Serialize;
use serde::de::DeserializeOwned;

use super::post_params;
use super::session::{UserPath, UserView, is_username};
use crate::authz::Caller;
use crate::error::{ApiError, ApiResult};
use crate::state::AppState;

fn require_platform_admin(caller: &Caller) -> ApiResult<()> {
    if caller.platform_admin {
        Ok(())
    } else {
        Err(ApiError::forbidden(
            "only platform administrators manage users",
        ))
    }
}

/// Removes every membership of `user_id` from the objects `api` lists; how many objects changed.
/// `at` gives the API of one object's namespace.
async fn sweep<K>(
    api: Api<K>,
    at: impl Fn(Option<String>) -> Api<K>,
    user_id: &str,
    members: impl Fn(&mut K) -> &mut Vec<Member>,
) -> ApiResult<usize>
where
    K: Resource<DynamicType = ()> + Clone + DeserializeOwned + Serialize + std::fmt::Debug,
{
    let holds = |m: &Member| m.user_id.as_deref() == Some(user_id);
    let mut changed = 0;
    for mut object in api.list(&Default::default()).await?.items {
        // Retry on a concurrent change, from a fresh copy.
        for _ in 0..5 {
            if !members(&mut object).iter().any(holds) {
                break;
            }
            members(&mut object).retain(|m| !holds(m));
            let scoped = at(object.namespace());
            match scoped
                .replace(&object.name_any(), &post_params(), &object)
                .await
            {
                Ok(_) => {
                    changed += 1;
                    break;
                }
                Err(kube::Error::Api(s)) if s.code == 409 => {
                    object = scoped.get(&object.name_any()).await?;
                }
                Err(kube::Error::Api(s)) if s.code == 404 => break,
                Err(other) => return Err(other.into()),
            }
        }
    }
    Ok(changed)
}

/// Deletes a user, every membership they hold and every session (platform administrators
/// only). Their access tokens are refused from the next request on.
pub async fn delete_user(
    State(state): State<AppState>,
    caller: Caller,
    Path(path): Path<UserPath>,
) -> ApiResult<NoContent> {
    require_platform_admin(&caller)?;
    if !is_username(&path.username) {
        return Err(ApiError::not_found("user"));
    }
    if path.username == caller.user {
        return Err(ApiError::conflict("self", "you cannot delete yourself"));
    }
    // The row first: from then on no token of theirs is accepted, whatever the sweep meets.
    let user = state
        .accounts()
        .delete_user(&path.username)
        .await?
        .ok_or_else(|| ApiError::not_found("user"))?;
    let id = user.id.to_string();
    let client = state.client().clone();
    let in_ns = |ns: Option<String>| ns.unwrap_or_default();
    let orgs = sweep(
        Api::<Organization>::all(client.clone()),
        |_| Api::all(client.clone()),
        &id,
        |o| &mut o.spec.members,
    )
    .await?;
    let clusters = sweep(
        Api::<Cluster>::all(client.clone()),
        |ns| Api::namespaced(client.clone(), &in_ns(ns)),
        &id,
        |c| &mut c.spec.members,
    )
    .await?;
    let projects = sweep(
        Api::<Project>::all(client.clone()),
        |ns| Api::namespaced(client.clone(), &in_ns(ns)),
        &id,
        |p| &mut p.spec.members,
    )
    .await?;
    tracing::info!(user = %path.username, %id, orgs, clusters, projects, "user deleted with their memberships");
    Ok(NoContent)
}

async fn set_disabled(
    state: &AppState,
    caller: &Caller,
    username: &str,
    disabled: bool,
) -> ApiResult<Json<UserView>> {
    require_platform_admin(caller)?;
    if !is_username(username) {
        return Err(ApiError::not_found("user"));
    }
    if disabled && username == caller.user {
        return Err(ApiError::conflict("self", "you cannot disable yourself"));
    }
    if !state.accounts().set_disabled(username, disabled).await? {
        return Err(ApiError::not_found("user"));
    }
    let user = state
        .accounts()
        .user(username)
        .await?
        .ok_or_else(|| ApiError::not_found("user"))?;
    Ok(Json(super::session::user_view(user)))
}

/// Disables a user: they cannot log in, their sessions end and their access tokens are
/// refused; their memberships stay (platform administrators only).
pub async fn disable(
    State(state): State<AppState>,
    caller: Caller,
    Path(path): Path<UserPath>,
) -> ApiResult<Json<UserView>> {
    set_disabled(&state, &caller, &path.username, true).await
}

/// Enables a disabled user again (platform administrators only).
pub async fn enable(
    State(state): State<AppState>,
    caller: Caller,
    Path(path): Path<UserPath>,
) -> ApiResult<Json<UserView>> {
    set_disabled(&state, &caller, &path.username, false).await
}
