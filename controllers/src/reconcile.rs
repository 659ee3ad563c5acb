//! What the Project, App and AddonInstance reconcilers share: their error, its retry policy, the
//! object key, and the attempt to have an agent confirm a deletion.

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::ResourceExt;
use kube::runtime::controller::Action;
use kubenest_contracts::Message;

use crate::conditions::{self, DELETION_BLOCKED};
use crate::intents::{ObjectKey, Sent};
use crate::placement::Placement;
use crate::plane::Plane;
use kubenest_store::StoreError;

/// What stops a reconcile.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("kubernetes: {0}")]
    Kube(#[from] kube::Error),
    #[error("history: {0}")]
    History(#[from] StoreError),
    /// The object cannot be reconciled until it changes.
    #[error("invalid: {0}")]
    Invalid(String),
    #[error("finalizer: {0}")]
    Finalizer(Box<kube::runtime::finalizer::Error<Error>>),
}

/// The error's category in the reconcile metrics.
impl kubenest_runtime::reconciles::Category for Error {
    fn category(&self) -> &'static str {
        match self {
            Error::Kube(_) => "kubernetes",
            Error::History(_) => "history",
            Error::Invalid(_) => "invalid",
            Error::Finalizer(inner) => match inner.as_ref() {
                kube::runtime::finalizer::Error::ApplyFailed(e)
                | kube::runtime::finalizer::Error::CleanupFailed(e) => e.category(),
                _ => "finalizer",
            },
        }
    }
}

/// The namespace, name and uid of a namespaced object.
pub fn key_of<K: ResourceExt>(object: &K) -> Result<ObjectKey, Error> {
    Ok(ObjectKey {
        namespace: object
            .namespace()
            .ok_or_else(|| Error::Invalid("object without namespace".into()))?,
        name: object.name_any(),
        uid: object
            .uid()
            .ok_or_else(|| Error::Invalid("object without uid".into()))?,
    })
}

/// Retries a failed reconcile: an invalid object when it changes, anything else after 5 s (a
/// wait is not an error: reconcilers answer it with `Ok(Action::requeue(..))`).
pub fn error_policy<K>(_object: Arc<K>, error: &Error, _plane: Arc<Plane>) -> Action
where
    K: kube::Resource<DynamicType = ()>,
{
    let kind = K::kind(&());
    match error {
        Error::Invalid(reason) => {
            tracing::warn!(%kind, reason, "cannot be reconciled until it changes");
            Action::await_change()
        }
        other => {
            tracing::warn!(%kind, error = %other, "reconcile failed; retrying");
            Action::requeue(Duration::from_secs(5))
        }
    }
}

/// Sends a deletion command when it is due and records in `DeletionBlocked` what the deletion
/// waits for. Returns how long until the next attempt; the caller writes the conditions and
/// keeps its finalizer.
#[allow(clippy::too_many_arguments)] // one call per controller, every argument distinct
pub async fn attempt_deletion(
    plane: &Plane,
    uid: &str,
    placement: &Placement,
    command: impl Into<Message>,
    sent: Sent,
    routed: String,
    conditions: &mut Vec<Condition>,
    generation: Option<i64>,
) -> Duration {
    let previous = conditions::get(conditions, DELETION_BLOCKED).cloned();
    let attempt = plane
        .attempt(uid, placement, command, sent, routed, previous.as_ref())
        .await;
    let (reason, message) = attempt.waiting_or_default();
    conditions::set(
        conditions,
        DELETION_BLOCKED,
        true,
        &reason,
        message,
        generation,
    );
    attempt.retry
}
