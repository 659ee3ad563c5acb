//! Acceptances of `app.deploy`: held back briefly so that each rides with the App's next status
//! (one App write instead of two), and written alone by a sweeper when no status came in time.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use kube::ResourceExt;
use kubenest_crds::app::App;
use tokio::sync::Notify;

use futures::StreamExt;
use kubenest_crds::observed::AppAccepted;
use tokio_util::sync::CancellationToken;

use super::{LANES, patch_status};

/// How long an agent's acceptance of an `app.deploy` waits for a status of the same App, to be
/// written with it. The agent reports the App once its rollout settles, or after holding a
/// report of a rollout under way for 200 ms (`PROGRESS_REPORT_WAIT` in the agent); written
/// together, that is one App write (and one reconcile) instead of two. Only the controllers'
/// re-send timer reads the acceptance, and it runs for seconds.
pub(super) const ACCEPTANCE_WAIT: Duration = Duration::from_millis(300);

/// An acceptance of `app.deploy` not written yet.
#[derive(Debug)]
struct Waiting {
    app: Arc<App>,
    revision: String,
    /// When it is written alone if no status has taken it.
    due: Instant,
}

/// Acceptances of `app.deploy` not written yet, by App uid. One sweeper
/// ([`Router::sweep_acceptances`]) writes those no status took in time.
#[derive(Debug, Default)]
pub(super) struct Acceptances {
    waiting: Mutex<HashMap<String, Waiting>>,
    pub(super) added: Notify,
}

impl Acceptances {
    fn waiting(&self) -> std::sync::MutexGuard<'_, HashMap<String, Waiting>> {
        self.waiting.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Notes that the agent accepted `revision` of `app` at `now` (replacing an older one
    /// waiting).
    pub(super) fn add(&self, uid: &str, app: Arc<App>, revision: &str, now: Instant) {
        let waiting = Waiting {
            app,
            revision: revision.to_owned(),
            due: now + ACCEPTANCE_WAIT,
        };
        self.waiting().insert(uid.to_owned(), waiting);
        self.added.notify_one();
    }

    /// Takes the acceptance waiting for App `uid`, to be written with its status.
    pub(super) fn ride(&self, uid: &str) -> Option<String> {
        self.waiting().remove(uid).map(|w| w.revision)
    }

    /// Takes the acceptances due at `now`, and tells when the next one is due.
    pub(super) fn due(&self, now: Instant) -> (Vec<(Arc<App>, String)>, Option<Instant>) {
        let mut waiting = self.waiting();
        let due: Vec<String> = waiting
            .iter()
            .filter(|(_, w)| w.due <= now)
            .map(|(uid, _)| uid.clone())
            .collect();
        let taken = due
            .iter()
            .filter_map(|uid| waiting.remove(uid))
            .map(|w| (w.app, w.revision))
            .collect();
        (taken, waiting.values().map(|w| w.due).min())
    }
}

/// Writes an acceptance alone. If that fails, the controllers re-send the command and the
/// agent accepts it again.
pub(super) async fn record_acceptance(client: &kube::Client, app: &App, revision: String) {
    let accepted = AppAccepted {
        accepted_revision: revision,
    };
    if let Err(error) = patch_status(client, app, &accepted).await {
        tracing::warn!(app = %app.name_any(), %error, "acceptance not recorded");
    }
}

/// Writes the acceptances no status took in time, until `stop`.
pub(super) async fn sweep(
    acceptances: Arc<Acceptances>,
    client: kube::Client,
    stop: CancellationToken,
) {
    while !stop.is_cancelled() {
        let (due, next) = acceptances.due(Instant::now());
        futures::stream::iter(due)
            .for_each_concurrent(LANES, |(app, revision)| {
                let client = &client;
                async move { record_acceptance(client, &app, revision).await }
            })
            .await;
        let next = async {
            match next {
                Some(next) => tokio::time::sleep_until(next.into()).await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            () = stop.cancelled() => {}
            () = next => {}
            () = acceptances.added.notified() => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn app(name: &str) -> Arc<App> {
        Arc::new(App::new(
            name,
            kubenest_crds::app::AppSpec {
                project: "web".into(),
                components: vec![],
                progress_deadline_seconds: 600,
                paused: false,
                verification: None,
            },
        ))
    }

    fn names(due: &[(Arc<App>, String)]) -> Vec<(String, &str)> {
        due.iter()
            .map(|(app, revision)| (app.name_any(), revision.as_str()))
            .collect()
    }

    #[test]
    fn an_acceptance_is_taken_once_by_a_status_or_by_the_sweeper_when_due() {
        let acceptances = Acceptances::default();
        let t0 = Instant::now();
        acceptances.add("a", app("a"), "r1", t0);
        assert_eq!(acceptances.ride("a").as_deref(), Some("r1"));
        let (due, next) = acceptances.due(t0 + ACCEPTANCE_WAIT);
        assert!(due.is_empty(), "the status wrote it");
        assert_eq!(next, None);

        acceptances.add("a", app("a"), "r1", t0);
        let (due, next) = acceptances.due(t0 + ACCEPTANCE_WAIT / 2);
        assert!(due.is_empty(), "not due yet");
        assert_eq!(next, Some(t0 + ACCEPTANCE_WAIT));
        let (due, _) = acceptances.due(t0 + ACCEPTANCE_WAIT);
        assert_eq!(names(&due), [("a".to_owned(), "r1")]);
        assert_eq!(acceptances.ride("a"), None, "the sweeper wrote it");
    }

    #[test]
    fn a_later_revision_replaces_the_acceptance_waiting() {
        let acceptances = Acceptances::default();
        let t0 = Instant::now();
        acceptances.add("a", app("a"), "r1", t0);
        acceptances.add("b", app("b"), "r1", t0 + ACCEPTANCE_WAIT);
        acceptances.add("a", app("a"), "r2", t0 + ACCEPTANCE_WAIT / 2);
        let (due, next) = acceptances.due(t0 + ACCEPTANCE_WAIT);
        assert!(due.is_empty(), "r2 replaced r1 and is due later");
        assert_eq!(next, Some(t0 + ACCEPTANCE_WAIT * 3 / 2));
        let (due, next) = acceptances.due(t0 + ACCEPTANCE_WAIT * 3 / 2);
        assert_eq!(names(&due), [("a".to_owned(), "r2")]);
        assert_eq!(next, Some(t0 + ACCEPTANCE_WAIT * 2));
        assert_eq!(acceptances.ride("b").as_deref(), Some("r1"));
    }
}
