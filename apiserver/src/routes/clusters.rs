//! Clusters: registration (the connection token and the agent's install command), state and
//! capacity, token rotation, scaling, members and deletion.

pub use kubenest_api::clusters::{
    ClusterResponse, HealthView, NewClusterBody, RegistrationResponse, RotationResponse, ScaleBody,
};

use crate::reply::{Created, Removal};
use std::time::Duration;

use crate::extract::Query;
use axum::Json;
use axum::extract::{Path, State};
use k8s_openapi::api::core::v1::Secret;
use kube::ResourceExt;
use kube::api::{Api, Patch};
use kubenest_crds::cluster::{Cluster, ClusterSpec, Provider};
use kubenest_crds::common::Role;
use serde::Serialize;
use serde_json::json;

use super::removal::{DeleteQuery, RemovalResponse, force_cluster};
use super::{
    IdPath, MemberBody, MemberPath, MemberView, OrgPath, Scoped, actor_annotations, change_member,
    check_dns_label, org_view, patch_params, post_params,
};
use crate::authz::{self, Caller, Need};
use crate::error::{ApiError, ApiResult};
use crate::extract::Body;
use crate::k8s;
use crate::state::AppState;
use kubenest_contracts::{Floor, Id};

fn text<T: Serialize>(value: T) -> String {
    serde_json::to_value(value)
        .ok()
        .and_then(|v| v.as_str().map(str::to_owned))
        .unwrap_or_default()
}

/// The API shape of a cluster.
pub fn response(cluster: &Cluster) -> ClusterResponse {
    let status = cluster.status.clone().unwrap_or_default();
    let capacity = status.capacity.clone().unwrap_or_default();
    let namespace = cluster.namespace().unwrap_or_default();
    #[allow(clippy::cast_precision_loss)] // millicores fit an f64 exactly far beyond any cluster
    let cores = |millis: u64| millis as f64 / 1000.0;
    ClusterResponse {
        id: k8s::uid(cluster),
        name: cluster.name_any(),
        org: k8s::org_name_of(&namespace).unwrap_or_default().to_owned(),
        display_name: cluster.spec.display_name.clone(),
        state: text(status.state),
        provider: text(cluster.spec.provider),
        token_version: cluster.spec.token_version,
        desired_node_count: cluster.spec.desired_node_count,
        cpu_total: cores(capacity.cpu_total_millis),
        cpu_used: cores(capacity.cpu_used_millis),
        mem_total: capacity.mem_total_bytes,
        mem_used: capacity.mem_used_bytes,
        node_count: capacity.node_count,
        last_heartbeat: status.last_heartbeat,
        health: status
            .health
            .iter()
            .map(|h| HealthView {
                name: h.name.clone(),
                status: text(h.status),
                message: h.message.clone(),
                observed_at: h.observed_at.clone(),
            })
            .collect(),
        agent_version: status.agent_version,
        kubernetes_version: status.kubernetes_version,
        created_at: k8s::created(cluster),
        members: cluster
            .spec
            .members
            .iter()
            .map(super::member_view)
            .collect(),
    }
}

/// The agent's install command for a POSIX shell. The token goes in as a values file on
/// standard input (a quoted here-document, so the shell expands nothing in it): it never
/// appears in a process's arguments (`ps`) nor in the shell's history of the command line,
/// and the chart keeps it in a Secret.
fn install_command(state: &AppState, token: &str) -> String {
    let settings = state.settings();
    format!(
        "helm install kubenest-agent {chart} --namespace kubenest-system --create-namespace \
         --set hub.url={hub} --values - <<'EOF'\ntoken: \"{token}\"\nEOF",
        chart = settings.agent_chart,
        hub = settings.public_hub_url,
    )
}

/// Waits until the controllers minted token `version` of the cluster, and reads it.
async fn minted_token(
    state: &AppState,
    api: &Api<Cluster>,
    name: &str,
    version: u64,
) -> ApiResult<Option<(Cluster, String)>> {
    let deadline = tokio::time::Instant::now() + state.settings().mint_timeout;
    loop {
        let cluster = api.get(name).await?;
        let status = cluster.status.clone().unwrap_or_default();
        if status.issued_token_version == Some(version)
            && let Some(secret_name) = &status.token_secret
        {
            let secrets: Api<Secret> = Api::namespaced(
                state.client().clone(),
                &cluster.namespace().unwrap_or_default(),
            );
            if let Some(secret) = secrets.get_opt(secret_name).await?
                && let Some(data) = &secret.data
                && data.get("token-version").map(|v| v.0.as_slice())
                    == Some(version.to_string().as_bytes())
                && let Some(token) = data.get("token")
            {
                let token = String::from_utf8_lossy(&token.0).into_owned();
                return Ok(Some((cluster, token)));
            }
        }
        if tokio::time::Instant::now() >= deadline {
            return Ok(None);
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Registers a cluster (organization admins): returns its id, its connection token and the
/// command that installs its agent.
pub async fn create(
    State(state): State<AppState>,
    caller: Caller,
    Path(path): Path<OrgPath>,
    Body(body): Body<NewClusterBody>,
) -> ApiResult<Created<Json<RegistrationResponse>>> {
    let view = org_view(&state, &caller, &path.org).await?;
    authz::require(
        authz::role_at(&caller, &view.org, None, None).or(Some(Role::Viewer)),
        Need::Admin,
        "organization",
    )?;
    check_dns_label("name", &body.name)?;
    if let Some(display) = &body.display_name
        && display.len() > 253
    {
        return Err(ApiError::invalid("display_name", "at most 253 characters"));
    }
    let mut cluster = Cluster::new(
        &body.name,
        ClusterSpec {
            display_name: body.display_name.clone(),
            provider: Provider::Existing,
            token_version: 1,
            desired_node_count: None,
            members: vec![],
            budget: None,
        },
    );
    cluster.metadata.annotations = Some(actor_annotations(&caller));
    let api: Api<Cluster> = Api::namespaced(state.client().clone(), &view.namespace);
    api.create(&post_params(), &cluster)
        .await
        .map_err(|e| match e {
            kube::Error::Api(s) if s.code == 409 => ApiError::conflict(
                "exists",
                format!(
                    "a cluster named {:?} exists in this organization",
                    body.name
                ),
            ),
            other => other.into(),
        })?;
    let Some((cluster, token)) = minted_token(&state, &api, &body.name, 1).await? else {
        // Without its token the registration is useless: undo it rather than leave a cluster
        // nobody can connect.
        let _ = api.delete(&body.name, &super::delete_params()).await;
        return Err(ApiError::unavailable(
            "token_not_minted",
            "the controllers did not mint the cluster's token in time; nothing was registered",
        ));
    };
    Ok(Created(Json(RegistrationResponse {
        cluster_id: k8s::uid(&cluster),
        helm_install_command: install_command(&state, &token),
        connection_token: token,
        token_version: 1,
        cluster: response(&cluster),
    })))
}

/// The organization's clusters you have a role on.
pub async fn list(
    State(state): State<AppState>,
    caller: Caller,
    Path(path): Path<OrgPath>,
) -> ApiResult<Json<Vec<ClusterResponse>>> {
    let view = org_view(&state, &caller, &path.org).await?;
    Ok(Json(
        view.clusters
            .iter()
            .filter(|c| view.cluster_role(&caller, c).is_some())
            .map(response)
            .collect(),
    ))
}

/// One cluster.
pub async fn get(
    State(state): State<AppState>,
    caller: Caller,
    Path(path): Path<IdPath>,
) -> ApiResult<Json<ClusterResponse>> {
    let scoped = super::cluster(&state, &caller, &path.id).await?;
    scoped.require(Need::Read, "cluster")?;
    Ok(Json(response(&scoped.object)))
}

/// Raises the cluster's floor to `version` on every hub replica and waits for each to confirm
/// (the controllers' floor push would get there too, but only after their cache saw the
/// rotation: until then the old token would still be admitted).
async fn revoke_below(state: &AppState, scoped: &Scoped<Cluster>, version: u64) -> bool {
    let Some(hub) = state.hub() else {
        return false;
    };
    let cluster_id = scoped
        .object
        .status
        .as_ref()
        .and_then(|s| s.cluster_id.clone())
        .unwrap_or_else(|| k8s::uid(&scoped.object));
    let floor = Floor {
        cluster_id: Id::new(cluster_id),
        org_id: Id::new(scoped.org.name_any()),
        min_token_version: version,
    };
    let raised = hub.raise_floors(vec![floor]).await;
    if !raised.unconfirmed.is_empty() {
        tracing::warn!(replicas = ?raised.unconfirmed, "hub replicas did not confirm the raised floor");
    }
    raised.unconfirmed.is_empty()
}

/// Rotates the cluster's token (admins).
pub async fn rotate_token(
    State(state): State<AppState>,
    caller: Caller,
    Path(path): Path<IdPath>,
) -> ApiResult<Json<RotationResponse>> {
    let scoped = super::cluster(&state, &caller, &path.id).await?;
    scoped.require(Need::Admin, "cluster")?;
    let name = scoped.object.name_any();
    let version = scoped.object.spec.token_version + 1;
    let api: Api<Cluster> = Api::namespaced(state.client().clone(), &scoped.namespace());
    let patch = json!({"metadata": {"annotations": actor_annotations(&caller)}});
    api.patch(&name, &patch_params(), &Patch::Merge(&patch))
        .await?;
    // The test makes two concurrent rotations one success and one conflict, unlike a
    // resourceVersion it is not upset by the controllers' status writes.
    let patch: json_patch::Patch = serde_json::from_value(json!([
        {"op": "test", "path": "/spec/tokenVersion", "value": version - 1},
        {"op": "replace", "path": "/spec/tokenVersion", "value": version},
    ]))
    .map_err(ApiError::internal)?;
    api.patch(&name, &patch_params(), &Patch::<()>::Json(patch))
        .await
        .map_err(|e| match e {
            kube::Error::Api(s) if s.code == 422 || s.code == 409 => ApiError::conflict(
                "conflict",
                "the token was rotated concurrently; read the cluster and retry",
            ),
            other => other.into(),
        })?;
    let old_token_revoked = revoke_below(&state, &scoped, version).await;

    let Some((_, token)) = minted_token(&state, &api, &name, version).await? else {
        return Err(ApiError::unavailable(
            "token_not_minted",
            format!(
                "version {version} is requested and the old token no longer admits the agent, \
                 but the controllers did not mint the new one in time; rotate again to read it"
            ),
        ));
    };
    Ok(Json(RotationResponse {
        cluster_id: path.id,
        helm_install_command: install_command(&state, &token),
        connection_token: token,
        token_version: version,
        old_token_revoked,
    }))
}

/// Changes the node count of a cluster kubenest provisions (admins). Clusters brought by
/// their owners (`existing`) are refused: kubenest does not manage their machines.
pub async fn scale(
    State(state): State<AppState>,
    caller: Caller,
    Path(path): Path<IdPath>,
    Body(body): Body<ScaleBody>,
) -> ApiResult<Json<ClusterResponse>> {
    let scoped = super::cluster(&state, &caller, &path.id).await?;
    scoped.require(Need::Admin, "cluster")?;
    if !(1..=1000).contains(&body.desired_node_count) {
        return Err(ApiError::invalid(
            "desired_node_count",
            "between 1 and 1000",
        ));
    }
    match scoped.object.spec.provider {
        Provider::Existing => Err(ApiError::conflict(
            "not_provisioned",
            "this cluster was brought by its owner (provider existing): kubenest does not \
             manage its nodes",
        )),
    }
}

/// Deletes a cluster record (admins); refused while projects use it. The agent is not
/// uninstalled: `helm uninstall kubenest-agent -n kubenest-system` on the cluster does that.
/// `?force=true` removes the cluster record and every project, App and addon on it from
/// kubenest now, without its agent.
pub async fn delete(
    State(state): State<AppState>,
    caller: Caller,
    Path(path): Path<IdPath>,
    Query(query): Query<DeleteQuery>,
) -> ApiResult<Removal<Json<RemovalResponse>>> {
    let scoped = super::cluster(&state, &caller, &path.id).await?;
    scoped.require(Need::Admin, "cluster")?;
    if query.force {
        let mut removed = RemovalResponse::removed();
        force_cluster(&state, &caller, &scoped.org, &scoped.object, &mut removed).await?;
        return Ok(Removal::Gone(Json(removed)));
    }
    let name = scoped.object.name_any();
    let projects: Vec<kubenest_crds::project::Project> =
        k8s::list_in(state.client(), &scoped.namespace()).await?;
    let using: Vec<String> = projects
        .iter()
        .filter(|p| p.spec.cluster == name)
        .map(ResourceExt::name_any)
        .collect();
    if !using.is_empty() {
        return Err(ApiError::conflict(
            "has_projects",
            format!(
                "delete its projects first: {}; if the cluster will not come back, \
                 ?force=true removes it with everything on it from kubenest alone",
                using.join(", ")
            ),
        ));
    }
    let api: Api<Cluster> = Api::namespaced(state.client().clone(), &scoped.namespace());
    api.delete(&name, &super::delete_params()).await?;
    Ok(Removal::Started(Json(RemovalResponse::deleting(vec![]))))
}

/// Gives a user a role on this cluster and its projects (admins).
pub async fn put_member(
    State(state): State<AppState>,
    caller: Caller,
    Path(path): Path<IdPath>,
    Body(body): Body<MemberBody>,
) -> ApiResult<Json<Vec<MemberView>>> {
    let scoped = super::cluster(&state, &caller, &path.id).await?;
    change_member(
        &state,
        &scoped,
        "cluster",
        &body.user,
        Some(body.role),
        |c| &mut c.spec.members,
    )
    .await
    .map(Json)
}

/// Removes a user's role on this cluster (admins).
pub async fn delete_member(
    State(state): State<AppState>,
    caller: Caller,
    Path(path): Path<MemberPath>,
) -> ApiResult<Json<Vec<MemberView>>> {
    let scoped = super::cluster(&state, &caller, &path.id).await?;
    change_member(&state, &scoped, "cluster", &path.user, None, |c| {
        &mut c.spec.members
    })
    .await
    .map(Json)
}
