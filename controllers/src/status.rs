//! Routes the agents' status events (from the hub client) to whatever they update. So far:
//! heartbeats feed fleet health; the other kinds arrive with their controllers.

use kubenest_contracts::{Envelope, Message};
use tokio::sync::mpsc;

use crate::cluster::health;

/// Consumes status events until the channel closes.
pub async fn route(client: kube::Client, mut statuses: mpsc::Receiver<Envelope>) {
    while let Some(envelope) = statuses.recv().await {
        // The hub guarantees an agent speaks only for its own cluster, so cluster_id is trusted.
        let Some(cluster_id) = envelope.cluster_id.as_ref() else {
            continue;
        };
        let outcome = match &envelope.message {
            Message::Heartbeat(heartbeat) => health::record_heartbeat(
                &client,
                cluster_id.as_str(),
                heartbeat,
            )
            .await
            .map(|known| {
                if !known {
                    tracing::info!(%cluster_id, "heartbeat from an unknown cluster ignored");
                }
            }),
            other => {
                tracing::debug!(%cluster_id, kind = %other.message_type(), "status event not handled yet");
                Ok(())
            }
        };
        if let Err(error) = outcome {
            tracing::warn!(%cluster_id, %error, "status event could not be recorded");
        }
    }
}
