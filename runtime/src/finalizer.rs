//! Finalizers, held by hand: the one helper for every controller of the management plane and
//! the agent. Every write is a JSON patch guarded by a `test` of what it changes, so a concurrent
//! change of the list fails the patch instead of being lost.
//!
//! [`hold`] drives a whole reconcile (Project, AddonInstance, Cluster): kube-runtime's `finalizer()` helper removes the finalizer whenever cleanup returns `Ok`, so a
//! deletion that must wait for an agent (or for dependents) could only say "not yet" as an
//! error, and an expected wait counted as a failed reconcile. Here cleanup answers
//! [`Cleanup::Wait`]: the finalizer stays and the object is requeued, as `Ok`. Everything else
//! is what the helper does (the same JSON patches with their `test` guards, the same errors),
//! so the controllers' error policies are unchanged.

use std::sync::Arc;
use std::time::Duration;

use kube::api::{Api, Patch, PatchParams};
use kube::runtime::controller::Action;
use kube::runtime::finalizer::Error;
use kube::{Resource, ResourceExt};
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

/// The shortest wait before a deletion is looked at again.
const MIN_WAIT: Duration = Duration::from_secs(1);

/// What a cleanup came to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Cleanup {
    /// Nothing is left outside the object graph: the finalizer goes, then this action.
    Done(Action),
    /// The deletion waits (for the agent, or for dependents); look again after this long.
    Wait(Duration),
}

/// What a reconcile does with an object, given its finalizers and deletion (pure).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step {
    /// Add the finalizer first; the patch itself triggers the next reconcile.
    Add,
    /// The finalizer is held and the object lives: reconcile it.
    Apply,
    /// The object is being deleted and the finalizer (at this index) is held: clean up.
    Cleanup(usize),
    /// The object is being deleted and the finalizer is gone: nothing to do.
    Gone,
}

/// The step for an object with `finalizers` (pure).
pub fn step(finalizers: &[String], deleting: bool, finalizer: &str) -> Step {
    match (finalizers.iter().position(|f| f == finalizer), deleting) {
        (Some(_), false) => Step::Apply,
        (Some(index), true) => Step::Cleanup(index),
        (None, false) => Step::Add,
        (None, true) => Step::Gone,
    }
}

/// The action of a reconcile whose cleanup answered `cleanup`, and whether the finalizer is
/// released (pure).
pub fn after_cleanup(cleanup: Cleanup) -> (Action, bool) {
    match cleanup {
        Cleanup::Done(action) => (action, true),
        Cleanup::Wait(delay) => (Action::requeue(delay.max(MIN_WAIT)), false),
    }
}

/// The JSON patch adding `finalizer` to `existing`, guarded so that a concurrent change of the
/// list fails the patch instead of being lost (pure).
pub fn add_patch(existing: &[String], finalizer: &str) -> Value {
    if existing.is_empty() {
        json!([
            {"op": "test", "path": "/metadata/finalizers", "value": null},
            {"op": "add", "path": "/metadata/finalizers", "value": [finalizer]},
        ])
    } else {
        json!([
            {"op": "test", "path": "/metadata/finalizers", "value": existing},
            {"op": "add", "path": "/metadata/finalizers/-", "value": finalizer},
        ])
    }
}

/// The JSON patch removing `finalizer` at `index`, guarded so that it never removes another
/// one (pure).
pub fn remove_patch(index: usize, finalizer: &str) -> Value {
    let path = format!("/metadata/finalizers/{index}");
    json!([
        {"op": "test", "path": path, "value": finalizer},
        {"op": "remove", "path": path},
    ])
}

async fn patch<K>(api: &Api<K>, name: &str, patch: Value) -> Result<(), kube::Error>
where
    K: Resource + Clone + DeserializeOwned + std::fmt::Debug,
{
    let patch: json_patch::Patch =
        serde_json::from_value(patch).map_err(kube::Error::SerdeError)?;
    api.patch(name, &PatchParams::default(), &Patch::<()>::Json(patch))
        .await?;
    Ok(())
}

/// Adds `finalizer` to object `name` unless `present` (its list as read) already holds it: for
/// reconcilers that must hold it in the same pass that does their first work (the App
/// controller records its deployment row first; the agent's objects).
pub async fn add<K>(
    api: &Api<K>,
    name: &str,
    present: &[String],
    finalizer: &str,
) -> Result<(), kube::Error>
where
    K: Resource + Clone + DeserializeOwned + std::fmt::Debug,
{
    if present.iter().any(|f| f == finalizer) {
        return Ok(());
    }
    patch(api, name, add_patch(present, finalizer)).await
}

/// Removes `finalizer` from object `name` (`present` is its list as read); an object already
/// gone is fine.
pub async fn release<K>(
    api: &Api<K>,
    name: &str,
    present: &[String],
    finalizer: &str,
) -> Result<(), kube::Error>
where
    K: Resource + Clone + DeserializeOwned + std::fmt::Debug,
{
    let Some(index) = present.iter().position(|f| f == finalizer) else {
        return Ok(());
    };
    match patch(api, name, remove_patch(index, finalizer)).await {
        Err(kube::Error::Api(status)) if status.code == 404 => Ok(()),
        other => other,
    }
}

/// Reconciles `object` under `finalizer`: adds it first, runs `apply` while the object lives,
/// and on deletion runs `cleanup`, removing the finalizer only once cleanup is
/// [`Cleanup::Done`].
pub async fn hold<K, E, A, C>(
    api: &Api<K>,
    finalizer: &str,
    object: Arc<K>,
    apply: impl FnOnce(Arc<K>) -> A,
    cleanup: impl FnOnce(Arc<K>) -> C,
) -> Result<Action, Error<E>>
where
    K: Resource + Clone + DeserializeOwned + std::fmt::Debug,
    E: std::error::Error + 'static,
    A: Future<Output = Result<Action, E>>,
    C: Future<Output = Result<Cleanup, E>>,
{
    let deleting = object.meta().deletion_timestamp.is_some();
    match step(object.finalizers(), deleting, finalizer) {
        Step::Apply => apply(object).await.map_err(Error::ApplyFailed),
        Step::Cleanup(index) => {
            let name = object.meta().name.clone().ok_or(Error::UnnamedObject)?;
            let outcome = cleanup(object).await.map_err(Error::CleanupFailed)?;
            let (action, release) = after_cleanup(outcome);
            if release {
                patch(api, &name, remove_patch(index, finalizer))
                    .await
                    .map_err(Error::RemoveFinalizer)?;
            }
            Ok(action)
        }
        Step::Add => {
            let name = object.meta().name.as_deref().ok_or(Error::UnnamedObject)?;
            patch(api, name, add_patch(object.finalizers(), finalizer))
                .await
                .map_err(Error::AddFinalizer)?;
            Ok(Action::await_change())
        }
        Step::Gone => Ok(Action::await_change()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MINE: &str = "kubenest.io/project";

    fn list(names: &[&str]) -> Vec<String> {
        names.iter().map(|n| (*n).to_owned()).collect()
    }

    #[test]
    fn the_finalizer_is_added_before_anything_is_applied_and_cleanup_runs_only_while_held() {
        assert_eq!(step(&[], false, MINE), Step::Add);
        assert_eq!(step(&list(&["other"]), false, MINE), Step::Add);
        assert_eq!(step(&list(&["other", MINE]), false, MINE), Step::Apply);
        assert_eq!(step(&list(&["other", MINE]), true, MINE), Step::Cleanup(1));
        assert_eq!(step(&list(&["other"]), true, MINE), Step::Gone);
    }

    #[test]
    fn a_waiting_cleanup_keeps_the_finalizer_and_requeues_after_at_least_a_second() {
        let done = Action::await_change();
        assert_eq!(after_cleanup(Cleanup::Done(done.clone())), (done, true));
        assert_eq!(
            after_cleanup(Cleanup::Wait(Duration::from_secs(2))),
            (Action::requeue(Duration::from_secs(2)), false)
        );
        assert_eq!(
            after_cleanup(Cleanup::Wait(Duration::from_millis(10))),
            (Action::requeue(Duration::from_secs(1)), false)
        );
    }

    #[test]
    fn the_patches_are_guarded_by_a_test_of_what_they_change() {
        assert_eq!(
            add_patch(&[], MINE),
            json!([
                {"op": "test", "path": "/metadata/finalizers", "value": null},
                {"op": "add", "path": "/metadata/finalizers", "value": [MINE]},
            ])
        );
        assert_eq!(
            add_patch(&list(&["other"]), MINE),
            json!([
                {"op": "test", "path": "/metadata/finalizers", "value": ["other"]},
                {"op": "add", "path": "/metadata/finalizers/-", "value": MINE},
            ])
        );
        assert_eq!(
            remove_patch(1, MINE),
            json!([
                {"op": "test", "path": "/metadata/finalizers/1", "value": MINE},
                {"op": "remove", "path": "/metadata/finalizers/1"},
            ])
        );
        for patch in [add_patch(&[], MINE), remove_patch(0, MINE)] {
            assert!(serde_json::from_value::<json_patch::Patch>(patch).is_ok());
        }
    }
}
