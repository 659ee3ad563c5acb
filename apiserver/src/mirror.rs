//! The management cluster's objects as this replica's event-stream watches last saw them
//! ([`crate::events`]): Apps, Projects, Clusters and Organizations, in kube-runtime reflector
//! stores fed by the watches the event stream holds anyway, so the management cluster serves
//! no extra watch (the Organizations' watch is the one added for the mirror; they are few).
//!
//! Two readers:
//! - the fence check charges each App change against every App of the organization, and
//!   listing them from the API server on every create made a fenced create 25 times slower
//!   than an unfenced one with 6,000 Apps stored (bench/README.md, `api`). The fences
//!   themselves (Projects, Clusters, the Organization) are read fresh there, so a quota just
//!   set holds from the next request on;
//! - the App list (`GET /apps`) reads everything from here, as kube-apiserver serves a list
//!   from its watch cache: it made seven requests of the management cluster for one page
//!   (the project, its organization and cluster, the organization again with its Projects and
//!   Clusters, then the Apps), and served half the lists per second the management cluster did.
//!
//! A store is behind the API server by the watch's delay (milliseconds). So that a caller's
//! next request sees what the caller just wrote, this replica's own App writes are laid over
//! the store until the watch brings them or something newer ([`Mirror::wrote`]). Two requests
//! at once may both fit where only one of them would, as they may with any read before a
//! write; the hard limit of a project's quota is its cluster's ResourceQuota, which Kubernetes
//! admits pod by pod. A role read from here may be a watch's delay old, as a role read by
//! kube-apiserver's own authorizer from its informers is; a reader that finds no role (or no
//! object) here asks the API server before it answers 404 (`routes::apps::list`), so a grant or
//! a project just made is never refused.

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
use kubenest_crds::organization::Organization;
use kubenest_crds::project::Project;

/// How long an App this replica wrote is laid over the store at most: the watch has brought it
/// long before, unless the watch is down (then the store is stale anyway and is relisted).
const OWN_WRITE_TTL: Duration = Duration::from_secs(5);

/// The reader, shared by every handler.
pub struct Mirror {
    apps: Store<App>,
    projects: Store<Project>,
    clusters: Store<Cluster>,
    organizations: Store<Organization>,
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
    projects: Writer<Project>,
    clusters: Writer<Cluster>,
    organizations: Writer<Organization>,
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

    pub fn organization(&mut self, event: &watcher::Event<Organization>) {
        self.organizations.apply_watcher_event(event);
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
fn ready<K>(store: &Store<K>) -> bool
where
    K: kube::Resource + Clone + 'static,
    K::DynamicType: Eq + std::hash::Hash + Clone,
{
    matches!(store.wait_until_ready().now_or_never(), Some(Ok(())))
}

/// An organization with its Clusters and Projects, as the mirror holds them.
#[derive(Debug, Clone)]
pub struct OrgObjects {
    pub org: Arc<Organization>,
    pub clusters: Vec<Arc<Cluster>>,
    pub projects: Vec<Arc<Project>>,
}

impl OrgObjects {
    /// Copies of the objects, for the views and checks that own what they read.
    pub fn owned(&self) -> (Organization, Vec<Cluster>, Vec<Project>) {
        fn owned<K: Clone>(all: &[Arc<K>]) -> Vec<K> {
            all.iter().map(|o| (**o).clone()).collect()
        }
        (
            (*self.org).clone(),
            owned(&self.clusters),
            owned(&self.projects),
        )
    }
}

impl Mirror {
    pub fn new() -> (Arc<Self>, MirrorWriter) {
        use kube::runtime::reflector::store;
        let (apps, apps_writer) = store();
        let (projects, projects_writer) = store();
        let (clusters, clusters_writer) = store();
        let (organizations, organizations_writer) = store();
        let mirror = Self {
            apps,
            projects,
            clusters,
            organizations,
            written: Mutex::default(),
        };
        let writer = MirrorWriter {
            apps: apps_writer,
            projects: projects_writer,
            clusters: clusters_writer,
            organizations: organizations_writer,
        };
        (Arc::new(mirror), writer)
    }

    /// Whether every store has its first complete list.
    fn all_ready(&self) -> bool {
        ready(&self.apps)
            && ready(&self.projects)
            && ready(&self.clusters)
            && ready(&self.organizations)
    }

    /// Every organization; `None` until the stores have their first lists.
    pub fn organizations(&self) -> Option<Vec<Arc<Organization>>> {
        self.all_ready().then(|| self.organizations.state())
    }

    /// Organization `name` with its Clusters and Projects; `None` until the stores have their
    /// first lists, or when the organization is not (yet) here.
    pub fn org(&self, name: &str) -> Option<OrgObjects> {
        if !self.all_ready() {
            return None;
        }
        let org = self.organizations.get(&ObjectRef::new(name))?;
        let namespace = kubenest_domain::names::namespace_of(name).ok()?;
        let within = |ns: Option<String>| ns.as_deref() == Some(namespace.as_str());
        Some(OrgObjects {
            org,
            clusters: self.clusters.state_filter(|c| within(c.namespace())),
            projects: self.projects.state_filter(|p| within(p.namespace())),
        })
    }

    /// Waits (up to a second) until the mirror holds `written` or something newer, so this
    /// replica's next request reads what it just wrote: a fence set through it holds from the
    /// caller's next request on. Fences are set seldom; the wait is the watch's delay.
    pub async fn caught_up<K: Mirrored>(&self, written: &K) {
        // A dry run's object was never stored: no watch will bring it.
        if crate::dry_run::active() {
            return;
        }
        let Some(want) = written
            .resource_version()
            .and_then(|v| v.parse::<u64>().ok())
        else {
            return;
        };
        let store = K::store(self);
        let key = match written.namespace() {
            Some(namespace) => ObjectRef::new(&written.name_any()).within(&namespace),
            None => ObjectRef::new(&written.name_any()),
        };
        let deadline = Instant::now() + Duration::from_secs(1);
        while Instant::now() < deadline {
            let seen = store
                .get(&key)
                .and_then(|k| k.resource_version())
                .and_then(|v| v.parse::<u64>().ok());
            if seen.is_some_and(|seen| seen >= want) {
                return;
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        tracing::debug!(name = %written.name_any(), "the mirror did not catch up within a second");
    }

    /// The Project whose id (uid) is `id`; `None` until the stores have their first lists, or
    /// when it is not (yet) here.
    pub fn project(&self, id: &str) -> Option<Arc<Project>> {
        if !self.all_ready() {
            return None;
        }
        self.projects
            .find(|p| p.metadata.uid.as_deref() == Some(id))
    }

    fn written(&self) -> std::sync::MutexGuard<'_, Written> {
        self.written.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Notes an App this replica has just created or changed, as the API server answered it.
    /// What was noted longer ago than [`OWN_WRITE_TTL`] is forgotten here too, so the notes stay
    /// as few as the writes of the last seconds even when no check reads them.
    pub fn wrote(&self, app: &App) {
        // A dry run's App was never stored; lists must not show it.
        if crate::dry_run::active() {
            return;
        }
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

/// The kinds the mirror holds besides Apps, for [`Mirror::caught_up`].
pub trait Mirrored: kube::Resource<DynamicType = ()> + Clone + 'static {
    fn store(mirror: &Mirror) -> &Store<Self>;
}

impl Mirrored for Project {
    fn store(mirror: &Mirror) -> &Store<Self> {
        &mirror.projects
    }
}

impl Mirrored for Cluster {
    fn store(mirror: &Mirror) -> &Store<Self> {
        &mirror.clusters
    }
}

impl Mirrored for Organization {
    fn store(mirror: &Mirror) -> &Store<Self> {
        &mirror.organizations
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

    fn object<K: serde::de::DeserializeOwned>(
        kind: &str,
        namespace: Option<&str>,
        name: &str,
        uid: &str,
        version: &str,
        spec: serde_json::Value,
    ) -> K {
        serde_json::from_value(serde_json::json!({
            "apiVersion": "kubenest.io/v1alpha1", "kind": kind,
            "metadata": {"name": name, "namespace": namespace, "uid": uid, "resourceVersion": version},
            "spec": spec,
        }))
        .unwrap()
    }

    fn org(name: &str, version: &str) -> Organization {
        object(
            "Organization",
            None,
            name,
            &format!("uid-{name}"),
            version,
            serde_json::json!({"displayName": name}),
        )
    }

    fn project(namespace: &str, name: &str, version: &str) -> Project {
        object(
            "Project",
            Some(namespace),
            name,
            &format!("uid-{name}"),
            version,
            serde_json::json!({"cluster": "east", "namespace": name}),
        )
    }

    fn cluster(namespace: &str, name: &str) -> Cluster {
        object(
            "Cluster",
            Some(namespace),
            name,
            &format!("uid-{name}"),
            "1",
            serde_json::json!({}),
        )
    }

    /// Lists every kind once: `acme` with a project and a cluster, `other` with a project.
    fn listed() -> (Arc<Mirror>, MirrorWriter) {
        let (mirror, mut writer) = Mirror::new();
        writer.app(&watcher::Event::Init);
        writer.app(&watcher::Event::InitDone);
        writer.project(&watcher::Event::Init);
        writer.project(&watcher::Event::InitApply(project("org-acme", "shop", "5")));
        writer.project(&watcher::Event::InitApply(project(
            "org-other",
            "blog",
            "6",
        )));
        writer.project(&watcher::Event::InitDone);
        writer.cluster(&watcher::Event::Init);
        writer.cluster(&watcher::Event::InitApply(cluster("org-acme", "east")));
        writer.cluster(&watcher::Event::InitDone);
        assert!(mirror.org("acme").is_none(), "organizations not listed yet");
        writer.organization(&watcher::Event::Init);
        writer.organization(&watcher::Event::InitApply(org("acme", "2")));
        writer.organization(&watcher::Event::InitApply(org("other", "3")));
        writer.organization(&watcher::Event::InitDone);
        (mirror, writer)
    }

    #[test]
    fn an_organization_comes_with_its_own_projects_and_clusters_once_every_kind_is_listed() {
        let (mirror, _writer) = listed();
        let acme = mirror.org("acme").unwrap();
        let names = |all: &[Arc<Project>]| all.iter().map(|p| p.name_any()).collect::<Vec<_>>();
        assert_eq!(names(&acme.projects), ["shop"]);
        assert_eq!(acme.clusters.len(), 1);
        assert!(mirror.org("other").unwrap().clusters.is_empty());
        assert!(mirror.org("nobody").is_none());
        assert_eq!(mirror.organizations().unwrap().len(), 2);
        assert_eq!(mirror.project("uid-blog").unwrap().name_any(), "blog");
        assert!(mirror.project("uid-none").is_none());
    }

    #[tokio::test]
    async fn a_write_is_caught_up_with_once_the_watch_brings_it_or_something_newer() {
        let (mirror, mut writer) = listed();
        // Already there (the watch was quicker than the caller).
        mirror.caught_up(&project("org-acme", "shop", "5")).await;
        let waiting = {
            let mirror = mirror.clone();
            tokio::spawn(async move { mirror.caught_up(&project("org-acme", "shop", "8")).await })
        };
        tokio::task::yield_now().await;
        writer.project(&watcher::Event::Apply(project("org-acme", "shop", "9")));
        waiting.await.unwrap();
        assert_eq!(
            mirror
                .project("uid-shop")
                .unwrap()
                .resource_version()
                .as_deref(),
            Some("9")
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
