//! The live event stream's source: phase changes, deployments, drift, verdicts on verified
//! revisions, standalone addons' specs,
//! phases and revisions, cluster connectivity and alerts opening and resolving ([`alerts`]),
//! derived from watches of the management cluster.
//!
//! Every replica watches everything and derives the same events from the same object
//! versions. An event's id comes from the version it was seen in (`resourceVersion × 8 + slot`,
//! the slot telling apart the events one version can make), so every replica gives it the same
//! id without asking anyone. Each stores them (`ON CONFLICT DO NOTHING`: whichever replica is
//! first) in PostgreSQL's `events` table and then fans them out to its own subscribers. A client
//! resuming with `Last-Event-ID` on any replica, or a subscriber too slow for the live channel,
//! is replayed from the table, which therefore holds every event a subscriber was sent.
//!
//! The watches are never held up by the database: derived events queue for one writer, which
//! stores whatever has queued in one statement, so under a burst of changes (a fleet rolling
//! out) a round trip carries hundreds of events rather than one.

mod addon_kinds;
mod alerts;
mod derive;
mod kinds;

use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};
use std::time::Duration;

use kubenest_api::events::StreamEvent;
use kubenest_store::{Event, EventLog, StoreError};
use serde_json::Value;
use tokio::sync::{broadcast, mpsc};
use tokio_util::sync::CancellationToken;

use crate::k8s::Index;

/// Events are kept this long for resuming clients.
const RETENTION: Duration = Duration::from_secs(7 * 24 * 3600);
/// At most this many events are stored in one statement.
const STORE_BATCH: usize = 1000;
/// A batch the database refuses is tried again this many times, a second apart, before it is
/// sent live unstored (a resuming client then misses it, which the log says).
const STORE_ATTEMPTS: u32 = 5;

/// One stored event, with its frame.
#[derive(Debug, Clone)]
pub struct StoredEvent {
    /// The event as the log holds it.
    pub event: Event,
    /// The event's Server-Sent Events frame, rendered once for every subscriber.
    pub frame: axum::body::Bytes,
}

/// A stored event reads as the event of the log it renders.
impl std::ops::Deref for StoredEvent {
    type Target = Event;

    fn deref(&self) -> &Event {
        &self.event
    }
}

impl StoredEvent {
    /// The event of the log with its [`Self::frame`]. The data is compact JSON, so it is one line.
    fn rendered(event: Event) -> Self {
        let mut stored = Self {
            event,
            frame: Default::default(),
        };
        let frame = format!(
            "id: {}\nevent: {}\ndata: {}\n\n",
            stored.id,
            stored.kind,
            stored.to_json()
        );
        stored.frame = frame.into();
        stored
    }

    /// The event as the stream sends it.
    pub fn to_json(&self) -> Value {
        let mut fields = match &self.payload {
            Value::Object(payload) => payload.clone(),
            _ => serde_json::Map::new(),
        };
        for common in StreamEvent::COMMON {
            fields.remove(common);
        }
        let event = StreamEvent {
            id: self.id,
            kind: self.kind.clone(),
            org: self.org_id.clone(),
            cluster_id: self.cluster_id.clone(),
            project_id: self.project_id.clone(),
            app_id: self.app_id.clone(),
            at: self.at.to_rfc3339(),
            fields,
        };
        serde_json::to_value(event).unwrap_or_default()
    }
}

/// An event just derived.
#[derive(Debug, Clone, PartialEq)]
struct NewEvent {
    id: i64,
    org_id: String,
    cluster_id: Option<String>,
    project_id: Option<String>,
    app_id: Option<String>,
    kind: &'static str,
    payload: Value,
}

/// The fan-out of stored events to this replica's subscribers.
#[derive(Debug, Clone)]
pub struct Events {
    log: EventLog,
    live: broadcast::Sender<Arc<StoredEvent>>,
    /// The newest event id stored before this process started or sent live since.
    newest: Arc<AtomicI64>,
    /// Open streams by user id, for [`MAX_STREAMS_PER_USER`].
    seats: Seats,
}

/// Open streams counted by user id.
#[derive(Debug, Clone, Default)]
pub struct Seats(Arc<std::sync::Mutex<std::collections::HashMap<String, usize>>>);

impl Seats {
    /// A place for one more stream of user `user`, unless they hold [`MAX_STREAMS_PER_USER`].
    pub fn take(&self, user: &str) -> Option<Seat> {
        let mut seats = self.0.lock().unwrap_or_else(|e| e.into_inner());
        let open = seats.entry(user.to_owned()).or_default();
        if *open >= MAX_STREAMS_PER_USER {
            return None;
        }
        *open += 1;
        Some(Seat {
            seats: self.0.clone(),
            user: user.to_owned(),
        })
    }
}

/// Event streams one user may hold open at once on one API server (a console tab holds one).
pub const MAX_STREAMS_PER_USER: usize = 16;

/// One user's place among the open streams, given back when the stream ends.
#[derive(Debug)]
pub struct Seat {
    seats: Arc<std::sync::Mutex<std::collections::HashMap<String, usize>>>,
    user: String,
}

impl Drop for Seat {
    fn drop(&mut self) {
        let mut seats = self.seats.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(open) = seats.get_mut(&self.user) {
            *open = open.saturating_sub(1);
            if *open == 0 {
                seats.remove(&self.user);
            }
        }
    }
}

impl Events {
    /// Starts deriving, storing and fanning out events until `shutdown`. A subscriber more than
    /// `buffer` events behind the newest catches up from the table.
    pub async fn start(
        client: &kube::Client,
        index: Arc<Index>,
        mirror: crate::mirror::MirrorWriter,
        log: EventLog,
        buffer: usize,
        shutdown: &CancellationToken,
    ) -> Result<Self, StoreError> {
        // What is stored already came before any subscriber of this process.
        let newest = log.newest_id().await?;
        let (live, _) = broadcast::channel(buffer.max(1));
        let events = Self {
            log,
            live,
            newest: Arc::new(AtomicI64::new(newest)),
            seats: Seats::default(),
        };
        let (derived, queue) = mpsc::unbounded_channel();
        tokio::spawn(derive::derive(
            client.clone(),
            index,
            mirror,
            derived,
            shutdown.clone(),
        ));
        tokio::spawn(store(events.clone(), queue, shutdown.clone()));
        tokio::spawn(prune(events.log.clone(), shutdown.clone()));
        Ok(events)
    }

    /// A place for one more stream of user `user` ([`Seats::take`]).
    pub fn seat(&self, user: &str) -> Option<Seat> {
        self.seats.take(user)
    }

    /// New events as they are stored, and the newest id sent before them: a subscriber that
    /// lags catches up from the table after it.
    pub fn subscribe(&self) -> (i64, broadcast::Receiver<Arc<StoredEvent>>) {
        // Read first, so the id is never newer than what the channel holds for this receiver:
        // an event sent in between came before the subscription, and a replay after `newest`
        // would include it rather than skip anything.
        let newest = self.newest.load(Ordering::Acquire);
        (newest, self.live.subscribe())
    }

    /// Stored events after `after` in the given organizations, oldest first, at most `limit`.
    pub async fn after(
        &self,
        after: i64,
        orgs: &[String],
        limit: i64,
    ) -> Result<Vec<StoredEvent>, StoreError> {
        let page = self.log.after(after, orgs, limit).await?;
        Ok(page.into_iter().map(StoredEvent::rendered).collect())
    }
}

async fn prune(log: EventLog, shutdown: CancellationToken) {
    let mut tick = tokio::time::interval(Duration::from_secs(3600));
    loop {
        tokio::select! {
            () = shutdown.cancelled() => return,
            _ = tick.tick() => {}
        }
        let cutoff = chrono::Utc::now()
            - chrono::Duration::from_std(RETENTION).unwrap_or(chrono::Duration::days(7));
        if let Err(error) = log.prune(cutoff).await {
            tracing::warn!(%error, "pruning old events failed");
        }
    }
}

/// Stores what `derive` queues, a batch at a time, and then fans each batch out in order.
async fn store(
    events: Events,
    mut queue: mpsc::UnboundedReceiver<NewEvent>,
    shutdown: CancellationToken,
) {
    let mut batch = Vec::with_capacity(STORE_BATCH);
    loop {
        batch.clear();
        tokio::select! {
            () = shutdown.cancelled() => return,
            n = queue.recv_many(&mut batch, STORE_BATCH) => if n == 0 { return },
        }
        let at = chrono::Utc::now();
        let stored: Vec<Event> = batch
            .drain(..)
            .map(|event| Event {
                id: event.id,
                org_id: event.org_id,
                cluster_id: event.cluster_id,
                project_id: event.project_id,
                app_id: event.app_id,
                kind: event.kind.to_owned(),
                payload: event.payload,
                at,
            })
            .collect();
        let mut attempt = 1;
        while let Err(error) = events.log.insert(&stored).await {
            if attempt == STORE_ATTEMPTS || shutdown.is_cancelled() {
                tracing::error!(%error, events = stored.len(),
                    "storing events failed; they are sent live only, and a resuming client misses them");
                break;
            }
            tracing::warn!(%error, attempt, "storing events failed; trying again");
            attempt += 1;
            tokio::time::sleep(Duration::from_secs(1)).await;
        }
        for event in stored {
            events.newest.fetch_max(event.id, Ordering::AcqRel);
            let _ = events.live.send(Arc::new(StoredEvent::rendered(event)));
        }
    }
}

/// The id of the `slot`-th kind of event a version makes (the same on every replica). Eight
/// slots (once four: the ids of events made since are larger than every earlier one, so a
/// client resuming from an old id misses nothing).
fn event_id(resource_version: &str, slot: i64) -> Option<i64> {
    resource_version
        .parse::<i64>()
        .ok()?
        .checked_mul(8)?
        .checked_add(slot)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_user_holds_a_bounded_number_of_streams_and_a_closed_one_gives_its_place_back() {
        let seats = Seats::default();
        let mut held: Vec<Seat> = (0..MAX_STREAMS_PER_USER)
            .map(|_| seats.take("greedy").unwrap())
            .collect();
        assert!(seats.take("greedy").is_none());
        assert!(seats.take("someone-else").is_some());
        held.pop();
        assert!(seats.take("greedy").is_some());
    }

    /// The stream's data is the API types' `StreamEvent`: the common fields first, the
    /// event's own beside them, never over them.
    #[test]
    fn an_event_is_sent_as_a_stream_event_with_its_own_fields_beside() {
        let event = Event {
            id: 7,
            org_id: "acme".into(),
            cluster_id: None,
            project_id: Some("p1".into()),
            app_id: Some("a1".into()),
            kind: "app.phase".into(),
            payload: serde_json::json!({"phase": "Running", "id": 99}),
            at: chrono::DateTime::UNIX_EPOCH,
        };
        let data = StoredEvent::rendered(event).to_json();
        assert_eq!(data["id"], 7);
        assert_eq!(data["org"], "acme");
        assert_eq!(data["phase"], "Running");
        let read: StreamEvent = serde_json::from_value(data).unwrap();
        assert_eq!(read.app_id.as_deref(), Some("a1"));
        assert_eq!(
            read.fields.get("phase"),
            Some(&serde_json::json!("Running"))
        );
    }
}
