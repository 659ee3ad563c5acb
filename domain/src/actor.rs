//! Who made a change: the REST facade's `kubenest.io/actor` when that field manager wrote it,
//! else the Kubernetes field manager that last changed the spec.

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
    let by_api = fields.iter().any(|f| {
        f.manager.as_deref() == Some(field_managers::API)
            && f.fields_v1.as_ref().is_some_and(|v| {
                v.0.pointer("/f:metadata/f:annotations")
                    .and_then(|a| a.get(format!("f:{}", annotations::ACTOR)))
                    .is_some()
            })
    });
    if by_api && let Some(actor) = annotations.get(annotations::ACTOR) {
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
