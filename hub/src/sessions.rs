//! The live sessions of one replica: at most one agent per cluster, any number of backends.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use axum::extract::ws::Utf8Bytes;
use kubenest_contracts::Id;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;
use uuid::Uuid;

/// WebSocket close codes the hub uses, so that clients can tell why they were cut.
pub mod close {
    /// The hub is shutting down; reconnect (to another replica).
    pub const GOING_AWAY: u16 = 1001;
    /// Too many malformed frames.
    pub const POLICY: u16 = 1008;
    /// Another session of the same cluster replaced this one.
    pub const REPLACED: u16 = 4001;
    /// The cluster's token was revoked (its floor rose above it).
    pub const REVOKED: u16 = 4003;
    /// The peer did not keep up with its frames, or stopped answering pings.
    pub const SLOW_OR_DEAD: u16 = 4008;
}

/// A frame waiting to be written to a session's socket.
#[derive(Debug)]
pub struct Outbound {
    pub text: Utf8Bytes,
    /// The frame's type, for metrics.
    pub kind: &'static str,
    /// For a routed command: the backend to acknowledge once the frame is on the agent's socket.
    pub ack: Option<PendingAck>,
}

/// A command in flight to an agent.
#[derive(Debug)]
pub struct PendingAck {
    pub command_id: Uuid,
    pub reply_to: Outbox,
    pub started: Instant,
}

/// The sending half of a session: a bounded queue and a way to close it with a reason.
#[derive(Debug, Clone)]
pub struct Outbox {
    tx: mpsc::Sender<Outbound>,
    closer: CancellationToken,
    reason: Arc<Mutex<Option<(u16, &'static str)>>>,
}

/// Why a frame could not be queued.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum QueueError {
    /// The queue is full: the peer is too slow, and has been disconnected.
    Full,
    /// The session has ended.
    Closed,
}

impl Outbox {
    /// A new outbox with room for `capacity` frames, closed when `parent` is cancelled.
    pub fn new(capacity: usize, parent: &CancellationToken) -> (Self, mpsc::Receiver<Outbound>) {
        let (tx, rx) = mpsc::channel(capacity);
        let outbox = Self {
            tx,
            closer: parent.child_token(),
            reason: Arc::new(Mutex::new(None)),
        };
        (outbox, rx)
    }

    /// Queues a frame without waiting. A full queue disconnects the session: memory stays
    /// bounded and a slow peer cannot hold others back.
    pub fn send(&self, frame: Outbound) -> Result<(), QueueError> {
        if self.closer.is_cancelled() {
            return Err(QueueError::Closed);
        }
        match self.tx.try_send(frame) {
            Ok(()) => Ok(()),
            Err(mpsc::error::TrySendError::Full(_)) => {
                self.close(close::SLOW_OR_DEAD, "send queue full");
                Err(QueueError::Full)
            }
            Err(mpsc::error::TrySendError::Closed(_)) => Err(QueueError::Closed),
        }
    }

    /// Closes the session with a WebSocket close code and reason. The first reason wins.
    pub fn close(&self, code: u16, reason: &'static str) {
        if let Ok(mut slot) = self.reason.lock()
            && slot.is_none()
        {
            *slot = Some((code, reason));
        }
        self.closer.cancel();
    }

    /// Resolves when the session is being closed.
    pub fn closed(&self) -> tokio_util::sync::WaitForCancellationFuture<'_> {
        self.closer.cancelled()
    }

    /// Whether the session is being closed.
    pub fn is_closed(&self) -> bool {
        self.closer.is_cancelled()
    }

    /// The close code and reason, once closed (shutdown when none was given).
    pub fn close_reason(&self) -> (u16, &'static str) {
        self.reason
            .lock()
            .ok()
            .and_then(|r| *r)
            .unwrap_or((close::GOING_AWAY, "hub shutting down"))
    }
}

/// A connected agent.
#[derive(Debug, Clone)]
pub struct AgentSession {
    pub session_id: u64,
    pub epoch: i64,
    pub org_id: Id,
    pub token_version: u64,
    pub outbox: Outbox,
}

/// Every session of this replica.
#[derive(Debug, Default)]
pub struct Sessions {
    agents: Mutex<HashMap<Id, AgentSession>>,
    backends: Mutex<HashMap<u64, Outbox>>,
    next_id: AtomicU64,
}

impl Sessions {
    /// A fresh session id.
    pub fn next_id(&self) -> u64 {
        self.next_id.fetch_add(1, Ordering::Relaxed)
    }

    fn agents(&self) -> std::sync::MutexGuard<'_, HashMap<Id, AgentSession>> {
        self.agents.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn backends(&self) -> std::sync::MutexGuard<'_, HashMap<u64, Outbox>> {
        self.backends.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Registers an agent session; an older session of the same cluster is closed.
    pub fn register_agent(&self, cluster_id: Id, session: AgentSession) {
        if let Some(old) = self.agents().insert(cluster_id, session) {
            old.outbox.close(
                close::REPLACED,
                "replaced by a newer session of this cluster",
            );
        }
    }

    /// Removes an agent session, unless a newer one has replaced it already.
    pub fn unregister_agent(&self, cluster_id: &Id, session_id: u64) {
        let mut agents = self.agents();
        if agents
            .get(cluster_id)
            .is_some_and(|s| s.session_id == session_id)
        {
            agents.remove(cluster_id);
        }
    }

    /// The agent session of a cluster.
    pub fn agent(&self, cluster_id: &Id) -> Option<AgentSession> {
        self.agents().get(cluster_id).cloned()
    }

    /// Registers a backend session.
    pub fn register_backend(&self, session_id: u64, outbox: Outbox) {
        self.backends().insert(session_id, outbox);
    }

    /// Removes a backend session.
    pub fn unregister_backend(&self, session_id: u64) {
        self.backends().remove(&session_id);
    }

    /// Every backend session.
    pub fn backend_outboxes(&self) -> Vec<Outbox> {
        self.backends().values().cloned().collect()
    }

    /// Number of (agent, backend) sessions.
    pub fn counts(&self) -> (usize, usize) {
        (self.agents().len(), self.backends().len())
    }
}
