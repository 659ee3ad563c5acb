//! Pod Security Admission on project namespaces: the labels that make the cluster's API server
//! refuse privileged, host-namespace and hostPath pods there, and the controller that puts them
//! back when someone changes them by hand.
//!
//! The level a project chose travels in `project.ensure`; the agent records it on the namespace
//! ([`LEVEL_ANNOTATION`]) next to the labels, so it can heal the labels without the hub. A
//! level it does not know (an annotation changed by hand) heals to `baseline`, the floor.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::core::v1::Namespace;
use kube::ResourceExt;
use kube::api::{Api, Patch, PatchParams};
use kube::runtime::controller::{Action, Controller};
use kube::runtime::watcher;
use kubenest_contracts::PodSecurity;
use kubenest_crds::names::labels;

/// The prefix of Pod Security Admission's namespace labels.
pub const PREFIX: &str = "pod-security.kubernetes.io/";

/// The annotation recording the level `project.ensure` asked for.
pub const LEVEL_ANNOTATION: &str = "kubenest.io/pod-security";

/// The Pod Security labels of a namespace at `level` (pure). `warn` and `audit` follow
/// `enforce`: enforcement judges only Pods, while a warning already answers the apply of a
/// Deployment whose pods the level would refuse.
pub fn labels_for(level: PodSecurity) -> BTreeMap<String, String> {
    let mut labels = BTreeMap::new();
    for mode in ["enforce", "warn", "audit"] {
        labels.insert(format!("{PREFIX}{mode}"), level.as_str().to_owned());
        labels.insert(format!("{PREFIX}{mode}-version"), "latest".to_owned());
    }
    labels
}

/// The level recorded on a namespace: its annotation's, `baseline` when absent or unknown.
pub fn recorded_level(annotations: &BTreeMap<String, String>) -> PodSecurity {
    match annotations.get(LEVEL_ANNOTATION).map(String::as_str) {
        Some("restricted") => PodSecurity::Restricted,
        _ => PodSecurity::Baseline,
    }
}

/// The labels to write back on a project namespace whose Pod Security labels differ from its
/// recorded level (pure); `None` when they match.
pub fn healing(
    labels: &BTreeMap<String, String>,
    annotations: &BTreeMap<String, String>,
) -> Option<BTreeMap<String, String>> {
    let want = labels_for(recorded_level(annotations));
    let drifted = want.iter().any(|(k, v)| labels.get(k) != Some(v));
    drifted.then_some(want)
}

/// Why a namespace could not be healed.
#[derive(Debug, thiserror::Error)]
#[error("kubernetes: {0}")]
pub struct HealError(#[from] kube::Error);

async fn reconcile(
    namespace: Arc<Namespace>,
    client: Arc<kube::Client>,
) -> Result<Action, HealError> {
    if namespace.metadata.deletion_timestamp.is_some() {
        return Ok(Action::await_change());
    }
    if let Some(want) = healing(namespace.labels(), namespace.annotations()) {
        let name = namespace.name_any();
        tracing::warn!(%name, "Pod Security labels changed on a project namespace; restoring");
        // A merge of the labels only: the agent's apply of the namespace owns the rest.
        Api::<Namespace>::all((*client).clone())
            .patch(
                &name,
                &PatchParams::default(),
                &Patch::Merge(serde_json::json!({"metadata": {"labels": want}})),
            )
            .await?;
    }
    Ok(Action::await_change())
}

fn error_policy(_: Arc<Namespace>, error: &HealError, _: Arc<kube::Client>) -> Action {
    tracing::warn!(%error, "healing Pod Security labels failed; retrying");
    Action::requeue(Duration::from_secs(5))
}

/// Keeps the Pod Security labels of every project namespace at its level until `shutdown`.
pub async fn run(client: kube::Client, shutdown: impl Future<Output = ()> + Send + Sync + 'static) {
    let namespaces = Api::<Namespace>::all(client.clone());
    let config = watcher::Config::default()
        .labels(labels::PROJECT_ID)
        .any_semantic();
    Controller::new(namespaces, config)
        .graceful_shutdown_on(shutdown)
        .run(reconcile, error_policy, Arc::new(client))
        .for_each(|result| async move {
            if let Err(error) = result {
                tracing::debug!(%error, "pod security reconcile");
            }
        })
        .await;
}

#[cfg(test)]
mod tests {
    use super::*;

    fn map(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    }

    #[test]
    fn labels_set_enforce_warn_and_audit_at_the_level_against_the_latest_standard() {
        let labels = labels_for(PodSecurity::Restricted);
        assert_eq!(labels.len(), 6);
        assert_eq!(labels["pod-security.kubernetes.io/enforce"], "restricted");
        assert_eq!(labels["pod-security.kubernetes.io/audit-version"], "latest");
    }

    #[test]
    fn a_label_changed_by_hand_heals_to_the_recorded_level() {
        let restricted = map(&[(LEVEL_ANNOTATION, "restricted")]);
        let mut labels = labels_for(PodSecurity::Restricted);
        assert_eq!(healing(&labels, &restricted), None);
        labels.insert(
            "pod-security.kubernetes.io/enforce".into(),
            "privileged".into(),
        );
        assert_eq!(
            healing(&labels, &restricted),
            Some(labels_for(PodSecurity::Restricted))
        );
        labels.remove("pod-security.kubernetes.io/warn");
        assert!(healing(&labels, &restricted).is_some());
    }

    #[test]
    fn an_unknown_or_missing_level_heals_to_baseline() {
        let privileged = map(&[(LEVEL_ANNOTATION, "privileged")]);
        assert_eq!(
            healing(&BTreeMap::new(), &privileged),
            Some(labels_for(PodSecurity::Baseline))
        );
        assert_eq!(recorded_level(&BTreeMap::new()), PodSecurity::Baseline);
    }
}
