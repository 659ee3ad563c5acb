//! Objects kept in Git: who owns them, so that the REST API does not fight a GitOps engine
//! (a change made through REST would be undone at the engine's next reconcile, silently).
//!
//! An object is Git's when a GitOps engine's field manager last wrote its spec, when Flux or
//! Argo CD left their tracking marks on it, or when it carries `kubenest.io/managed-by: gitops`.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

/// Field managers of the GitOps engines kubenest knows.
pub const MANAGERS: &[&str] = &[
    "kustomize-controller",
    "helm-controller",
    "argocd-controller",
    "argocd-application-controller",
];

/// The label that marks an object as managed from Git by any tool.
pub const MANAGED_BY_LABEL: &str = "kubenest.io/managed-by";

const FLUX_NAME: &str = "kustomize.toolkit.fluxcd.io/name";
const FLUX_NAMESPACE: &str = "kustomize.toolkit.fluxcd.io/namespace";
const ARGO_TRACKING: &str = "argocd.argoproj.io/tracking-id";

/// Who keeps an object in Git, in words for a refusal: `Flux Kustomization flux-system/apps`,
/// `Argo CD application shop`, `the GitOps field manager kustomize-controller`, or `Git (label
/// kubenest.io/managed-by=gitops)`.
pub fn owner(meta: &ObjectMeta) -> Option<String> {
    let none = BTreeMap::new();
    let labels = meta.labels.as_ref().unwrap_or(&none);
    let annotations = meta.annotations.as_ref().unwrap_or(&none);
    if let Some(name) = labels.get(FLUX_NAME) {
        let namespace = labels.get(FLUX_NAMESPACE).map_or("", String::as_str);
        return Some(format!("Flux Kustomization {namespace}/{name}"));
    }
    if let Some(tracking) = annotations.get(ARGO_TRACKING) {
        let app = tracking.split(':').next().unwrap_or(tracking);
        return Some(format!("Argo CD application {app}"));
    }
    let spec_manager = meta
        .managed_fields
        .iter()
        .flatten()
        .filter(|f| {
            f.fields_v1
                .as_ref()
                .is_some_and(|v| v.0.get("f:spec").is_some())
        })
        .filter_map(|f| f.manager.as_deref())
        .find(|m| MANAGERS.contains(m));
    if let Some(manager) = spec_manager {
        return Some(format!("the GitOps field manager {manager}"));
    }
    (labels.get(MANAGED_BY_LABEL).map(String::as_str) == Some("gitops"))
        .then(|| format!("Git (label {MANAGED_BY_LABEL}=gitops)"))
}

#[cfg(test)]
mod tests {
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::{FieldsV1, ManagedFieldsEntry};
    use serde_json::json;

    use super::*;

    fn managed(manager: &str, fields: serde_json::Value) -> ManagedFieldsEntry {
        ManagedFieldsEntry {
            manager: Some(manager.into()),
            fields_v1: Some(FieldsV1(fields)),
            ..ManagedFieldsEntry::default()
        }
    }

    #[test]
    fn an_engine_that_wrote_the_spec_owns_it_and_one_that_only_labelled_does_not() {
        let mut meta = ObjectMeta {
            managed_fields: Some(vec![
                managed("kubenest-apiserver", json!({"f:spec": {}})),
                managed(
                    "kustomize-controller",
                    json!({"f:metadata": {"f:labels": {}}}),
                ),
            ]),
            ..ObjectMeta::default()
        };
        assert_eq!(owner(&meta), None);
        meta.managed_fields.as_mut().unwrap().push(managed(
            "kustomize-controller",
            json!({"f:spec": {"f:components": {}}}),
        ));
        assert_eq!(
            owner(&meta).as_deref(),
            Some("the GitOps field manager kustomize-controller")
        );
    }

    #[test]
    fn tracking_marks_name_the_flux_kustomization_or_the_argo_application() {
        let meta = ObjectMeta {
            labels: Some(
                [
                    (FLUX_NAME.to_owned(), "apps".to_owned()),
                    (FLUX_NAMESPACE.to_owned(), "flux-system".to_owned()),
                ]
                .into(),
            ),
            ..ObjectMeta::default()
        };
        assert_eq!(
            owner(&meta).as_deref(),
            Some("Flux Kustomization flux-system/apps")
        );
        let meta = ObjectMeta {
            annotations: Some(
                [(
                    ARGO_TRACKING.to_owned(),
                    "shop:kubenest.io/App:org-a/shop".to_owned(),
                )]
                .into(),
            ),
            ..ObjectMeta::default()
        };
        assert_eq!(owner(&meta).as_deref(), Some("Argo CD application shop"));
        let meta = ObjectMeta {
            labels: Some([(MANAGED_BY_LABEL.to_owned(), "gitops".to_owned())].into()),
            ..ObjectMeta::default()
        };
        assert_eq!(
            owner(&meta).as_deref(),
            Some("Git (label kubenest.io/managed-by=gitops)")
        );
        assert_eq!(owner(&ObjectMeta::default()), None);
    }
}
