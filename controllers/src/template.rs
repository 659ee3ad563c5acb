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
use kubenest_crds::template::{StackTemplate, StackTemplateStatus};
use kubenest_domain::template::check;
use serde::Serialize;

use crate::conditions::{self, READY};
use crate::patch::merge_status;

/// The part of a StackTemplate's status this controller writes.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
struct Owned<'a> {
    observed_generation: Option<i64>,
    conditions: &'a [Condition],
}

/// The status that judges the template's current generation (pure): `Ready`, or exactly what
/// is wrong, stamped with the generation judged.
fn judge(template: &StackTemplate) -> StackTemplateStatus {
    let mut status = template.status.clone().unwrap_or_default();
    let generation = template.metadata.generation;
    status.observed_generation = generation;
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
    status
}

async fn reconcile(
    template: Arc<StackTemplate>,
    client: Arc<kube::Client>,
) -> Result<Action, kube::Error> {
    let Some(namespace) = template.namespace() else {
        return Ok(Action::await_change());
    };
    let old = template.status.clone().unwrap_or_default();
    let status = judge(&template);
    if status != old {
        let api = Api::<StackTemplate>::namespaced((*client).clone(), &namespace);
        let owned = Owned {
            observed_generation: status.observed_generation,
            conditions: &status.conditions,
        };
        merge_status(&api, &template.name_any(), &owned).await?;
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

#[cfg(test)]
mod tests {
    use kubenest_crds::template::{Scope, StackTemplateSpec};
    use serde_json::json;

    use super::*;

    #[test]
    fn a_template_is_judged_for_its_generation_and_written_once() {
        let component = json!({"name": "web", "workload": {"image": "nginx"}});
        let mut template = StackTemplate::new(
            "web",
            StackTemplateSpec {
                description: String::new(),
                scope: Scope::Global,
                project: None,
                cluster: None,
                parameters: Vec::new(),
                components: vec![serde_json::from_value(component).unwrap()],
            },
        );
        template.metadata.generation = Some(4);
        let judged = judge(&template);
        assert_eq!(judged.observed_generation, Some(4));
        let ready = conditions::get(&judged.conditions, READY).unwrap();
        assert_eq!(
            (ready.status.as_str(), ready.observed_generation),
            ("True", Some(4))
        );
        template.status = Some(judged.clone());
        assert_eq!(judge(&template), judged, "nothing new: nothing to write");
        let patch = Owned {
            observed_generation: judged.observed_generation,
            conditions: &[],
        };
        assert_eq!(
            serde_json::to_value(&patch).unwrap(),
            json!({"observedGeneration": 4, "conditions": []})
        );
    }
}
