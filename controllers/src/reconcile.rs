//! What every reconciler of the controllers shares: the one error (naming its step and object
//! with [`At`]), its retry policy, the object key, and the attempt to have an agent confirm a
//! deletion.

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
    /// A cluster token could not be minted.
    #[error("token: {0}")]
    Token(#[from] kubenest_contracts::TokenError),
    /// The object cannot be reconciled until it changes.
    #[error("invalid: {0}")]
    Invalid(String),
    #[error("finalizer: {0}")]
    Finalizer(Box<kube::runtime::finalizer::Error<Error>>),
    /// What failed and on which object, as a log line or Event says it: "patching the status of
    /// App shop/web: kubernetes: …".
    #[error("{step} {object}: {source}")]
    At {
        step: &'static str,
        object: String,
        source: Box<Error>,
    },
}

impl Error {
    /// The error under any [`Error::At`] steps.
    pub fn root(&self) -> &Error {
        match self {
            Error::At { source, .. } => source.root(),
            other => other,
        }
    }
}

/// Names the step and the object an error failed on (`.at("patching the status of App", key)`).
pub trait At<T> {
    fn at(self, step: &'static str, key: &ObjectKey) -> Result<T, Error>;
}

impl<T, E: Into<Error>> At<T> for Result<T, E> {
    fn at(self, step: &'static str, key: &ObjectKey) -> Result<T, Error> {
        self.map_err(|error| Error::At {
            step,
            object: format!("{}/{}", key.namespace, key.name),
            source: Box::new(error.into()),
        })
    }
}

/// The error's category in the reconcile metrics.
impl kubenest_runtime::reconciles::Category for Error {
    fn category(&self) -> &'static str {
        match self {
            Error::Kube(_) => "kubernetes",
            Error::History(_) => "history",
            Error::Token(_) => "token",
            Error::Invalid(_) => "invalid",
            Error::At { source, .. } => source.category(),
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
    match error.root() {
        Error::Invalid(reason) => {
            tracing::warn!(%kind, reason, "cannot be reconciled until it changes");
            Action::await_change()
        }
        _ => {
            tracing::warn!(%kind, %error, "reconcile failed; retrying");
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

#[cfg(test)]
mod tests {
    use kubenest_runtime::reconciles::Category;

    use super::*;

    #[test]
    fn a_failed_step_names_itself_and_its_object_and_keeps_its_cause() {
        let key = ObjectKey {
            namespace: "shop".into(),
            name: "web".into(),
            uid: "u1".into(),
        };
        let failed: Result<(), Error> = Err(Error::Invalid("no such project".into()));
        let error = failed.at("patching the status of App", &key).unwrap_err();
        assert_eq!(
            error.to_string(),
            "patching the status of App shop/web: invalid: no such project"
        );
        // The retry policy and the metrics look through the step to the cause.
        assert!(matches!(error.root(), Error::Invalid(_)));
        assert_eq!(error.category(), "invalid");
    }
}
