//! The StackTemplate controller: marks each template `Ready` or says exactly what is wrong with
//! it. The template rules themselves (slots, instantiation, export and import) are pure and live
//! in [`kubenest_domain::template`].

use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use kube::ResourceExt;
use kube::api::{Api, Patch, PatchParams};
use kube::runtime::controller::{Action, Controller};
use kube::runtime::watcher;
use kubenest_crds::template::StackTemplate;
use kubenest_domain::template::check;
use serde_json::json;

use crate::conditions::{self, READY};

async fn reconcile(
    template: Arc<StackTemplate>,
    client: Arc<kube::Client>,
) -> Result<Action, kube::Error> {
    let Some(namespace) = template.namespace() else {
        return Ok(Action::await_change());
    };
    let old = template.status.clone().unwrap_or_default();
    let mut status = old.clone();
    let generation = template.metadata.generation;
    match check(&template.spec) {
        Ok(()) => conditions::set(
            &mut status.conditions,
            READY,
            true,
            "Valid",
            "the template instantiates into a valid App",
            generation,
        ),
        Err(e) => conditions::set(
            &mut status.conditions,
            READY,
            false,
            "InvalidTemplate",
            e.to_string(),
            generation,
        ),
    };
    if status != old {
        let patch = json!({ "status": { "conditions": status.conditions } });
        Api::<StackTemplate>::namespaced((*client).clone(), &namespace)
            .patch_status(
                &template.name_any(),
                &PatchParams::default(),
                &Patch::Merge(&patch),
            )
            .await?;
    }
    Ok(Action::await_change())
}

/// Runs the StackTemplate controller until `shutdown` resolves.
pub async fn run(client: kube::Client, shutdown: impl Future<Output = ()> + Send + Sync + 'static) {
    Controller::new(
        Api::<StackTemplate>::all(client.clone()),
        watcher::Config::default(),
    )
    .graceful_shutdown_on(shutdown)
    .run(
        reconcile,
        |_, _, _| Action::requeue(Duration::from_secs(10)),
        Arc::new(client),
    )
    .for_each(|_| async {})
    .await;
}
