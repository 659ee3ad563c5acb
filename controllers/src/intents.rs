//! The controllers' in-memory view of work in flight: which command (by envelope id) was sent
//! for which object, how often an object's command has been re-sent (its backoff), what the
//! agents' snapshots say each App holds, and which deployment's outcome each App last recorded.
//!
//! None of it is durable, and none of it needs to be: the durable intent is the object's spec
//! plus its deployment row. A restarted controller re-derives and re-sends (commands are
//! idempotent), and the agents' next snapshots refill what they hold.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use kubenest_runtime::backoff::Backoff;
use uuid::Uuid;

/// How long a sent command's target is remembered (answers come within seconds).
const COMMAND_MEMORY: Duration = Duration::from_secs(600);
const RESEND_BASE: Duration = Duration::from_secs(1);
const RESEND_CAP: Duration = Duration::from_secs(30);

/// An object on the management cluster.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ObjectKey {
    pub namespace: String,
    pub name: String,
    pub uid: String,
}

/// What a sent command was for, so the agent's answer can be attributed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Sent {
    AppDeploy {
        app: ObjectKey,
        revision: String,
    },
    AppRedeploy {
        app: ObjectKey,
        token: String,
        deployment: Uuid,
        org: String,
    },
    AppDelete {
        app: ObjectKey,
    },
    ProjectEnsure {
        project: ObjectKey,
        generation: i64,
    },
    ProjectDelete {
        project: ObjectKey,
    },
    AddonApply {
        addon: ObjectKey,
        revision: u32,
    },
    AddonDelete {
        addon: ObjectKey,
    },
}

impl Sent {
    /// The uid of the object the command is for.
    pub fn uid(&self) -> &str {
        let key = match self {
            Sent::AppDeploy { app, .. }
            | Sent::AppRedeploy { app, .. }
            | Sent::AppDelete { app } => app,
            Sent::ProjectEnsure { project, .. } | Sent::ProjectDelete { project } => project,
            Sent::AddonApply { addon, .. } | Sent::AddonDelete { addon } => addon,
        };
        key.uid.as_str()
    }
}

/// What the agent's last snapshot said about an App.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Held {
    /// The cluster holds this revision with this checksum of its desired state.
    At { revision: String, checksum: String },
    /// The cluster holds nothing for the App.
    Missing,
}

/// One object's resends: their delays, and when the last went out and the next may.
#[derive(Debug)]
struct Resends {
    delays: Backoff,
    attempts: u32,
    sent_at: Instant,
    next_at: Instant,
}

/// Work in flight. Cheap to share behind an `Arc`.
#[derive(Debug, Default)]
pub struct Intents {
    sent: Mutex<HashMap<Uuid, (Instant, Sent)>>,
    attempts: Mutex<HashMap<String, Resends>>,
    held: Mutex<HashMap<String, Held>>,
    /// The deployment (by id) whose outcome each App (by uid) last recorded in the history.
    finished: Mutex<HashMap<String, String>>,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl Intents {
    /// Remembers that command `id` was sent for `what`.
    pub fn sent(&self, id: Uuid, what: Sent) {
        let mut sent = lock(&self.sent);
        let now = Instant::now();
        sent.retain(|_, (at, _)| now.duration_since(*at) < COMMAND_MEMORY);
        sent.insert(id, (now, what));
    }

    /// What command `id` was for, if it was sent recently by this process.
    pub fn command(&self, id: Uuid) -> Option<Sent> {
        lock(&self.sent).get(&id).map(|(_, what)| what.clone())
    }

    /// Whether `uid`'s command may be sent now (its backoff has run out).
    pub fn due(&self, uid: &str) -> bool {
        lock(&self.attempts)
            .get(uid)
            .is_none_or(|b| Instant::now() >= b.next_at)
    }

    /// Counts one more send of `uid`'s command and returns how long to wait before the next:
    /// the shared [`Backoff`] (a capped exponential with full jitter), never under a second.
    pub fn backoff(&self, uid: &str) -> Duration {
        let mut attempts = lock(&self.attempts);
        let resends = attempts.entry(uid.to_owned()).or_insert_with(|| Resends {
            delays: Backoff::new(RESEND_BASE, RESEND_CAP).with_floor(RESEND_BASE),
            attempts: 0,
            sent_at: Instant::now(),
            next_at: Instant::now(),
        });
        resends.attempts = resends.attempts.saturating_add(1);
        let delay = resends.delays.next_delay();
        resends.sent_at = Instant::now();
        resends.next_at = resends.sent_at + delay;
        delay
    }

    /// Holds `uid`'s next send until at least `at_least` after its last one (e.g. the agent has
    /// stored the command durably, so re-sending is only a safety net). Idempotent.
    pub fn hold_since_sent(&self, uid: &str, at_least: Duration) {
        if let Some(backoff) = lock(&self.attempts).get_mut(uid) {
            backoff.next_at = backoff.next_at.max(backoff.sent_at + at_least);
        }
    }

    /// Whether `uid`'s command was sent before and has not settled since (a send now repeats it).
    pub fn unsettled(&self, uid: &str) -> bool {
        lock(&self.attempts)
            .get(uid)
            .is_some_and(|b| b.attempts > 0)
    }

    /// How long until `uid`'s command may be sent again (zero when due).
    pub fn until_due(&self, uid: &str) -> Duration {
        lock(&self.attempts).get(uid).map_or(Duration::ZERO, |b| {
            b.next_at.saturating_duration_since(Instant::now())
        })
    }

    /// Forgets `uid`'s backoff (its command arrived, or it changed).
    pub fn settled(&self, uid: &str) {
        lock(&self.attempts).remove(uid);
    }

    /// Records what a snapshot said `uid` holds.
    pub fn set_held(&self, uid: &str, held: Held) {
        lock(&self.held).insert(uid.to_owned(), held);
    }

    /// Forgets what the cluster was last known to hold for `uid` (after a send: the next
    /// snapshot or status says).
    pub fn clear_held(&self, uid: &str) {
        lock(&self.held).remove(uid);
    }

    /// Whether the cluster, by its last snapshot, holds something other than `revision` with
    /// `checksum` for `uid` — i.e. the command must be sent again even if the revision was
    /// reported observed earlier.
    pub fn differs(&self, uid: &str, revision: &str, checksum: &str) -> bool {
        match lock(&self.held).get(uid) {
            None => false,
            Some(Held::Missing) => true,
            Some(Held::At {
                revision: r,
                checksum: c,
            }) => r != revision || c != checksum,
        }
    }

    /// Forgets everything about `uid` (it was deleted).
    pub fn forget(&self, uid: &str) {
        self.settled(uid);
        self.clear_held(uid);
        lock(&self.finished).remove(uid);
    }

    /// Whether this process has recorded the outcome of `uid`'s deployment `deployment`.
    pub fn outcome_recorded(&self, uid: &str, deployment: &str) -> bool {
        lock(&self.finished)
            .get(uid)
            .is_some_and(|d| d == deployment)
    }

    /// Notes that `uid`'s deployment `deployment` has its outcome in the history.
    pub fn record_outcome(&self, uid: &str, deployment: &str) {
        lock(&self.finished).insert(uid.to_owned(), deployment.to_owned());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn delays_grow_with_jitter_and_stay_capped() {
        let intents = Intents::default();
        assert!(intents.due("a"));
        let delays: Vec<Duration> = (0..20).map(|_| intents.backoff("a")).collect();
        assert!(!intents.due("a"));
        assert!(delays.iter().all(|d| *d >= RESEND_BASE && *d <= RESEND_CAP));
        assert!(delays[0] <= RESEND_BASE * 2);
        intents.settled("a");
        assert!(intents.due("a"));
        intents.backoff("a");
        intents.hold_since_sent("a", Duration::from_secs(60));
        assert!(intents.until_due("a") > Duration::from_secs(50));
        intents.settled("a");
        assert!(intents.backoff("a") <= RESEND_BASE * 2);
    }

    #[test]
    fn an_outcome_is_remembered_per_app_for_its_latest_deployment() {
        let intents = Intents::default();
        assert!(!intents.outcome_recorded("a", "d1"));
        intents.record_outcome("a", "d1");
        assert!(intents.outcome_recorded("a", "d1"));
        assert!(
            !intents.outcome_recorded("a", "d2"),
            "a new deployment is not finished"
        );
        assert!(!intents.outcome_recorded("b", "d1"));
        intents.record_outcome("a", "d2");
        assert!(intents.outcome_recorded("a", "d2"));
        intents.forget("a");
        assert!(!intents.outcome_recorded("a", "d2"));
    }

    #[test]
    fn a_snapshot_that_differs_asks_for_a_resend() {
        let intents = Intents::default();
        assert!(
            !intents.differs("a", "r1", "c1"),
            "unknown is not a difference"
        );
        intents.set_held(
            "a",
            Held::At {
                revision: "r1".into(),
                checksum: "c1".into(),
            },
        );
        assert!(!intents.differs("a", "r1", "c1"));
        assert!(intents.differs("a", "r1", "c2"));
        assert!(intents.differs("a", "r2", "c1"));
        intents.set_held("a", Held::Missing);
        assert!(intents.differs("a", "r1", "c1"));
        intents.forget("a");
        assert!(!intents.differs("a", "r1", "c1"));
    }
}
