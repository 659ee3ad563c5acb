//! Component secrets, fail-closed: values go straight to the cluster in a `secret.set` (never
//! stored, logged or echoed here), and the request succeeds only when the agent confirms it
//! stored them (`command.accepted`). No hub session, no route, a refusal or no answer in time
//! is a non-2xx: nothing is queued to be retried behind the caller's back.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use kubenest_contracts::{self as wire, Envelope, Message};
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

/// Sends fail-closed commands (secrets, log subscriptions, objects requests) and waits for the
/// agent's answer; hands log frames to their subscribers and objects snapshots to their askers.
#[derive(Debug, Clone)]
pub struct Secrets {
    hub: Option<HubClient>,
    waiters: Waiters,
    objects: crate::objects::Askers,
}

impl Secrets {
    /// Without a hub every secret request answers 503.
    pub fn disabled() -> Self {
        Self {
            hub: None,
            waiters: Arc::default(),
            objects: crate::objects::Askers::default(),
        }
    }

    /// Uses `hub` and reads the agents' answers from `statuses` (the hub client's receiver).
    pub fn start(
        hub: HubClient,
        mut statuses: mpsc::Receiver<Envelope>,
        logs: crate::logs::Subscribers,
    ) -> Self {
        let waiters: Waiters = Arc::default();
        let objects = crate::objects::Askers::default();
        tokio::spawn({
            let waiters = waiters.clone();
            let objects = objects.clone();
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
                        Message::LogLines(lines) => {
                            logs.lines(lines);
                            continue;
                        }
                        Message::LogEnd(end) => {
                            logs.end(end);
                            continue;
                        }
                        Message::ObjectsSnapshot(snapshot) => {
                            objects.answer(snapshot);
                            continue;
                        }
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
            objects,
        }
    }

    /// The askers of objects requests, whose answers this hands over.
    pub fn objects(&self) -> &crate::objects::Askers {
        &self.objects
    }

    /// Sends `command` and waits only until the hub routed it to the cluster's agent.
    pub async fn route(&self, command: Envelope) -> Result<(), ApiError> {
        let Some(hub) = &self.hub else {
            return Err(ApiError::unavailable(
                "hub_unavailable",
                "this API server has no hub connection",
            ));
        };
        hub.dispatch(command).await.map_err(|e| match e {
            DispatchError::NoSession => ApiError::unavailable(
                "cluster_unreachable",
                "the cluster's agent is not connected",
            ),
            other => ApiError::unavailable(
                "hub_unavailable",
                format!("the hub did not route the request ({other})"),
            ),
        })
    }

    /// Sends `command` and waits until the agent stored it.
    pub async fn send(&self, command: Envelope) -> Result<(), ApiError> {
        self.confirm(command).await.map_err(|e| match e {
            Unconfirmed::Api(error) => error,
            Unconfirmed::Rejected {
                reason,
                message,
                field,
            } => ApiError {
                field: field.map(|f| format!("values{}", f.trim_start_matches("/values"))),
                ..ApiError::invalid("", format!("the cluster refused it ({reason}): {message}"))
            },
        })
    }

    /// Sends `command` and waits for the agent's `command.accepted`; a refusal comes back as
    /// the agent worded it, for the caller to map.
    pub async fn confirm(&self, command: Envelope) -> Result<(), Unconfirmed> {
        let Some(hub) = &self.hub else {
            return Err(Unconfirmed::Api(ApiError::unavailable(
                "hub_unavailable",
                "this API server has no hub connection; nothing was changed",
            )));
        };
        let id = command.id;
        let (tx, rx) = oneshot::channel();
        self.waiters
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(id, tx);
        let outcome = async {
            hub.dispatch(command).await.map_err(|e| {
                Unconfirmed::Api(match e {
                    DispatchError::NoSession => ApiError::unavailable(
                        "cluster_unreachable",
                        "the cluster's agent is not connected; nothing was changed",
                    ),
                    DispatchError::Invalid(message) => ApiError::invalid("values", message),
                    other => ApiError::unavailable(
                        "hub_unavailable",
                        format!("the hub did not confirm the route ({other}); nothing was changed"),
                    ),
                })
            })?;
            match tokio::time::timeout(CONFIRM_TIMEOUT, rx).await {
                Ok(Ok(Answer::Accepted)) => Ok(()),
                Ok(Ok(Answer::Rejected {
                    reason,
                    message,
                    field,
                })) => Err(Unconfirmed::Rejected {
                    reason,
                    message,
                    field,
                }),
                Ok(Err(_)) | Err(_) => Err(Unconfirmed::Api(ApiError {
                    status: axum::http::StatusCode::GATEWAY_TIMEOUT,
                    code: "not_confirmed",
                    message: "the hub routed the command but the agent did not confirm it in \
                              time; it may or may not have been applied"
                        .into(),
                    field: None,
                    retry_after: None,
                    ways_out: None,
                })),
            }
        }
        .await;
        self.waiters
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(&id);
        outcome
    }

    /// The live session of cluster `cluster_id` (`replica/epoch`), `None` when there is none;
    /// `Err` when it cannot be told now (no hub, or the management cluster did not answer).
    pub async fn session_of(&self, cluster_id: &wire::Id) -> Result<Option<String>, String> {
        let Some(hub) = &self.hub else {
            return Err("this API server has no hub connection".into());
        };
        hub.session_of(cluster_id).await.map_err(|e| e.to_string())
    }

    /// Sends `command` without waiting for the agent (an unsubscribe when a reader left).
    pub fn fire(&self, command: Envelope) {
        if let Some(hub) = self.hub.clone() {
            tokio::spawn(async move {
                if let Err(error) = hub.dispatch(command).await {
                    tracing::debug!(%error, "command not routed");
                }
            });
        }
    }
}

/// Why a command was not confirmed.
#[derive(Debug)]
pub enum Unconfirmed {
    /// Not routed, or no answer in time: the response to give.
    Api(ApiError),
    /// The agent refused it.
    Rejected {
        reason: String,
        message: String,
        field: Option<String>,
    },
}
