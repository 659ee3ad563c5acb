//! The controllers' caches: reflector stores of the objects every controller and the status
//! router look up (Apps, Projects, AddonInstances, Clusters, organization namespaces,
//! AddonDefinitions and Organizations), and the lookups across them (which cluster an object lives on).
//!
//! This is the bottom floor of the controllers' shared layer: [`crate::placement`],
//! [`crate::plane`] and the status router read it; it reads none of them.

use std::sync::Arc;

use futures::StreamExt;
use k8s_openapi::api::core::v1::Namespace;
use kube::ResourceExt;
use kube::api::Api;
use kube::runtime::reflector::{self, ObjectRef, Store};
use kube::runtime::{WatchStreamExt, watcher};
use kubenest_crds::addon::{AddonDefinition, AddonInstance};
use kubenest_crds::app::App;
use kubenest_crds::cluster::Cluster;
use kubenest_crds::names::labels;
use kubenest_crds::organization::Organization;
use kubenest_crds::project::Project;
use serde::de::DeserializeOwned;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

/// Caches of the objects events are about.
#[derive(Clone)]
pub struct Caches {
    pub apps: Store<App>,
    pub projects: Store<Project>,
    pub addons: Store<AddonInstance>,
    pub clusters: Store<Cluster>,
    /// Organization namespaces (labelled with their organization).
    pub namespaces: Store<Namespace>,
    pub definitions: Store<AddonDefinition>,
    /// Organizations, for their defaults (an App's verification).
    pub organizations: Store<Organization>,
}

impl std::fmt::Debug for Caches {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Caches").finish_non_exhaustive()
    }
}

fn cache<K>(api: Api<K>, config: watcher::Config, shutdown: &CancellationToken) -> Store<K>
where
    K: kube::Resource<DynamicType = ()>
        + Clone
        + DeserializeOwned
        + std::fmt::Debug
        + Send
        + Sync
        + 'static,
{
    let (reader, writer) = reflector::store();
    let stream = reflector::reflector(writer, watcher(api, config))
        .default_backoff()
        .applied_objects();
    let shutdown = shutdown.clone();
    tokio::spawn(async move {
        let drain = stream.for_each(|_| async {});
        tokio::select! {
            _ = shutdown.cancelled() => {}
            _ = drain => {}
        }
    });
    reader
}

fn all() -> watcher::Config {
    watcher::Config::default()
}

/// The Apps cache, whose watch the App controller shares: one list and one watch of all Apps
/// for both. Every object the cache takes in is handed on to `apps` (unbounded, so the cache
/// fills even before the controller runs; what waits there is only pointers into the cache).
fn shared_apps(
    client: &kube::Client,
    shutdown: &CancellationToken,
) -> (Store<App>, mpsc::UnboundedReceiver<Arc<App>>) {
    let (reader, writer) = reflector::store_shared(1024);
    let mut subscriber = writer.subscribe();
    let (tx, rx) = mpsc::unbounded_channel();
    let stream = watcher(Api::<App>::all(client.clone()), all().any_semantic())
        .default_backoff()
        .reflect_shared(writer)
        .applied_objects();
    let shutdown = shutdown.clone();
    tokio::spawn(async move {
        let drain = stream.for_each(|_| async {});
        let forward = async {
            while let Some(app) = match subscriber.as_mut() {
                Some(s) => s.next().await,
                None => None,
            } {
                if tx.send(app).is_err() {
                    break;
                }
            }
        };
        tokio::select! {
            _ = shutdown.cancelled() => {}
            _ = drain => {}
            _ = forward => {}
        }
    });
    (reader, rx)
}

impl Caches {
    /// Starts the caches and waits until each has listed once. Also returns the stream of
    /// Apps for the App controller (sharing the Apps cache's watch).
    pub async fn start(
        client: &kube::Client,
        shutdown: &CancellationToken,
    ) -> (Self, mpsc::UnboundedReceiver<Arc<App>>) {
        let (apps, app_stream) = shared_apps(client, shutdown);
        let caches = Self {
            apps,
            projects: cache(Api::all(client.clone()), all(), shutdown),
            addons: cache(Api::all(client.clone()), all(), shutdown),
            clusters: cache(Api::all(client.clone()), all(), shutdown),
            namespaces: cache(
                Api::all(client.clone()),
                all().labels(labels::ORGANIZATION),
                shutdown,
            ),
            definitions: cache(Api::all(client.clone()), all(), shutdown),
            organizations: cache(Api::all(client.clone()), all(), shutdown),
        };
        let _ = tokio::join!(
            caches.apps.wait_until_ready(),
            caches.projects.wait_until_ready(),
            caches.addons.wait_until_ready(),
            caches.clusters.wait_until_ready(),
            caches.namespaces.wait_until_ready(),
            caches.definitions.wait_until_ready(),
            caches.organizations.wait_until_ready(),
        );
        (caches, app_stream)
    }

    /// Organization `name`, as the cache holds it.
    pub fn organization(&self, name: &str) -> Option<Arc<Organization>> {
        self.organizations.get(&ObjectRef::new(name))
    }

    /// The Apps of project `project` in `namespace`.
    pub fn apps_of(&self, namespace: &str, project: &str) -> Vec<ObjectRef<App>> {
        self.apps
            .state()
            .iter()
            .filter(|a| a.namespace().as_deref() == Some(namespace) && a.spec.project == project)
            .map(|a| ObjectRef::from_obj(&**a))
            .collect()
    }

    /// The AddonInstances of project `project` in `namespace`.
    pub fn addons_of(&self, namespace: &str, project: &str) -> Vec<ObjectRef<AddonInstance>> {
        self.addons
            .state()
            .iter()
            .filter(|a| a.namespace().as_deref() == Some(namespace) && a.spec.project == project)
            .map(|a| ObjectRef::from_obj(&**a))
            .collect()
    }

    /// The AddonInstances that name AddonDefinition `definition` (in any organization: a
    /// definition of the system namespace serves them all).
    pub fn addons_using(&self, definition: &str) -> Vec<ObjectRef<AddonInstance>> {
        self.addons
            .state()
            .iter()
            .filter(|a| a.spec.definition == definition)
            .map(|a| ObjectRef::from_obj(&**a))
            .collect()
    }

    /// The Projects on Cluster `cluster` in `namespace`.
    pub fn projects_on(&self, namespace: &str, cluster: &str) -> Vec<ObjectRef<Project>> {
        self.projects
            .state()
            .iter()
            .filter(|p| p.namespace().as_deref() == Some(namespace) && p.spec.cluster == cluster)
            .map(|p| ObjectRef::from_obj(&**p))
            .collect()
    }

    /// The id of the cluster that project `project` in `namespace` lives on.
    pub(crate) fn cluster_of_project(&self, namespace: &str, project: &str) -> Option<String> {
        let project = self
            .projects
            .get(&ObjectRef::new(project).within(namespace))?;
        self.cluster_of(namespace, &project.spec.cluster)
    }

    pub(crate) fn cluster_of(&self, namespace: &str, cluster: &str) -> Option<String> {
        self.clusters
            .get(&ObjectRef::new(cluster).within(namespace))?
            .status
            .as_ref()?
            .cluster_id
            .clone()
    }

    /// The App with uid `uid`, if it lives on cluster `cluster_id`.
    pub fn app_on(&self, cluster_id: &str, uid: &str) -> Option<Arc<App>> {
        let app = self.apps.find(|a| a.uid().as_deref() == Some(uid))?;
        let namespace = app.namespace()?;
        (self.cluster_of_project(&namespace, &app.spec.project)? == cluster_id).then_some(app)
    }

    /// The Apps on cluster `cluster_id`.
    pub fn apps_on(&self, cluster_id: &str) -> Vec<Arc<App>> {
        self.apps
            .state()
            .into_iter()
            .filter(|app| {
                app.namespace()
                    .and_then(|ns| self.cluster_of_project(&ns, &app.spec.project))
                    .as_deref()
                    == Some(cluster_id)
            })
            .collect()
    }

    /// The Project with uid `uid`, if it lives on cluster `cluster_id`.
    pub fn project_on(&self, cluster_id: &str, uid: &str) -> Option<Arc<Project>> {
        let project = self.projects.find(|p| p.uid().as_deref() == Some(uid))?;
        (self.cluster_of(&project.namespace()?, &project.spec.cluster)? == cluster_id)
            .then_some(project)
    }

    /// The AddonInstance with uid `uid`, if it lives on cluster `cluster_id`.
    pub fn addon_on(&self, cluster_id: &str, uid: &str) -> Option<Arc<AddonInstance>> {
        let addon = self.addons.find(|a| a.uid().as_deref() == Some(uid))?;
        let namespace = addon.namespace()?;
        (self.cluster_of_project(&namespace, &addon.spec.project)? == cluster_id).then_some(addon)
    }

    /// The Cluster whose id is `cluster_id`.
    pub fn cluster(&self, cluster_id: &str) -> Option<Arc<Cluster>> {
        self.clusters
            .find(|c| c.uid().as_deref() == Some(cluster_id))
    }
}
