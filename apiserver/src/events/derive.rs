//! The watches behind the stream: every change of an App, a standalone addon, a Project or a
//! Cluster is turned into its events ([`super::kinds`]) and queued for the writer.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use kube::ResourceExt;
use kube::api::Api;
use kube::runtime::watcher;
use kubenest_crds::App;
use kubenest_crds::addon::AddonInstance;
use kubenest_crds::cluster::Cluster;
use kubenest_crds::organization::Organization;
use kubenest_crds::project::Project;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use super::addon_kinds::*;
use super::kinds::*;
use super::{NewEvent, alerts};
use crate::k8s::{Index, Kind};
use crate::mirror::MirrorWriter;

/// Watches Apps, standalone addons, Projects, Clusters and Organizations, queues the events
/// their changes make for the writer (`super::store`), and keeps the id `index`'s entries of
/// Apps, Projects and Clusters and the [`crate::mirror`] of Apps, Projects, Clusters and
/// Organizations.
pub(super) async fn derive(
    client: kube::Client,
    index: Arc<Index>,
    mut mirror: MirrorWriter,
    out: mpsc::UnboundedSender<NewEvent>,
    shutdown: CancellationToken,
) {
    let config = watcher::Config::default();
    let apps = watcher::watcher(Api::<App>::all(client.clone()), config.clone()).map(Change::App);
    let projects =
        watcher::watcher(Api::<Project>::all(client.clone()), config.clone()).map(Change::Project);
    let addons = watcher::watcher(Api::<AddonInstance>::all(client.clone()), config.clone())
        .map(Change::Addon);
    let clusters =
        watcher::watcher(Api::<Cluster>::all(client.clone()), config.clone()).map(Change::Cluster);
    let organizations =
        watcher::watcher(Api::<Organization>::all(client), config).map(Change::Organization);
    let mut changes = futures::stream::select_all([
        apps.boxed(),
        addons.boxed(),
        projects.boxed(),
        clusters.boxed(),
        organizations.boxed(),
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
        match &change {
            Change::App(Ok(event)) => mirror.app(event),
            Change::Project(Ok(event)) => mirror.project(event),
            Change::Cluster(Ok(event)) => mirror.cluster(event),
            Change::Organization(Ok(event)) => mirror.organization(event),
            _ => {}
        }
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
            | Change::Cluster(Err(e))
            | Change::Organization(Err(e)) => {
                tracing::debug!(error = %e, "event watch error; the watcher retries");
                tokio::time::sleep(Duration::from_millis(500)).await;
            }
            Change::App(Ok(_))
            | Change::Addon(Ok(_))
            | Change::Project(Ok(_))
            | Change::Cluster(Ok(_))
            | Change::Organization(Ok(_)) => {}
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
    /// Only for the mirror: an organization's changes make no events of their own.
    Organization(Result<watcher::Event<Organization>, watcher::Error>),
}
