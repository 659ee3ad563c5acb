//! Who made a change: the `kubenest.io/actor` annotation, which the REST facade sets for its
//! callers and the admission webhook stamps from the authenticated identity of every other
//! writer (overwriting what the writer claimed); on a management cluster without the webhook,
//! the Kubernetes field manager that last changed the spec.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ManagedFieldsEntry;
use kubenest_crds::app::App;
use kubenest_crds::names::{annotations, field_managers};

/// Who made the App's current spec.
pub fn actor_of(app: &App) -> String {
    let fields = app.metadata.managed_fields.as_deref().unwrap_or_default();
    let none = BTreeMap::new();
    let annotations = app.metadata.annotations.as_ref().unwrap_or(&none);
    actor_of_fields(fields, annotations)
}

/// [`actor_of`] for any object, from its managed fields and annotations.
pub fn actor_of_fields(
    fields: &[ManagedFieldsEntry],
    annotations: &BTreeMap<String, String>,
) -> String {
    if let Some(actor) = annotations.get(annotations::ACTOR) {
        return actor.clone();
    }
    fields
        .iter()
        .filter(|f| f.manager.as_deref() != Some(field_managers::CONTROLLERS))
        .filter(|f| {
            f.fields_v1
                .as_ref()
                .is_some_and(|v| v.0.get("f:spec").is_some())
        })
        .max_by_key(|f| f.time.as_ref().map(|t| t.0))
        .and_then(|f| f.manager.clone())
        .map_or_else(|| "unknown".to_owned(), |m| format!("kubernetes:{m}"))
}
