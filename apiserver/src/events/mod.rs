//! The live event stream's source: phase changes, deployments, drift, standalone addons' specs,
//! phases and revisions, cluster connectivity and alerts opening and resolving ([`alerts`]),
//! derived from watches of the management cluster.
//!
//! Every replica watches everything and derives the same events from the same object
//! versions. An event's id comes from the version it was seen in (`resourceVersion × 4 + slot`,
//! the slot telling apart the events one version can make), so every replica gives it the same
//! id without asking anyone. Each stores them (`ON CONFLICT DO NOTHING`: whichever replica is
//! first) in PostgreSQL's `events` table and then fans them out to its own subscribers. A client
//! resuming with `Last-Event-ID` on any replica, or a subscriber too slow for the live channel,
//! is replayed from the table, which therefore holds every event a subscriber was sent.
//!
//! The watches are never held up by the database: derived events queue for one writer, which
//! stores whatever has queued in one statement, so under a burst of changes (a fleet rolling
//! out) a round trip carries hundreds of events rather than one.

mod alerts;

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};
use std::time::Duration;

use futures::StreamExt;
use kube::api::Api;
use kube::runtime::watcher;
use kube::{Resource, ResourceExt};
use kubenest_crds::App;
use kubenest_crds::addon::AddonInstance;
use kubenest_crds::cluster::Cluster;
use kubenest_crds::project::Project;
use kubenest_domain::alerts::AlertKind;
use kubenest_store::{Event, EventLog, StoreError};
use serde_json::{Value, json};
use tokio::sync::{broadcast, mpsc};
use tokio_util::sync::CancellationToken;

use crate::k8s::{Index, Kind, org_name_of};

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
        let mut body = json!({
            "id": self.id,
            "kind": self.kind,
            "org": self.org_id,
            "cluster_id": self.cluster_id,
            "project_id": self.project_id,
            "app_id": self.app_id,
            "at": self.at.to_rfc3339(),
        });
        if let (Value::Object(body), Value::Object(payload)) = (&mut body, &self.payload) {
            for (k, v) in payload {
                body.entry(k.clone()).or_insert_with(|| v.clone());
            }
        }
        body
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
}

impl Events {
    /// Starts deriving, storing and fanning out events until `shutdown`. A subscriber more than
    /// `buffer` events behind the newest catches up from the table.
    pub async fn start(
        client: &kube::Client,
        index: Arc<Index>,
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
        };
        let (derived, queue) = mpsc::unbounded_channel();
        tokio::spawn(derive(client.clone(), index, derived, shutdown.clone()));
        tokio::spawn(store(events.clone(), queue, shutdown.clone()));
        tokio::spawn(prune(events.log.clone(), shutdown.clone()));
        Ok(events)
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

/// The id of the `slot`-th kind of event a version makes (the same on every replica).
fn event_id(resource_version: &str, slot: i64) -> Option<i64> {
    resource_version
        .parse::<i64>()
        .ok()?
        .checked_mul(4)?
        .checked_add(slot)
}

/// What the stream reports of an App, to compare versions by.
#[derive(Debug, Clone, Default, PartialEq)]
struct AppFacts {
    phase: Option<String>,
    deployment_id: Option<String>,
    drift: Value,
    /// Its `progress_deadline_exceeded` alert is open.
    alerting: bool,
}

/// The facts of a first sight of `app`.
#[cfg(test)]
fn app_facts(app: &App) -> AppFacts {
    facts_after(None, app)
}

/// The facts of `app` after `old` (an alert stays open until the App runs again).
fn facts_after(old: Option<&AppFacts>, app: &App) -> AppFacts {
    let status = app.status.clone().unwrap_or_default();
    AppFacts {
        alerting: alerts::app_alerting(old.is_some_and(|o| o.alerting), app),
        phase: status.phase,
        deployment_id: status.deployment_id,
        drift: status.sync.map_or(Value::Null, |s| {
            json!({
                "drift_detected": s.drift_detected,
                "drift_class": s.drift_class,
                "drift_details": s.drift_details.iter().map(|d| json!({
                    "resource": d.resource, "field": d.field, "desired": d.desired,
                    "observed": d.observed, "manager": d.manager,
                })).collect::<Vec<_>>(),
            })
        }),
    }
}

/// Where the objects of an organization namespace are: project and cluster uids by name.
#[derive(Debug, Default)]
struct Places {
    projects: HashMap<(String, String), (String, String)>,
    clusters: HashMap<(String, String), String>,
}

impl Places {
    fn app_place(&self, namespace: &str, project: &str) -> (Option<String>, Option<String>) {
        let Some((project_uid, cluster)) = self
            .projects
            .get(&(namespace.to_owned(), project.to_owned()))
        else {
            return (None, None);
        };
        let cluster_uid = self
            .clusters
            .get(&(namespace.to_owned(), cluster.clone()))
            .cloned();
        (Some(project_uid.clone()), cluster_uid)
    }
}

/// The events between two versions of an App (pure).
fn app_events(
    old: Option<&AppFacts>,
    app: &App,
    place: (Option<String>, Option<String>),
) -> Vec<NewEvent> {
    let namespace = app.namespace().unwrap_or_default();
    let Some(org) = org_name_of(&namespace) else {
        return Vec::new();
    };
    let uid = app.uid().unwrap_or_default();
    let version = app.resource_version().unwrap_or_default();
    let new = facts_after(old, app);
    let old = old.cloned().unwrap_or_default();
    let (project_id, cluster_id) = place;
    let event = |kind: &'static str, slot: i64, payload: Value| NewEvent {
        id: event_id(&version, slot).unwrap_or_default(),
        org_id: org.to_owned(),
        cluster_id: cluster_id.clone(),
        project_id: project_id.clone(),
        app_id: Some(uid.clone()),
        kind,
        payload,
    };
    let name = app.name_any();
    let mut events = Vec::new();
    if new.deployment_id != old.deployment_id
        && let Some(id) = &new.deployment_id
    {
        let revision = app.status.as_ref().and_then(|s| s.revision.clone());
        events.push(event(
            "deployment",
            0,
            json!({"app": name, "deployment_id": id, "revision": revision}),
        ));
    }
    if new.phase != old.phase
        && let Some(phase) = &new.phase
    {
        let message = app
            .status
            .as_ref()
            .and_then(|s| s.conditions.iter().find(|c| c.type_ == "Ready"))
            .map(|c| c.message.clone())
            .unwrap_or_default();
        events.push(event(
            "app.phase",
            1,
            json!({"app": name, "phase": phase, "previous": old.phase, "message": message}),
        ));
    }
    if new.drift != old.drift && !new.drift.is_null() {
        let mut payload = new.drift.clone();
        payload["app"] = name.clone().into();
        events.push(event("app.drift", 2, payload));
    }
    if new.alerting != old.alerting {
        // Slot 3 is `app.deleted`'s too, which never shares a version with this: a deletion's
        // event carries the deletion's own resourceVersion.
        let payload = alerts::payload(
            AlertKind::ProgressDeadlineExceeded,
            new.alerting,
            &name,
            &alerts::app_message(app),
        );
        events.push(event("alert", 3, payload));
    }
    // A version that is not a number cannot be ordered: such an event is not sent.
    events.retain(|e| e.id > 0);
    events
}

fn app_deleted(app: &App, place: (Option<String>, Option<String>)) -> Option<NewEvent> {
    let namespace = app.namespace().unwrap_or_default();
    let org = org_name_of(&namespace)?;
    let uid = app.uid()?;
    Some(NewEvent {
        id: event_id(&app.resource_version()?, 3)?,
        org_id: org.to_owned(),
        cluster_id: place.1,
        project_id: place.0,
        app_id: Some(uid),
        kind: "app.deleted",
        payload: json!({"app": app.name_any()}),
    })
}

fn cluster_event(old: Option<&str>, cluster: &Cluster) -> Option<NewEvent> {
    let namespace = cluster.namespace().unwrap_or_default();
    let org = org_name_of(&namespace)?;
    let state = serde_json::to_value(cluster.status.clone().unwrap_or_default().state).ok()?;
    let state = state.as_str()?.to_owned();
    if old == Some(state.as_str()) {
        return None;
    }
    let uid = cluster.uid()?;
    Some(NewEvent {
        id: event_id(&cluster.resource_version()?, 3)?,
        org_id: org.to_owned(),
        cluster_id: Some(uid),
        project_id: None,
        app_id: None,
        kind: "cluster.state",
        payload: json!({"cluster": cluster.name_any(), "state": state, "previous": old}),
    })
}

/// What the stream reports of a standalone addon, to compare versions by.
#[derive(Debug, Clone, Default, PartialEq)]
struct AddonFacts {
    generation: Option<i64>,
    phase: Option<String>,
    revision: Option<u32>,
    observed_revision: Option<u32>,
}

fn addon_facts(addon: &AddonInstance) -> AddonFacts {
    let status = addon.status.clone().unwrap_or_default();
    AddonFacts {
        generation: addon.metadata.generation,
        phase: status.phase,
        revision: status.revision,
        observed_revision: status.observed_revision,
    }
}

/// The event between two versions of a standalone addon: its spec (a change, or a rollback
/// writing an earlier revision back), phase or revisions changed (pure).
fn addon_event(
    old: Option<&AddonFacts>,
    addon: &AddonInstance,
    place: (Option<String>, Option<String>),
) -> Option<NewEvent> {
    let namespace = addon.namespace().unwrap_or_default();
    let org = org_name_of(&namespace)?;
    let new = addon_facts(addon);
    let old = old.cloned().unwrap_or_default();
    if new == old || new.phase.is_none() {
        return None;
    }
    let status = addon.status.clone().unwrap_or_default();
    Some(NewEvent {
        id: event_id(&addon.resource_version()?, 0)?,
        org_id: org.to_owned(),
        cluster_id: place.1,
        project_id: place.0,
        app_id: None,
        kind: "addon.changed",
        payload: json!({
            "addon": addon.name_any(), "addon_id": addon.uid()?, "phase": new.phase,
            "previous": old.phase, "revision": new.revision,
            "observed_revision": new.observed_revision, "message": status.message,
            "generation": new.generation,
        }),
    })
}

/// The `alert` event of a cluster whose alert opened or resolved in this version.
fn cluster_alert_event(alerting: bool, cluster: &Cluster) -> Option<NewEvent> {
    let namespace = cluster.namespace().unwrap_or_default();
    let org = org_name_of(&namespace)?;
    Some(NewEvent {
        id: event_id(&cluster.resource_version()?, 0)?,
        org_id: org.to_owned(),
        cluster_id: Some(cluster.uid()?),
        project_id: None,
        app_id: None,
        kind: "alert",
        payload: alerts::payload(
            AlertKind::HeartbeatMissed,
            alerting,
            &cluster.name_any(),
            &alerts::cluster_message(cluster),
        ),
    })
}

fn key_of<K: Resource>(object: &K) -> (String, String) {
    (
        object.meta().namespace.clone().unwrap_or_default(),
        object.meta().name.clone().unwrap_or_default(),
    )
}

/// Watches Apps, standalone addons, Projects and Clusters, queues the events their changes make
/// for [`store`], and keeps the id `index`'s entries of Apps, Projects and Clusters.
async fn derive(
    client: kube::Client,
    index: Arc<Index>,
    out: mpsc::UnboundedSender<NewEvent>,
    shutdown: CancellationToken,
) {
    let config = watcher::Config::default();
    let apps = watcher::watcher(Api::<App>::all(client.clone()), config.clone()).map(Change::App);
    let projects =
        watcher::watcher(Api::<Project>::all(client.clone()), config.clone()).map(Change::Project);
    let addons = watcher::watcher(Api::<AddonInstance>::all(client.clone()), config.clone())
        .map(Change::Addon);
    let clusters = watcher::watcher(Api::<Cluster>::all(client), config).map(Change::Cluster);
    let mut changes = futures::stream::select_all([
        apps.boxed(),
        addons.boxed(),
        projects.boxed(),
        clusters.boxed(),
    ]);
    let mut places = Places::default();
    let mut app_facts_by_uid: HashMap<String, AppFacts> = HashMap::new();
    let mut cluster_states: HashMap<String, String> = HashMap::new();
    let mut addon_facts_by_uid: HashMap<String, AddonFacts> = HashMap::new();
    let mut addons_listed = false;
    let mut cluster_alerts: HashMap<String, bool> = HashMap::new();
    // After the first complete list, an App seen for the first time in a relist is new: it was
    // created while the watch was down.
    let mut apps_listed = false;
    loop {
        let change = tokio::select! {
            () = shutdown.cancelled() => return,
            change = changes.next() => change,
        };
        let Some(change) = change else { return };
        let mut new = Vec::new();
        match change {
            Change::Project(Ok(watcher::Event::Apply(p) | watcher::Event::InitApply(p))) => {
                index.record(Kind::Project, &p.metadata);
                places.projects.insert(
                    key_of(&p),
                    (p.uid().unwrap_or_default(), p.spec.cluster.clone()),
                );
            }
            Change::Cluster(Ok(watcher::Event::Apply(c) | watcher::Event::InitApply(c))) => {
                index.record(Kind::Cluster, &c.metadata);
                let uid = c.uid().unwrap_or_default();
                places.clusters.insert(key_of(&c), uid.clone());
                let state = serde_json::to_value(c.status.clone().unwrap_or_default().state)
                    .ok()
                    .and_then(|v| v.as_str().map(str::to_owned))
                    .unwrap_or_default();
                // The first sight of a cluster is a baseline, not a change.
                let was = cluster_alerts.get(&uid).copied();
                let alerting = alerts::cluster_alerting(was.unwrap_or(false), &c);
                cluster_alerts.insert(uid.clone(), alerting);
                if was.is_some_and(|was| was != alerting) {
                    new.extend(cluster_alert_event(alerting, &c));
                }
                if let Some(old) = cluster_states.insert(uid, state)
                    && let Some(event) = cluster_event(Some(&old), &c)
                {
                    new.push(event);
                }
            }
            Change::App(Ok(watcher::Event::Apply(app))) => {
                index.record(Kind::App, &app.metadata);
                let uid = app.uid().unwrap_or_default();
                let place = places.app_place(&key_of(&app).0, &app.spec.project);
                let old = app_facts_by_uid.get(&uid);
                new = app_events(old, &app, place);
                let facts = facts_after(old, &app);
                app_facts_by_uid.insert(uid, facts);
            }
            Change::App(Ok(watcher::Event::InitApply(app))) => {
                index.record(Kind::App, &app.metadata);
                // On a relist, changes missed while disconnected are reported; on the first
                // list the current state is the baseline.
                let uid = app.uid().unwrap_or_default();
                let old = app_facts_by_uid.get(&uid);
                if old.is_some() || apps_listed {
                    let place = places.app_place(&key_of(&app).0, &app.spec.project);
                    new = app_events(old, &app, place);
                }
                let facts = facts_after(old, &app);
                app_facts_by_uid.insert(uid, facts);
            }
            Change::App(Ok(watcher::Event::InitDone)) => {
                if apps_listed {
                    tracing::info!(
                        "the App watch relisted; missed changes were derived from the difference"
                    );
                }
                apps_listed = true;
            }
            Change::App(Ok(watcher::Event::Delete(app))) => {
                index.forget(Kind::App, &app.metadata);
                let uid = app.uid().unwrap_or_default();
                app_facts_by_uid.remove(&uid);
                let place = places.app_place(&key_of(&app).0, &app.spec.project);
                new.extend(app_deleted(&app, place));
            }
            Change::Addon(Ok(watcher::Event::Apply(addon))) => {
                let uid = addon.uid().unwrap_or_default();
                let old = addon_facts_by_uid.insert(uid, addon_facts(&addon));
                let place = places.app_place(&key_of(&addon).0, &addon.spec.project);
                new.extend(addon_event(old.as_ref(), &addon, place));
            }
            Change::Addon(Ok(watcher::Event::InitApply(addon))) => {
                // As for Apps: the first list is the baseline; a relist reports what changed.
                let uid = addon.uid().unwrap_or_default();
                let old = addon_facts_by_uid.insert(uid, addon_facts(&addon));
                if old.is_some() || addons_listed {
                    let place = places.app_place(&key_of(&addon).0, &addon.spec.project);
                    new.extend(addon_event(old.as_ref(), &addon, place));
                }
            }
            Change::Addon(Ok(watcher::Event::InitDone)) => addons_listed = true,
            Change::Addon(Ok(watcher::Event::Delete(addon))) => {
                addon_facts_by_uid.remove(&addon.uid().unwrap_or_default());
            }
            Change::Project(Ok(watcher::Event::Delete(p))) => {
                index.forget(Kind::Project, &p.metadata);
                places.projects.remove(&key_of(&p));
            }
            Change::Cluster(Ok(watcher::Event::Delete(c))) => {
                index.forget(Kind::Cluster, &c.metadata);
                places.clusters.remove(&key_of(&c));
                cluster_states.remove(&c.uid().unwrap_or_default());
                cluster_alerts.remove(&c.uid().unwrap_or_default());
            }
            Change::App(Err(e))
            | Change::Addon(Err(e))
            | Change::Project(Err(e))
            | Change::Cluster(Err(e)) => {
                tracing::debug!(error = %e, "event watch error; the watcher retries");
                tokio::time::sleep(Duration::from_millis(500)).await;
            }
            Change::App(Ok(_))
            | Change::Addon(Ok(_))
            | Change::Project(Ok(_))
            | Change::Cluster(Ok(_)) => {}
        }
        for event in new {
            if out.send(event).is_err() {
                return;
            }
        }
    }
}

// One change is alive at a time, in one task: its size does not matter.
#[allow(clippy::large_enum_variant)]
enum Change {
    App(Result<watcher::Event<App>, watcher::Error>),
    Addon(Result<watcher::Event<AddonInstance>, watcher::Error>),
    Project(Result<watcher::Event<Project>, watcher::Error>),
    Cluster(Result<watcher::Event<Cluster>, watcher::Error>),
}

#[cfg(test)]
mod tests {
    use super::*;
    use kubenest_crds::app::{AppSpec, AppStatus};

    fn app(phase: Option<&str>, deployment: Option<&str>, version: &str) -> App {
        let mut app = App::new(
            "shop",
            AppSpec {
                project: "web".into(),
                components: vec![],
                progress_deadline_seconds: 600,
                paused: false,
            },
        );
        app.metadata.namespace = Some("org-acme".into());
        app.metadata.uid = Some("u1".into());
        app.metadata.resource_version = Some(version.into());
        app.status = Some(AppStatus {
            phase: phase.map(str::to_owned),
            deployment_id: deployment.map(str::to_owned),
            ..AppStatus::default()
        });
        app
    }

    #[test]
    fn a_new_deployment_and_a_phase_change_are_two_events_keyed_by_version() {
        let before = app_facts(&app(Some("Running"), Some("d1"), "5"));
        let after = app(Some("Deploying"), Some("d2"), "6");
        let events = app_events(Some(&before), &after, (Some("p".into()), None));
        let kinds: Vec<&str> = events.iter().map(|e| e.kind).collect();
        assert_eq!(kinds, ["deployment", "app.phase"]);
        assert_eq!(events[1].id, 6 * 4 + 1);
        assert_eq!(events[1].org_id, "acme");
        assert_eq!(events[1].payload["previous"], "Running");
        assert!(app_events(Some(&app_facts(&after)), &after, (None, None)).is_empty());
    }

    #[test]
    fn an_addon_makes_an_event_when_its_phase_or_revisions_change_and_not_otherwise() {
        use kubenest_crds::addon::{AddonInstanceSpec, AddonInstanceStatus};
        let addon = |phase: &str, revision: u32, version: &str| {
            let mut addon = AddonInstance::new(
                "db",
                serde_json::from_value::<AddonInstanceSpec>(
                    json!({"project": "web", "definition": "postgres"}),
                )
                .unwrap(),
            );
            addon.metadata.namespace = Some("org-acme".into());
            addon.metadata.uid = Some("a1".into());
            addon.metadata.resource_version = Some(version.into());
            addon.status = Some(AddonInstanceStatus {
                phase: Some(phase.into()),
                revision: Some(revision),
                ..Default::default()
            });
            addon
        };
        let installing = addon("Installing", 1, "7");
        let first = addon_event(None, &installing, (Some("p".into()), Some("c".into())));
        let first = first.unwrap();
        assert_eq!((first.kind, first.id), ("addon.changed", 7 * 4));
        assert_eq!(first.payload["addon_id"], "a1");
        assert_eq!(first.project_id.as_deref(), Some("p"));
        let seen = addon_facts(&installing);
        assert_eq!(
            addon_event(Some(&seen), &addon("Installing", 1, "8"), (None, None)),
            None
        );
        let mut respecified = addon("Installing", 1, "8");
        respecified.metadata.generation = Some(2);
        assert!(addon_event(Some(&seen), &respecified, (None, None)).is_some());
        let upgraded = addon_event(Some(&seen), &addon("Installing", 2, "9"), (None, None));
        assert_eq!(upgraded.unwrap().payload["revision"], 2);
        let ready = addon_event(Some(&seen), &addon("Ready", 1, "10"), (None, None)).unwrap();
        assert_eq!(ready.payload["previous"], "Installing");
    }

    #[test]
    fn a_failed_deadline_is_an_alert_event_until_the_app_runs_again() {
        let mut failed = app(Some("Failed"), Some("d1"), "7");
        failed.status.as_mut().unwrap().conditions.push(
            k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition {
                type_: "Ready".into(),
                status: "False".into(),
                reason: "ProgressDeadlineExceeded".into(),
                message: "revision r1 was not running within 10s".into(),
                observed_generation: None,
                last_transition_time: k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
                    k8s_openapi::jiff::Timestamp::UNIX_EPOCH,
                ),
            },
        );
        let running = app_facts(&app(Some("Running"), Some("d1"), "6"));
        let events = app_events(Some(&running), &failed, (None, None));
        let alert = events.iter().find(|e| e.kind == "alert").unwrap();
        assert_eq!(alert.id, 7 * 4 + 3);
        assert_eq!(alert.payload["state"], "open");
        assert_eq!(alert.payload["alert"], "progress_deadline_exceeded");

        let open = facts_after(Some(&running), &failed);
        let deploying = app(Some("Deploying"), Some("d2"), "8");
        let events = app_events(Some(&open), &deploying, (None, None));
        assert!(events.iter().all(|e| e.kind != "alert"), "not running yet");
        let still = facts_after(Some(&open), &deploying);
        let back = app(Some("Running"), Some("d2"), "9");
        let events = app_events(Some(&still), &back, (None, None));
        let alert = events.iter().find(|e| e.kind == "alert").unwrap();
        assert_eq!(alert.payload["state"], "resolved");
    }
}
