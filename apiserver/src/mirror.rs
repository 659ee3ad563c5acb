//! The management cluster's Apps, Projects and Clusters as this replica's event-stream watches
//! last saw them ([`crate::events`]), for what counts over a whole organization: the fence
//! check charges each App change against every App of the organization, and listing them from
//! the API server on every create cost 25 times the create itself with 5,000 Apps stored
//! (bench/README.md, `api`).
//!
//! The stores are kube-runtime reflector stores fed by the watches the event stream holds
//! anyway, so the management cluster serves no extra watch. A store is behind the API server by
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
use kubenest_crds::cluster::Cluster;
use kubenest_crds::project::Project;

/// How long an App this replica wrote is laid over the store at most: the watch has brought it
/// long before, unless the watch is down (then the store is stale anyway and is relisted).
const OWN_WRITE_TTL: Duration = Duration::from_secs(5);

/// The readers, shared by every handler.
pub struct Mirror {
    apps: Store<App>,
    projects: Store<Project>,
    clusters: Store<Cluster>,
    written: Mutex<Written>,
}

/// Apps this replica wrote, by (namespace, name), with when.
type Written = HashMap<(String, String), (Arc<App>, Instant)>;

impl std::fmt::Debug for Mirror {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Mirror")
            .field("apps", &self.apps.len())
            .field("projects", &self.projects.len())
            .field("clusters", &self.clusters.len())
            .finish_non_exhaustive()
    }
}

/// The writers, owned by the event stream's watch task.
pub struct MirrorWriter {
    apps: Writer<App>,
    projects: Writer<Project>,
    clusters: Writer<Cluster>,
}

impl MirrorWriter {
    pub fn app(&mut self, event: &watcher::Event<App>) {
        self.apps.apply_watcher_event(event);
    }

    pub fn project(&mut self, event: &watcher::Event<Project>) {
        self.projects.apply_watcher_event(event);
    }

    pub fn cluster(&mut self, event: &watcher::Event<Cluster>) {
        self.clusters.apply_watcher_event(event);
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

/// Whether every store has its first complete list.
fn ready<K: kube::Resource + Clone + 'static>(store: &Store<K>) -> bool
where
    K::DynamicType: Eq + std::hash::Hash + Clone,
{
    matches!(store.wait_until_ready().now_or_never(), Some(Ok(())))
}

impl Mirror {
    pub fn new() -> (Arc<Self>, MirrorWriter) {
        let (apps, apps_writer) = kube::runtime::reflector::store();
        let (projects, projects_writer) = kube::runtime::reflector::store();
        let (clusters, clusters_writer) = kube::runtime::reflector::store();
        let mirror = Self {
            apps,
            projects,
            clusters,
            written: Mutex::default(),
        };
        let writer = MirrorWriter {
            apps: apps_writer,
            projects: projects_writer,
            clusters: clusters_writer,
        };
        (Arc::new(mirror), writer)
    }

    fn written(&self) -> std::sync::MutexGuard<'_, Written> {
        self.written.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Notes an App this replica has just created or changed, as the API server answered it.
    pub fn wrote(&self, app: &App) {
        let key = (app.namespace().unwrap_or_default(), app.name_any());
        self.written()
            .insert(key, (Arc::new(app.clone()), Instant::now()));
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

    /// The Projects of `namespace`; `None` until the first list is complete.
    pub fn projects_in(&self, namespace: &str) -> Option<Vec<Project>> {
        ready(&self.projects).then(|| {
            self.projects
                .state_filter(|p| p.namespace().as_deref() == Some(namespace))
                .iter()
                .map(|p| (**p).clone())
                .collect()
        })
    }

    /// The Clusters of `namespace`; `None` until the first list is complete.
    pub fn clusters_in(&self, namespace: &str) -> Option<Vec<Cluster>> {
        ready(&self.clusters).then(|| {
            self.clusters
                .state_filter(|c| c.namespace().as_deref() == Some(namespace))
                .iter()
                .map(|c| (**c).clone())
                .collect()
        })
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
}
