//! What the API answers about an App: its phase, components, sync, drift and conditions.

pub use kubenest_api::apps::{
    AppResponse, ComponentStatusView, ConditionView, DriftView, SyncView,
};

use kube::ResourceExt;
use kubenest_crds::App;

use super::super::Scoped;
use crate::k8s;
use crate::model::components_from_crd;

/// An App's (or addon's) sync status as the API answers it.
pub fn sync_view(sync: kubenest_crds::app::Sync) -> SyncView {
    SyncView {
        drift_detected: sync.drift_detected,
        drift_class: sync.drift_class,
        drift_details: sync
            .drift_details
            .into_iter()
            .map(|d| DriftView {
                resource: d.resource,
                field: d.field,
                desired: d.desired,
                observed: d.observed,
                manager: d.manager,
            })
            .collect(),
    }
}

pub(super) fn response(app: &App, scoped: Option<&Scoped<App>>) -> AppResponse {
    let status = app.status.clone().unwrap_or_default();
    let namespace = app.namespace().unwrap_or_default();
    let sync = status.sync.clone().unwrap_or_default();
    let message = status
        .conditions
        .iter()
        .find(|c| c.type_ == "Ready")
        .map(|c| c.message.clone())
        .unwrap_or_default();
    AppResponse {
        id: k8s::uid(app),
        name: app.name_any(),
        org: k8s::org_name_of(&namespace).unwrap_or_default().to_owned(),
        project: app.spec.project.clone(),
        project_id: scoped
            .and_then(|s| s.project.as_ref())
            .and_then(ResourceExt::uid),
        cluster_id: scoped
            .and_then(|s| s.cluster.as_ref())
            .and_then(|c| c.status.as_ref()?.cluster_id.clone()),
        phase: status.phase.clone().unwrap_or_else(|| "Pending".into()),
        message,
        paused: app.spec.paused,
        progress_deadline_seconds: app.spec.progress_deadline_seconds,
        components: components_from_crd(&app.spec.components),
        verification: app
            .spec
            .verification
            .as_ref()
            .map(crate::model::verification::verification_view),
        verdict: status
            .verification
            .clone()
            .map(crate::model::verdict::verdict_view),
        component_status: status
            .components
            .iter()
            .map(|c| ComponentStatusView {
                name: c.name.clone(),
                ready: c.ready,
                ready_replicas: c.ready_replicas,
                desired_replicas: c.desired_replicas,
                message: c.message.clone(),
            })
            .collect(),
        sync: sync_view(sync),
        revision: status.revision,
        observed_revision: status.observed_revision,
        deployment_id: status.deployment_id,
        ingress_address: status.ingress_address,
        gitops_error: status.gitops_error,
        observed_at: status.observed_at,
        last_observation: status.last_observation,
        created_at: k8s::created(app),
        conditions: status
            .conditions
            .iter()
            .map(|c| ConditionView {
                kind: c.type_.clone(),
                status: c.status.clone(),
                reason: c.reason.clone(),
                message: c.message.clone(),
            })
            .collect(),
    }
}
