//! The Project controller: a project is one namespace on one cluster.
//!
//! It sends `project.ensure` (with backoff) until the agent reports the namespace `Ready` for the
//! project's current generation; until then the project is `Pending` with a reason. Two projects
//! can never share a namespace on one cluster: the older claim wins, the newer is `Failed` with
//! `NamespaceConflict` and never touches the cluster. Deletion waits until no App or
//! AddonInstance uses the project, then sends `project.delete` and holds a finalizer until the
//! agent confirms the namespace is gone.

use kubenest_crds::names::{finalizers, labels};
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use kube::api::{Api, ListParams, Patch, PatchParams};
use kube::runtime::controller::{Action, Controller};
use kube::runtime::finalizer::{Event, finalizer};
use kube::runtime::reflector::ObjectRef;
use kube::runtime::watcher;
use kube::{Resource, ResourceExt};
use kubenest_contracts as wire;
use kubenest_crds::addon::AddonInstance;
use kubenest_crds::app::App;
use kubenest_crds::cluster::Cluster;
use kubenest_crds::project::{Project, ProjectPhase, ProjectStatus};
use serde_json::json;

use crate::conditions::{self, DELETION_BLOCKED, PROGRESSING, READY};
use crate::intents::{ObjectKey, Sent};
use crate::placement::{self, Placement, Unplaced};
use crate::plane::Plane;
pub use crate::reconcile::Error;
use crate::reconcile::{await_deletion, error_policy, key_of};

/// The project that holds `namespace` on `cluster` among `projects` (pure): the oldest claim
/// that is not being deleted, ties broken by name.
pub fn owner_of<'a>(
    projects: &'a [Project],
    cluster: &str,
    namespace: &str,
) -> Option<&'a Project> {
    projects
        .iter()
        .filter(|p| p.spec.cluster == cluster && p.spec.namespace == namespace)
        .filter(|p| p.meta().deletion_timestamp.is_none() || claimed(p))
        .min_by_key(|p| {
            (
                !claimed(p),
                p.meta().creation_timestamp.as_ref().map(|t| t.0),
                p.name_any(),
            )
        })
}

/// Whether the project's namespace was ever confirmed on its cluster.
fn claimed(project: &Project) -> bool {
    project
        .status
        .as_ref()
        .and_then(|s| s.cluster_phase.as_deref())
        .is_some()
}

async fn write_status(
    plane: &Plane,
    key: &ObjectKey,
    old: &ProjectStatus,
    new: &ProjectStatus,
) -> Result<(), Error> {
    if old == new {
        return Ok(());
    }
    let patch = json!({ "status": { "phase": new.phase, "conditions": new.conditions }});
    Api::<Project>::namespaced(plane.client.clone(), &key.namespace)
        .patch_status(&key.name, &PatchParams::default(), &Patch::Merge(&patch))
        .await?;
    Ok(())
}

async fn reconcile(project: Arc<Project>, plane: Arc<Plane>) -> Result<Action, Error> {
    let key = key_of(&*project)?;
    let api: Api<Project> = Api::namespaced(plane.client.clone(), &key.namespace);
    finalizer(&api, finalizers::PROJECT, project, |event| async {
        match event {
            Event::Apply(project) => apply(&project, &plane, &key).await,
            Event::Cleanup(project) => cleanup(&project, &plane, &key).await,
        }
    })
    .await
    .map_err(|e| Error::Finalizer(Box::new(e)))
}

/// The placement of a project itself (its cluster and organization).
fn place(plane: &Plane, project: &Project, key: &ObjectKey) -> Result<Placement, Unplaced> {
    let org_id = placement::org_in(&plane.caches, &key.namespace)
        .ok_or_else(|| Unplaced::NotInOrganization(key.namespace.clone()))?;
    let cluster_id = placement::cluster(&plane.caches, &key.namespace, &project.spec.cluster)?;
    Ok(Placement {
        org_id,
        project: project.clone(),
        project_id: key.uid.clone(),
        cluster_name: project.spec.cluster.clone(),
        cluster_id,
        namespace: project.spec.namespace.clone(),
    })
}

fn ensure_command(project: &Project, placement: &Placement) -> wire::ProjectEnsure {
    let labels: BTreeMap<String, String> = [
        (labels::PROJECT.to_owned(), project.name_any()),
        (labels::ORGANIZATION.to_owned(), placement.org_id.clone()),
    ]
    .into();
    wire::ProjectEnsure {
        project_id: wire::Id::new(&placement.project_id),
        namespace: wire::Name::new(&project.spec.namespace),
        labels,
        registry_secret: project.spec.registry_secret.as_deref().map(wire::Name::new),
    }
}

async fn apply(project: &Project, plane: &Plane, key: &ObjectKey) -> Result<Action, Error> {
    let generation = project.metadata.generation.unwrap_or(0);
    let old = project.status.clone().unwrap_or_default();
    let mut status = old.clone();

    // A namespace the agent confirmed for this very project and generation is the project's
    // own: the cluster labels it with one project only. Any other claim must see every project
    // that exists, listed from the API server, not the cache. (Apps and addons wake their
    // project on every change, so this is most reconciles.)
    let confirmed =
        old.cluster_phase.as_deref() == Some("Ready") && old.ensured_generation == Some(generation);
    let siblings = if confirmed {
        Vec::new()
    } else {
        Api::<Project>::namespaced(plane.client.clone(), &key.namespace)
            .list(&ListParams::default())
            .await?
            .items
    };
    if let Some(owner) = owner_of(&siblings, &project.spec.cluster, &project.spec.namespace)
        && owner.uid().as_deref() != Some(key.uid.as_str())
    {
        status.phase = ProjectPhase::Failed;
        conditions::set(
            &mut status.conditions,
            READY,
            false,
            "NamespaceConflict",
            format!(
                "namespace {} on cluster {} already belongs to project {}",
                project.spec.namespace,
                project.spec.cluster,
                owner.name_any()
            ),
            Some(generation),
        );
        conditions::remove(&mut status.conditions, PROGRESSING);
        write_status(plane, key, &old, &status).await?;
        return Ok(Action::requeue(Duration::from_secs(30)));
    }

    let placement = match place(plane, project, key) {
        Ok(placement) => placement,
        Err(unplaced) => {
            status.phase = ProjectPhase::Pending;
            conditions::set(
                &mut status.conditions,
                READY,
                false,
                unplaced.reason(),
                unplaced.message(),
                Some(generation),
            );
            write_status(plane, key, &old, &status).await?;
            return Ok(Action::requeue(Duration::from_secs(10)));
        }
    };

    let mut retry = None;
    if !confirmed {
        let sent = Sent::ProjectEnsure {
            project: key.clone(),
            generation,
        };
        let routed = format!(
            "namespace {} requested; waiting for the agent to confirm it",
            project.spec.namespace
        );
        let previous = conditions::get(&old.conditions, PROGRESSING);
        let command = ensure_command(project, &placement);
        let attempt = plane
            .attempt(&key.uid, &placement, command, sent, routed, previous)
            .await;
        retry = Some(attempt.retry);
        let (reason, message) = attempt.waiting_or_default();
        conditions::set(
            &mut status.conditions,
            PROGRESSING,
            true,
            &reason,
            message.clone(),
            Some(generation),
        );
        let failed = old.cluster_phase.as_deref() == Some("Failed");
        status.phase = if failed {
            ProjectPhase::Failed
        } else if old.cluster_phase.as_deref() == Some("Ready") {
            ProjectPhase::Ready
        } else {
            ProjectPhase::Pending
        };
        if failed {
            conditions::set(
                &mut status.conditions,
                READY,
                false,
                "NamespaceFailed",
                old.cluster_message.clone(),
                Some(generation),
            );
        } else if status.phase != ProjectPhase::Ready {
            conditions::set(
                &mut status.conditions,
                READY,
                false,
                &reason,
                message,
                Some(generation),
            );
        }
    } else {
        plane.intents.settled(&key.uid);
        status.phase = ProjectPhase::Ready;
        conditions::set(
            &mut status.conditions,
            READY,
            true,
            "NamespaceReady",
            format!(
                "namespace {} is ready on cluster {}",
                project.spec.namespace, project.spec.cluster
            ),
            Some(generation),
        );
        conditions::remove(&mut status.conditions, PROGRESSING);
    }
    write_status(plane, key, &old, &status).await?;
    Ok(Action::requeue(
        retry
            .unwrap_or(Duration::from_secs(300))
            .max(Duration::from_secs(1)),
    ))
}

/// Names of the Apps and AddonInstances in the project, listed from the API server (not the
/// cache), so a namespace is never removed under an object the cache has not seen yet.
async fn dependents(plane: &Plane, key: &ObjectKey) -> Result<Vec<String>, Error> {
    let apps = Api::<App>::namespaced(plane.client.clone(), &key.namespace)
        .list(&ListParams::default())
        .await?
        .items
        .into_iter()
        .filter(|a| a.spec.project == key.name)
        .map(|a| format!("app/{}", a.name_any()));
    let addons = Api::<AddonInstance>::namespaced(plane.client.clone(), &key.namespace)
        .list(&ListParams::default())
        .await?
        .items
        .into_iter()
        .filter(|a| a.spec.project == key.name)
        .map(|a| format!("addoninstance/{}", a.name_any()));
    Ok(apps.chain(addons).collect())
}

async fn cleanup(project: &Project, plane: &Plane, key: &ObjectKey) -> Result<Action, Error> {
    let old = project.status.clone().unwrap_or_default();
    let mut status = old.clone();
    let blocked = dependents(plane, key).await?;
    if !blocked.is_empty() {
        let message = format!(
            "deletion waits until these are deleted: {}",
            blocked.join(", ")
        );
        conditions::set(
            &mut status.conditions,
            DELETION_BLOCKED,
            true,
            "DependentsExist",
            message.clone(),
            project.metadata.generation,
        );
        write_status(plane, key, &old, &status).await?;
        return Err(Error::Waiting(Duration::from_secs(2), message));
    }
    // Never confirmed on the cluster (e.g. it lost a namespace conflict): nothing to remove.
    if !claimed(project) || old.cluster_phase.as_deref() == Some("Deleted") {
        plane.intents.forget(&key.uid);
        return Ok(Action::await_change());
    }
    let placement = match place(plane, project, key) {
        Ok(placement) => placement,
        Err(_) => {
            plane.intents.forget(&key.uid);
            return Ok(Action::await_change());
        }
    };
    status.phase = ProjectPhase::Terminating;
    let command = wire::ProjectDelete {
        project_id: wire::Id::new(&key.uid),
        namespace: wire::Name::new(&project.spec.namespace),
    };
    let sent = Sent::ProjectDelete {
        project: key.clone(),
    };
    let routed = format!(
        "project.delete sent; waiting for the agent to remove namespace {}",
        project.spec.namespace
    );
    let waiting = await_deletion(
        plane,
        &key.uid,
        &placement,
        command,
        sent,
        routed,
        &mut status.conditions,
        project.metadata.generation,
    )
    .await;
    write_status(plane, key, &old, &status).await?;
    Err(waiting)
}

/// Runs the Project controller until `shutdown` resolves.
pub async fn run(plane: Arc<Plane>, shutdown: impl Future<Output = ()> + Send + Sync + 'static) {
    let client = plane.client.clone();
    let projects: Api<Project> = Api::all(client.clone());
    let caches = plane.caches.clone();
    let to_project = |namespace: Option<String>, project: &str| {
        Some(ObjectRef::<Project>::new(project).within(&namespace?))
    };
    Controller::new(projects, watcher::Config::default())
        // A deleted App or addon may unblock its project's deletion.
        .watches(
            Api::<App>::all(client.clone()),
            watcher::Config::default(),
            move |app| to_project(app.namespace(), &app.spec.project),
        )
        .watches(
            Api::<AddonInstance>::all(client.clone()),
            watcher::Config::default(),
            move |addon| to_project(addon.namespace(), &addon.spec.project),
        )
        // A cluster getting its id places its projects.
        .watches(
            Api::<Cluster>::all(client),
            watcher::Config::default(),
            move |cluster| {
                let namespace = cluster.namespace().unwrap_or_default();
                caches.projects_on(&namespace, &cluster.name_any())
            },
        )
        .graceful_shutdown_on(shutdown)
        .run(reconcile, error_policy::<Project>, plane)
        .for_each(|result| async move {
            if let Err(error) = result {
                tracing::debug!(%error, "project reconcile");
            }
        })
        .await;
}

#[cfg(test)]
mod tests {
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
    use kubenest_crds::project::ProjectSpec;

    use super::*;

    fn project(name: &str, namespace: &str, created: i64, claimed: bool) -> Project {
        let mut p = Project::new(
            name,
            ProjectSpec {
                cluster: "east".into(),
                namespace: namespace.into(),
                registry_secret: None,
                members: vec![],
            },
        );
        p.metadata.uid = Some(format!("uid-{name}"));
        p.metadata.creation_timestamp = Some(Time(
            k8s_openapi::jiff::Timestamp::from_second(created).unwrap(),
        ));
        if claimed {
            p.status = Some(ProjectStatus {
                cluster_phase: Some("Ready".into()),
                ..Default::default()
            });
        }
        p
    }

    #[test]
    fn the_older_claim_owns_a_namespace_and_a_confirmed_one_is_never_displaced() {
        let projects = [
            project("b", "shop", 100, false),
            project("a", "shop", 200, false),
            project("c", "other", 1, false),
        ];
        assert_eq!(owner_of(&projects, "east", "shop").unwrap().name_any(), "b");
        let projects = [
            project("b", "shop", 100, false),
            project("a", "shop", 200, true),
        ];
        assert_eq!(owner_of(&projects, "east", "shop").unwrap().name_any(), "a");
        assert!(owner_of(&projects, "west", "shop").is_none());
    }
}
