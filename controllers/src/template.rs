//! The StackTemplate controller: marks each template `Ready` or says exactly what is wrong with
//! it. The template rules themselves (slots, instantiation, export and import) are pure and live
//! in [`kubenest_domain::template`].

use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::ResourceExt;
use kube::api::Api;
use kube::runtime::controller::{Action, Controller};
use kube::runtime::watcher;
use kubenest_crds::template::StackTemplate;
use kubenest_domain::template::check;
use serde::Serialize;

use crate::conditions::{self, READY};
use crate::patch::merge_status;

/// The part of a StackTemplate's status this controller writes: its conditions.
#[derive(Debug, Serialize)]
struct Conditions<'a> {
    conditions: &'a [Condition],
}

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
        let api = Api::<StackTemplate>::namespaced((*client).clone(), &namespace);
        merge_status(
            &api,
            &template.name_any(),
            &Conditions {
                conditions: &status.conditions,
            },
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
        crate::metrics::metrics()
            .reconciles
            .measure("template", reconcile),
        |_, _, _| Action::requeue(Duration::from_secs(10)),
        Arc::new(client),
    )
    .for_each(|_| async {})
    .await;
}
