//! What every reconciler of the controllers shares: the one error (naming its step and object
//! with [`At`]), its retry policy, the object key, and the attempt to have an agent confirm a
//! deletion.

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::ResourceExt;
use kube::runtime::controller::Action;
use kubenest_contracts::Message;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kubenest_domain::deletion;

use crate::conditions::{self, DELETION_BLOCKED, READY};
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

/// A deletion against its deadline: the object's progress deadline, counted from its
/// `deletionTimestamp`. Past it, `Ready=False` of reason `DeletionDeadlineExceeded` says how
/// long the deletion had, what is still there (`remaining`, what the cluster reports is left;
/// without a report, what `DeletionBlocked` says the deletion waits for) and the way out
/// (`force`), and that message is returned: the caller marks the object `Failed`. Before it,
/// nothing is written and `retry` is shortened so the deadline is judged when it passes.
pub fn judge_deletion(
    meta: &ObjectMeta,
    seconds: u32,
    conditions: &mut Vec<Condition>,
    remaining: Option<&str>,
    force: &str,
    retry: &mut Duration,
) -> Option<String> {
    let now = chrono::Utc::now();
    let asked = meta
        .deletion_timestamp
        .as_ref()
        .and_then(|at| chrono::DateTime::from_timestamp(at.0.as_second(), 0));
    let (overdue, at) = crate::deadline::deletion(asked, seconds, now);
    if !overdue {
        *retry = crate::deadline::sooner(*retry, at, now);
        return None;
    }
    let remaining = match remaining {
        Some(reported) => reported.to_owned(),
        None => {
            let waiting = conditions::get(conditions, DELETION_BLOCKED)
                .map_or("waiting for the agent", |c| c.message.as_str());
            format!("the cluster has not confirmed the removal ({waiting})")
        }
    };
    let message = deletion::failed_message(seconds, &remaining, force);
    conditions::set(
        conditions,
        READY,
        false,
        deletion::DELETION_DEADLINE_EXCEEDED,
        message.clone(),
        meta.generation,
    );
    Some(message)
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

    fn deleted(seconds_ago: i64) -> ObjectMeta {
        let at = jiff_at(chrono::Utc::now() - chrono::Duration::seconds(seconds_ago));
        ObjectMeta {
            deletion_timestamp: Some(at),
            generation: Some(3),
            ..ObjectMeta::default()
        }
    }

    fn jiff_at(
        at: chrono::DateTime<chrono::Utc>,
    ) -> k8s_openapi::apimachinery::pkg::apis::meta::v1::Time {
        k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
            k8s_openapi::jiff::Timestamp::from_second(at.timestamp()).unwrap(),
        )
    }

    #[test]
    fn a_deletion_past_its_deadline_says_what_remains_and_the_way_out_and_before_it_nothing() {
        let mut conditions = Vec::new();
        conditions::set(
            &mut conditions,
            DELETION_BLOCKED,
            true,
            "AwaitingAgent",
            "app.delete was sent; waiting for the agent to confirm",
            Some(3),
        );
        let mut retry = Duration::from_secs(300);
        let early = judge_deletion(&deleted(5), 30, &mut conditions, None, "f", &mut retry);
        assert_eq!(early, None);
        assert!(conditions::get(&conditions, READY).is_none());
        assert!(
            retry <= Duration::from_secs(27),
            "{retry:?}: judged when it passes"
        );

        let mut retry = Duration::from_secs(5);
        let unreported = judge_deletion(
            &deleted(40),
            30,
            &mut conditions,
            None,
            "force it",
            &mut retry,
        )
        .unwrap();
        assert!(
            unreported.contains("has not confirmed the removal (app.delete was sent"),
            "{unreported}"
        );
        let ready = conditions::get(&conditions, READY).unwrap();
        assert_eq!(
            (ready.status.as_str(), ready.reason.as_str()),
            ("False", deletion::DELETION_DEADLINE_EXCEEDED)
        );
        assert!(deletion::overdue(&conditions).is_some());
        assert_eq!(
            retry,
            Duration::from_secs(5),
            "the deletion goes on being retried"
        );

        let reported = "still on cluster east: Deployment/web (finalizers: example.test/hold)";
        let message = judge_deletion(
            &deleted(40),
            30,
            &mut conditions,
            Some(reported),
            "force it",
            &mut retry,
        )
        .unwrap();
        assert!(
            message.contains(reported) && message.contains("force it"),
            "{message}"
        );
    }
}
