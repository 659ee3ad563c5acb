//! The Project controller: a project is one namespace on one cluster.
//!
//! It sends `project.ensure` (with backoff) until the agent reports the namespace `Ready` for the
//! project's current generation; until then the project is `Pending` with a reason. Past the
//! spec's progress deadline ([`crate::deadline`]) that reason is `DeliveryDelayed` while the
//! cluster has not accepted the request, and the project is `Failed` with
//! `ProgressDeadlineExceeded` once it has but the namespace never became ready. Two projects
//! can never share a namespace on one cluster: the older claim wins, the newer is `Failed` with
//! `NamespaceConflict` and never touches the cluster. Deletion waits until no App or
//! AddonInstance uses the project, then sends `project.delete` and holds a finalizer until the
//! agent confirms the namespace is gone.

mod decide;
mod deletion;
#[cfg(test)]
pub(crate) mod fixtures;

use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::ResourceExt;
use kube::api::{Api, ListParams};
use kube::runtime::controller::{Action, Controller};
use kube::runtime::reflector::ObjectRef;
use kube::runtime::watcher;
use kubenest_crds::addon::AddonInstance;
use kubenest_crds::app::App;
use kubenest_crds::cluster::Cluster;
use kubenest_crds::common::ProgressClock;
use kubenest_crds::names::finalizers;
use kubenest_crds::project::{Project, ProjectPhase, ProjectStatus};
use serde::Serialize;

use crate::conditions::{self, DELETION_BLOCKED, PROGRESSING};
use crate::intents::ObjectKey;
use crate::patch::merge_status;
use crate::placement::{self, Placement, Unplaced};
use crate::plane::Plane;
use crate::reach;
pub use crate::reconcile::Error;
use crate::reconcile::{At, attempt_deletion, error_policy, judge_deletion, key_of};
pub use decide::owner_of;
use decide::{Facts, Plan};
use deletion::{Deletion, DeletionFacts};
use kubenest_runtime::finalizer::{self, Cleanup};

/// The fields of a Project's status this controller writes; the status router writes what the
/// agent observed.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
struct Owned<'a> {
    observed_generation: Option<i64>,
    phase: ProjectPhase,
    progress: Option<&'a ProgressClock>,
    last_observation: Option<&'a str>,
    conditions: &'a [Condition],
}

/// `new` as the controller writes it after a pass over `generation`: stamped with it, so
/// readers of `observedGeneration` (kstatus, Flux, Argo CD) know the status speaks of that spec.
fn observed(new: &ProjectStatus, generation: Option<i64>) -> ProjectStatus {
    ProjectStatus {
        observed_generation: generation,
        ..new.clone()
    }
}

/// Writes this controller's fields of `new` for `generation` when anything differs from `old`.
async fn write_status(
    plane: &Plane,
    key: &ObjectKey,
    generation: Option<i64>,
    old: &ProjectStatus,
    new: &ProjectStatus,
) -> Result<(), Error> {
    let new = &observed(new, generation);
    if old == new {
        return Ok(());
    }
    let owned = Owned {
        observed_generation: new.observed_generation,
        phase: new.phase,
        progress: new.progress.as_ref(),
        last_observation: new.last_observation.as_deref(),
        conditions: &new.conditions,
    };
    let api = Api::<Project>::namespaced(plane.client.clone(), &key.namespace);
    merge_status(&api, &key.name, &owned)
        .await
        .at("patching the status of Project", key)?;
    crate::events::conditions_turned::<Project>(plane, key, &old.conditions, &new.conditions);
    Ok(())
}

async fn reconcile(project: Arc<Project>, plane: Arc<Plane>) -> Result<Action, Error> {
    let key = key_of(&*project)?;
    let api: Api<Project> = Api::namespaced(plane.client.clone(), &key.namespace);
    finalizer::hold(
        &api,
        finalizers::PROJECT,
        project,
        async |project| apply(&project, &plane, &key).await,
        async |project| cleanup(&project, &plane, &key).await,
    )
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

/// Another project holding this project's namespace, if one does. Any claim but a confirmed
/// one must see every project that exists, listed from the API server, not the cache. (Apps
/// and addons wake their project on every change, so confirmed is most reconciles.)
async fn other_owner(
    plane: &Plane,
    project: &Project,
    key: &ObjectKey,
    confirmed: bool,
) -> Result<Option<String>, Error> {
    if confirmed {
        return Ok(None);
    }
    let siblings = Api::<Project>::namespaced(plane.client.clone(), &key.namespace)
        .list(&ListParams::default())
        .await?
        .items;
    Ok(
        owner_of(&siblings, &project.spec.cluster, &project.spec.namespace)
            .filter(|owner| owner.uid().as_deref() != Some(key.uid.as_str()))
            .map(|owner| owner.name_any()),
    )
}

async fn apply(project: &Project, plane: &Plane, key: &ObjectKey) -> Result<Action, Error> {
    let generation = project.metadata.generation.unwrap_or(0);
    let old = project.status.clone().unwrap_or_default();
    let confirmed = decide::confirmed(&old, generation);
    let facts = Facts {
        project,
        key,
        generation,
        old: &old,
        owner: other_owner(plane, project, key, confirmed).await?,
        placement: place(plane, project, key),
        now: chrono::Utc::now(),
        silence: reach::silence_in(&plane.caches, &key.namespace, &project.spec.cluster),
    };
    match decide::decide(&facts) {
        Plan::Write {
            status,
            requeue,
            settled,
        } => {
            if settled {
                plane.intents.settled(&key.uid);
            }
            write_status(plane, key, project.metadata.generation, &old, &status).await?;
            Ok(Action::requeue(requeue))
        }
        Plan::Ensure {
            placement,
            command,
            sent,
            routed,
        } => {
            let previous = conditions::get(&old.conditions, PROGRESSING);
            let attempt = plane
                .attempt(&key.uid, &placement, *command, sent, routed, previous)
                .await;
            let (status, requeue) = decide::waiting(&facts, &attempt);
            write_status(plane, key, project.metadata.generation, &old, &status).await?;
            Ok(Action::requeue(requeue))
        }
    }
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

async fn cleanup(project: &Project, plane: &Plane, key: &ObjectKey) -> Result<Cleanup, Error> {
    let old = project.status.clone().unwrap_or_default();
    let facts = DeletionFacts {
        project,
        key,
        old: &old,
        dependents: dependents(plane, key).await?,
        placement: place(plane, project, key),
    };
    let force = format!("kubenest projects delete {} --force", key.name);
    // Past the project's deadline, a deletion is `Failed` saying what holds it.
    let judge = |status: &mut ProjectStatus, reported: Option<&str>, retry: &mut Duration| {
        let seconds = project.spec.progress_deadline_seconds;
        let conditions = &mut status.conditions;
        if judge_deletion(
            &project.metadata,
            seconds,
            conditions,
            reported,
            &force,
            retry,
        )
        .is_some()
        {
            status.phase = ProjectPhase::Failed;
        }
    };
    match deletion::decide_deletion(&facts) {
        Deletion::Blocked {
            mut status,
            mut wait,
        } => {
            let dependents =
                conditions::get(&status.conditions, DELETION_BLOCKED).map(|c| c.message.clone());
            judge(&mut status, dependents.as_deref(), &mut wait);
            write_status(plane, key, project.metadata.generation, &old, &status).await?;
            Ok(Cleanup::Wait(wait))
        }
        Deletion::Done => {
            plane.intents.forget(&key.uid);
            Ok(Cleanup::Done(Action::await_change()))
        }
        Deletion::Delete {
            mut status,
            placement,
            command,
            sent,
            routed,
        } => {
            let mut retry = attempt_deletion(
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
            let terminating = old.cluster_phase.as_deref() == Some("Terminating");
            let reported = (terminating && !old.cluster_message.is_empty()).then(|| {
                let cluster = &placement.cluster_name;
                format!("on cluster {cluster}, {}", old.cluster_message)
            });
            judge(&mut status, reported.as_deref(), &mut retry);
            write_status(plane, key, project.metadata.generation, &old, &status).await?;
            Ok(Cleanup::Wait(retry))
        }
    }
}

/// Runs the Project controller until `shutdown` resolves; `triggers` asks for extra reconciles.
pub async fn run(
    plane: Arc<Plane>,
    triggers: tokio::sync::mpsc::Receiver<ObjectRef<Project>>,
    shutdown: impl Future<Output = ()> + Send + Sync + 'static,
) {
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
        .reconcile_on(tokio_stream::wrappers::ReceiverStream::new(triggers))
        .graceful_shutdown_on(shutdown)
        .run(
            crate::metrics::metrics()
                .reconciles
                .measure("project", reconcile),
            error_policy::<Project>,
            plane,
        )
        .for_each(|result| async move {
            if let Err(error) = result {
                tracing::debug!(%error, "project reconcile");
            }
        })
        .await;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pass_over_a_new_generation_stamps_it_so_the_status_is_written() {
        let old = ProjectStatus {
            observed_generation: Some(1),
            phase: ProjectPhase::Ready,
            ..ProjectStatus::default()
        };
        let new = observed(&old, Some(2));
        assert_ne!(new, old, "only the generation moved, and that is written");
        let owned = Owned {
            observed_generation: new.observed_generation,
            phase: new.phase,
            progress: None,
            last_observation: None,
            conditions: &[],
        };
        let patch = serde_json::to_value(&owned).unwrap();
        assert_eq!(patch["observedGeneration"], 2);
        assert_eq!(patch["phase"], "Ready");
    }
}
