//! The App controller's driver: one reconcile per App, deletion or rollout, and the watch that
//! runs it.

use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use kube::ResourceExt;
use kube::api::Api;
use kube::runtime::controller::{Action, Controller};
use kube::runtime::reflector::ObjectRef;
use kube::runtime::watcher;
use kubenest_crds::app::App;
use kubenest_crds::project::Project;
use tokio::sync::mpsc;

use super::cleanup::{Cleanup, cleanup};
use super::{holding, rollout};
use crate::plane::Plane;
pub use crate::reconcile::Error;
use crate::reconcile::{error_policy, key_of};

async fn reconcile(app: Arc<App>, plane: Arc<Plane>) -> Result<Action, Error> {
    // Judged on this process's own last write when the cache has not caught up with it.
    let app = plane.apps_written.of(app);
    let key = key_of(&*app)?;
    if app.metadata.deletion_timestamp.is_none() {
        return rollout::apply(&app, &plane, &key).await;
    }
    if !holding::held(&app) {
        return Ok(Action::await_change());
    }
    match cleanup(&app, &plane, &key).await? {
        Cleanup::Done => {
            holding::release(&app, &plane, &key).await?;
            plane.apps_written.forget(&key.uid);
            Ok(Action::await_change())
        }
        // An expected wait, not a failed reconcile.
        Cleanup::Waiting(delay) => Ok(Action::requeue(delay.max(Duration::from_secs(1)))),
    }
}

/// Runs the App controller until `shutdown` resolves, on the Apps cache's stream (`apps`, see
/// [`crate::status::Caches::start`]); `triggers` asks for extra reconciles.
pub async fn run(
    plane: Arc<Plane>,
    apps: mpsc::UnboundedReceiver<Arc<App>>,
    triggers: mpsc::Receiver<ObjectRef<App>>,
    shutdown: impl Future<Output = ()> + Send + Sync + 'static,
) {
    let triggers = tokio_stream::wrappers::ReceiverStream::new(triggers);
    let apps = tokio_stream::wrappers::UnboundedReceiverStream::new(apps);
    let caches = plane.caches.clone();
    Controller::for_shared_stream(apps, plane.caches.apps.clone())
        // A project turning Ready (or going away) moves its Apps on.
        .watches(
            Api::<Project>::all(plane.client.clone()),
            watcher::Config::default(),
            move |project| {
                let namespace = project.namespace().unwrap_or_default();
                caches.apps_of(&namespace, &project.name_any())
            },
        )
        .reconcile_on(triggers)
        .graceful_shutdown_on(shutdown)
        .run(
            crate::metrics::metrics()
                .reconciles
                .measure("app", reconcile),
            error_policy::<App>,
            plane,
        )
        .for_each(|result| async move {
            if let Err(error) = result {
                tracing::debug!(%error, "app reconcile");
            }
        })
        .await;
}
