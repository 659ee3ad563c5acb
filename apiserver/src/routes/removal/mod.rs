//! Deleting what lives on a cluster — Apps, standalone addons, projects, the cluster record —
//! and removing it by force when the cluster cannot confirm.
//!
//! A deletion is durable intent: the object keeps its finalizer until the agent confirms that
//! what it ran on the cluster is gone, so a cluster that is down for an hour loses nothing. The
//! answer says what the deletion waits for. When the cluster will never answer again (its
//! agent uninstalled, the cluster gone), an admin removes the objects from kubenest alone with
//! `?force=true`: the finalizers are released without the agent, the removal is recorded in the
//! history (a `forced` delete deployment for an App) and the audit log, and the answer lists
//! what may be left on the cluster for its owner to clean up. Forcing is refused (409) while
//! the cluster's agent is connected, which would confirm an ordinary deletion, and for anything
//! kept in Git, which its engine would bring back.

pub use kubenest_api::removal::{DeleteQuery, RemovalResponse, RemovalState};

mod force;

use kube::ResourceExt;
use kube::api::{Api, Patch};
use kubenest_crds::cluster::{Cluster, ClusterState};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::json;

pub use force::{Place, force_addon, force_app, force_cluster, force_project};

use super::patch_params;
use crate::error::{ApiError, ApiResult};

/// What the deletion of `what` (e.g. `app shop`) on `cluster` waits for: the agent's
/// confirmation, and, when the agent is not connected, that it is not, with the way out.
pub fn waiting_for(cluster: Option<&Cluster>, what: &str) -> Vec<String> {
    let Some(cluster) = cluster else {
        return vec![];
    };
    let name = cluster.name_any();
    let status = cluster.status.clone().unwrap_or_default();
    if status.state == ClusterState::Connected {
        return vec![format!(
            "the agent of cluster {name} confirming that {what} is removed from it"
        )];
    }
    let state = serde_json::to_value(status.state)
        .ok()
        .and_then(|v| v.as_str().map(str::to_owned))
        .unwrap_or_default();
    let last = status
        .last_heartbeat
        .map_or_else(|| "never".to_owned(), |t| format!("at {t}"));
    vec![format!(
        "the agent of cluster {name}, which is not connected (state {state}, last heartbeat \
         {last}): {what} is removed from the cluster when its agent reconnects. If the \
         cluster will not come back, an admin can remove it from kubenest alone with \
         ?force=true"
    )]
}

/// The finalizers kubenest's controllers hold.
fn ours(finalizer: &str) -> bool {
    finalizer.starts_with("kubenest.io/")
}

/// Deletes `name` and releases the controllers' finalizers on it, so it goes now whatever its
/// cleanup waits for. Finalizers of others are kept.
async fn release<K>(api: &Api<K>, name: &str) -> ApiResult<()>
where
    K: kube::Resource + Clone + DeserializeOwned + Serialize + std::fmt::Debug,
{
    match api.delete(name, &super::delete_params()).await {
        Ok(_) => {}
        Err(kube::Error::Api(status)) if status.code == 404 => return Ok(()),
        Err(error) => return Err(error.into()),
    }
    // A dry run's delete left the object as it was: nothing to release.
    if crate::dry_run::active() {
        return Ok(());
    }
    for _ in 0..5 {
        let Some(object) = api.get_opt(name).await? else {
            return Ok(());
        };
        let held = object.finalizers().to_vec();
        let kept: Vec<&String> = held.iter().filter(|f| !ours(f)).collect();
        if kept.len() == held.len() {
            return Ok(());
        }
        // Guarded: a controller releasing its finalizer at the same moment fails the test and
        // the list is read again.
        let patch: json_patch::Patch = serde_json::from_value(json!([
            {"op": "test", "path": "/metadata/finalizers", "value": held},
            {"op": "replace", "path": "/metadata/finalizers", "value": kept},
        ]))
        .map_err(ApiError::internal)?;
        match api
            .patch(name, &patch_params(), &Patch::<()>::Json(patch))
            .await
        {
            Ok(_) => return Ok(()),
            Err(kube::Error::Api(status)) if status.code == 404 => return Ok(()),
            Err(kube::Error::Api(status)) if status.code == 422 || status.code == 409 => {}
            Err(error) => return Err(error.into()),
        }
    }
    Err(ApiError::conflict(
        "conflict",
        format!("{name} kept changing while its finalizers were released; retry"),
    ))
}

#[cfg(test)]
mod tests {
    use kubenest_crds::cluster::{ClusterSpec, ClusterStatus};

    use super::*;

    fn cluster(state: ClusterState) -> Cluster {
        let mut cluster = Cluster::new(
            "west",
            ClusterSpec {
                display_name: None,
                provider: Default::default(),
                token_version: 1,
                desired_node_count: None,
                members: vec![],
                budget: None,
            },
        );
        cluster.status = Some(ClusterStatus {
            state,
            last_heartbeat: Some("2026-01-01T00:00:00Z".into()),
            ..ClusterStatus::default()
        });
        cluster
    }

    #[test]
    fn a_deletion_names_the_agent_it_waits_for_and_the_way_out_when_it_is_gone() {
        let live = waiting_for(Some(&cluster(ClusterState::Connected)), "app shop");
        assert_eq!(
            live,
            ["the agent of cluster west confirming that app shop is removed from it"]
        );
        let gone = waiting_for(Some(&cluster(ClusterState::Disconnected)), "app shop");
        assert!(
            gone[0].contains("not connected (state disconnected"),
            "{gone:?}"
        );
        assert!(gone[0].contains("2026-01-01T00:00:00Z"), "{gone:?}");
        assert!(gone[0].contains("?force=true"), "{gone:?}");
        assert!(waiting_for(None, "app shop").is_empty());
        assert!(ours("kubenest.io/app-cleanup") && !ours("example.com/keep"));
    }
}
