//! Component secrets, fail-closed: values go straight to the cluster in a `secret.set` (never
//! stored, logged or echoed here), and the request succeeds only when the agent confirms it
//! stored them (`command.accepted`). No hub session, no route, a refusal or no answer in time
//! is a non-2xx: nothing is queued to be retried behind the caller's back.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use kubenest_contracts::{Envelope, Message};
use kubenest_hub_client::{DispatchError, HubClient};
use tokio::sync::{mpsc, oneshot};
use uuid::Uuid;

use crate::error::ApiError;

/// How long the agent has to confirm a secret change once the hub routed it.
const CONFIRM_TIMEOUT: Duration = Duration::from_secs(10);

/// What the agent answered.
#[derive(Debug)]
enum Answer {
    Accepted,
    Rejected {
        reason: String,
        message: String,
        field: Option<String>,
    },
}

type Waiters = Arc<Mutex<HashMap<Uuid, oneshot::Sender<Answer>>>>;

/// Sends secret commands and waits for the agent's answer.
#[derive(Debug, Clone)]
pub struct Secrets {
    hub: Option<HubClient>,
    waiters: Waiters,
}

impl Secrets {
    /// Without a hub every secret request answers 503.
    pub fn disabled() -> Self {
        Self {
            hub: None,
            waiters: Arc::default(),
        }
    }

    /// Uses `hub` and reads the agents' answers from `statuses` (the hub client's receiver).
    pub fn start(hub: HubClient, mut statuses: mpsc::Receiver<Envelope>) -> Self {
        let waiters: Waiters = Arc::default();
        tokio::spawn({
            let waiters = waiters.clone();
            async move {
                while let Some(frame) = statuses.recv().await {
                    let (id, answer) = match frame.message {
                        Message::CommandAccepted(a) => (a.command_id, Answer::Accepted),
                        Message::CommandRejected(r) => (
                            r.command_id,
                            Answer::Rejected {
                                reason: serde_json::to_value(r.reason)
                                    .ok()
                                    .and_then(|v| v.as_str().map(str::to_owned))
                                    .unwrap_or_default(),
                                message: r.message,
                                field: r.field,
                            },
                        ),
                        _ => continue,
                    };
                    let waiter = waiters
                        .lock()
                        .unwrap_or_else(|e| e.into_inner())
                        .remove(&id);
                    if let Some(waiter) = waiter {
                        let _ = waiter.send(answer);
                    }
                }
            }
        });
        Self {
            hub: Some(hub),
            waiters,
        }
    }

    /// Sends `command` and waits until the agent stored it.
    pub async fn send(&self, command: Envelope) -> Result<(), ApiError> {
        let Some(hub) = &self.hub else {
            return Err(ApiError::unavailable(
                "hub_unavailable",
                "this API server has no hub connection; nothing was changed",
            ));
        };
        let id = command.id;
        let (tx, rx) = oneshot::channel();
        self.waiters
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(id, tx);
        let outcome = async {
            hub.dispatch(command).await.map_err(|e| match e {
                DispatchError::NoSession => ApiError::unavailable(
                    "cluster_unreachable",
                    "the cluster's agent is not connected; nothing was changed",
                ),
                DispatchError::Invalid(message) => ApiError::invalid("values", message),
                other => ApiError::unavailable(
                    "hub_unavailable",
                    format!("the hub did not confirm the route ({other}); nothing was changed"),
                ),
            })?;
            match tokio::time::timeout(CONFIRM_TIMEOUT, rx).await {
                Ok(Ok(Answer::Accepted)) => Ok(()),
                Ok(Ok(Answer::Rejected {
                    reason,
                    message,
                    field,
                })) => Err(ApiError {
                    field: field.map(|f| format!("values{}", f.trim_start_matches("/values"))),
                    ..ApiError::invalid("", format!("the cluster refused it ({reason}): {message}"))
                }),
                Ok(Err(_)) | Err(_) => Err(ApiError {
                    status: axum::http::StatusCode::GATEWAY_TIMEOUT,
                    code: "not_confirmed",
                    message: "the hub routed the change but the agent did not confirm it in time; \
                              it may or may not have been applied"
                        .into(),
                    field: None,
                    retry_after: None,
                    ways_out: None,
                }),
            }
        }
        .await;
        self.waiters
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(&id);
        outcome
    }
}
