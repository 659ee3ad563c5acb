//! The management cluster's Apps as this replica's event-stream watch last saw them
//! ([`crate::events`]), for what counts over a whole organization: the fence check charges each
//! App change against every App of the organization, and listing them from the API server on
//! every create made a fenced create 25 times slower than an unfenced one with 6,000 Apps
//! stored (bench/README.md, `api`). The fences themselves (Projects, Clusters, the
//! Organization) are few and read fresh, so a quota just set holds from the next request on.
//!
//! The store is a kube-runtime reflector store fed by the watch the event stream holds anyway,
//! so the management cluster serves no extra watch. A store is behind the API server by
//! the watch's delay (milliseconds). So that a caller's next request sees what the caller just
//! wrote, this replica's own App writes are laid over the store until the watch brings them or
//! something newer ([`Mirror::wrote`]). Two requests at once may both fit where only one of
//! them would, as they may with any read before a write; the hard limit of a project's quota is
//! its cluster's ResourceQuota, which Kubernetes admits pod by pod.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::FutureExt;
use kube::ResourceExt;
use kube::runtime::reflector::ObjectRef;
use kube::runtime::reflector::store::{Store, Writer};
use kube::runtime::watcher;
use kubenest_crds::App;

/// How long an App this replica wrote is laid over the store at most: the watch has brought it
/// long before, unless the watch is down (then the store is stale anyway and is relisted).
const OWN_WRITE_TTL: Duration = Duration::from_secs(5);

/// The reader, shared by every handler.
pub struct Mirror {
    apps: Store<App>,
    written: Mutex<Written>,
}

/// Apps this replica wrote, by (namespace, name), with when.
type Written = HashMap<(String, String), (Arc<App>, Instant)>;

impl std::fmt::Debug for Mirror {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Mirror")
            .field("apps", &self.apps.len())
            .finish_non_exhaustive()
    }
}

/// The writer, owned by the event stream's watch task.
pub struct MirrorWriter {
    apps: Writer<App>,
}

impl MirrorWriter {
    pub fn app(&mut self, event: &watcher::Event<App>) {
        self.apps.apply_watcher_event(event);
    }
}

impl std::fmt::Debug for MirrorWriter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MirrorWriter").finish_non_exhaustive()
    }
}

/// A resource version as the number the API server keeps (etcd's revision); `None` for any
/// other form, which is then never taken as newer.
fn version(app: &App) -> Option<u64> {
    app.resource_version()?.parse().ok()
}

/// Whether the store has its first complete list.
fn ready(store: &Store<App>) -> bool {
    matches!(store.wait_until_ready().now_or_never(), Some(Ok(())))
}

impl Mirror {
    pub fn new() -> (Arc<Self>, MirrorWriter) {
        let (apps, writer) = kube::runtime::reflector::store();
        let mirror = Self {
            apps,
            written: Mutex::default(),
        };
        let writer = MirrorWriter { apps: writer };
        (Arc::new(mirror), writer)
    }

    fn written(&self) -> std::sync::MutexGuard<'_, Written> {
        self.written.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Notes an App this replica has just created or changed, as the API server answered it.
    /// What was noted longer ago than [`OWN_WRITE_TTL`] is forgotten here too, so the notes stay
    /// as few as the writes of the last seconds even when no check reads them.
    pub fn wrote(&self, app: &App) {
        let key = (app.namespace().unwrap_or_default(), app.name_any());
        let mut written = self.written();
        written.retain(|_, (_, at)| at.elapsed() < OWN_WRITE_TTL);
        written.insert(key, (Arc::new(app.clone()), Instant::now()));
    }

    /// The Apps of `namespace` with this replica's own writes laid over them; `None` until the
    /// first list is complete (the caller then lists them itself).
    pub fn apps_in(&self, namespace: &str) -> Option<Vec<Arc<App>>> {
        if !ready(&self.apps) {
            return None;
        }
        let mut apps: HashMap<String, Arc<App>> = self
            .apps
            .state_filter(|a| a.namespace().as_deref() == Some(namespace))
            .into_iter()
            .map(|a| (a.name_any(), a))
            .collect();
        let mut written = self.written();
        written.retain(|(ns, name), (app, at)| {
            let seen = self.apps.get(&ObjectRef::new(name).within(ns));
            // Kept while the store has not caught up with it.
            let behind = seen.as_deref().and_then(version) < version(app)
                || (seen.is_none() && version(app).is_none());
            behind && at.elapsed() < OWN_WRITE_TTL
        });
        for ((ns, name), (app, _)) in written.iter() {
            if ns == namespace {
                apps.insert(name.clone(), app.clone());
            }
        }
        Some(apps.into_values().collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn app(name: &str, version: &str, replicas: u32) -> App {
        serde_json::from_value(serde_json::json!({
            "apiVersion": "kubenest.io/v1alpha1", "kind": "App",
            "metadata": {"name": name, "namespace": "org-acme", "resourceVersion": version},
            "spec": {"project": "shop", "components": [{"name": "web",
                "workload": {"image": "web:1", "replicas": replicas, "port": 8080}}]}
        }))
        .unwrap()
    }

    fn replicas(apps: &[Arc<App>], name: &str) -> Option<u32> {
        let app = apps.iter().find(|a| a.name_any() == name)?;
        Some(app.spec.components[0].workload.as_ref()?.replicas)
    }

    #[test]
    fn nothing_is_answered_before_the_first_list_is_complete() {
        let (mirror, mut writer) = Mirror::new();
        assert!(mirror.apps_in("org-acme").is_none());
        writer.app(&watcher::Event::Init);
        writer.app(&watcher::Event::InitApply(app("one", "10", 1)));
        assert!(mirror.apps_in("org-acme").is_none());
        writer.app(&watcher::Event::InitDone);
        let apps = mirror.apps_in("org-acme").unwrap();
        assert_eq!(replicas(&apps, "one"), Some(1));
        assert!(mirror.apps_in("org-other").unwrap().is_empty());
    }

    #[test]
    fn this_replicas_own_write_counts_until_the_watch_brings_it_or_something_newer() {
        let (mirror, mut writer) = Mirror::new();
        writer.app(&watcher::Event::Init);
        writer.app(&watcher::Event::InitApply(app("one", "10", 1)));
        writer.app(&watcher::Event::InitDone);
        // Created and changed here; the watch has not brought either yet.
        mirror.wrote(&app("two", "11", 2));
        mirror.wrote(&app("one", "12", 3));
        let apps = mirror.apps_in("org-acme").unwrap();
        assert_eq!(
            (replicas(&apps, "one"), replicas(&apps, "two")),
            (Some(3), Some(2))
        );
        // The watch brings the create, then a newer change of `one` by someone else.
        writer.app(&watcher::Event::Apply(app("two", "11", 2)));
        writer.app(&watcher::Event::Apply(app("one", "13", 5)));
        let apps = mirror.apps_in("org-acme").unwrap();
        assert_eq!(
            (replicas(&apps, "one"), replicas(&apps, "two")),
            (Some(5), Some(2))
        );
        assert!(
            mirror.written().is_empty(),
            "caught-up writes are forgotten"
        );
    }

    #[test]
    fn notes_of_old_writes_are_forgotten_even_when_nothing_reads_them() {
        let (mirror, _writer) = Mirror::new();
        mirror.wrote(&app("one", "10", 1));
        let long_ago = Instant::now().checked_sub(OWN_WRITE_TTL * 2).unwrap();
        mirror
            .written()
            .values_mut()
            .for_each(|(_, at)| *at = long_ago);
        mirror.wrote(&app("two", "11", 1));
        let names: Vec<String> = mirror.written().keys().map(|(_, n)| n.clone()).collect();
        assert_eq!(names, ["two"]);
    }
}
