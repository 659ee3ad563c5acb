//! The resync on reconnect: whenever the hub client (re)connects, every connected agent is asked
//! for a fresh snapshot and every status, so nothing reported while no replica listened is lost.

use std::sync::Arc;

use kube::ResourceExt;
use kubenest_contracts::{self as wire, Envelope};
use tokio_util::sync::CancellationToken;

use crate::caches::Caches;
use crate::plane::Plane;

/// Asks every connected agent for a fresh snapshot and every status each time the hub client
/// (re)connects — including its first connection: a replica that has just taken over heard
/// nothing agents reported while no replica led, and must not wait for the next change to
/// learn it. Clusters are known only once the caches have been filled.
pub async fn resync_on_reconnect(plane: Arc<Plane>, caches: Caches, shutdown: CancellationToken) {
    let mut connections = plane.hub.connections();
    tokio::select! {
        _ = shutdown.cancelled() => return,
        ready = async {
            caches.clusters.wait_until_ready().await?;
            caches.namespaces.wait_until_ready().await
        } => if ready.is_err() { return },
    }
    // Connections made before the caches were ready count as the first one.
    let mut first = *connections.borrow_and_update() > 0;
    loop {
        if !std::mem::take(&mut first) {
            tokio::select! {
                _ = shutdown.cancelled() => return,
                changed = connections.changed() => if changed.is_err() { return },
            }
        }
        // Let the replica's session settle before asking through it.
        tokio::time::sleep(std::time::Duration::from_millis(500)).await;
        for cluster in caches.clusters.state() {
            let Some(cluster_id) = cluster.status.as_ref().and_then(|s| s.cluster_id.clone())
            else {
                continue;
            };
            let Some(namespace) = cluster.namespace() else {
                continue;
            };
            let Some(org) = crate::placement::org_in(&caches, &namespace) else {
                continue;
            };
            let request = Envelope::new(wire::ResyncRequest {
                reason: "controllers reconnected".into(),
            })
            .for_cluster(wire::Id::new(&cluster_id), wire::Id::new(&org));
            if let Err(error) = plane.hub.dispatch(request).await {
                tracing::debug!(%cluster_id, %error, "resync.request not routed");
            }
        }
    }
}
