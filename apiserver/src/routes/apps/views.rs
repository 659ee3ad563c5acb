//! What the API answers about an App: its phase, components, sync, drift and conditions.

use kube::ResourceExt;
use kubenest_crds::App;
use schemars::JsonSchema;
use serde::Serialize;
use serde_json::Value;

use super::super::Scoped;
use crate::k8s;
use crate::model::verification::VerificationView;
use crate::model::{ComponentBody, components_from_crd};

/// Health of one component.
#[derive(Debug, Serialize, JsonSchema)]
pub struct ComponentStatusView {
    pub name: String,
    pub ready: bool,
    pub ready_replicas: u32,
    pub desired_replicas: u32,
    pub message: String,
}

/// One drifted field.
#[derive(Debug, Serialize, JsonSchema)]
pub struct DriftView {
    pub resource: String,
    pub field: String,
    pub desired: String,
    pub observed: String,
    /// The field manager that changed it, when known.
    pub manager: Option<String>,
}

/// Drift between what an App (or a standalone addon) says and what runs.
#[derive(Debug, Serialize, JsonSchema)]
pub struct SyncView {
    pub drift_detected: bool,
    /// `recoverable` (kubenest re-applies it) or `blocked_sync` (changes are refused until it
    /// clears).
    pub drift_class: Option<String>,
    pub drift_details: Vec<DriftView>,
}

impl From<kubenest_crds::app::Sync> for SyncView {
    fn from(sync: kubenest_crds::app::Sync) -> Self {
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
}

/// An App.
#[derive(Debug, Serialize, JsonSchema)]
pub struct AppResponse {
    pub id: String,
    pub name: String,
    pub org: String,
    pub project: String,
    pub project_id: Option<String>,
    pub cluster_id: Option<String>,
    /// `Pending`, `Deploying`, `Running`, `Paused`, `Failed`, ...
    pub phase: String,
    /// Why, for people (the Ready condition's message).
    pub message: String,
    pub paused: bool,
    pub progress_deadline_seconds: u32,
    #[schemars(with = "Vec<ComponentBody>")]
    pub components: Vec<Value>,
    /// How each revision is judged once it runs, as the App sets it (defaults filled in);
    /// `null`: the App sets none, and its organization's default applies, if any.
    pub verification: Option<VerificationView>,
    /// The verdict on the last revision verified, and what kubenest did with it.
    pub verdict: Option<crate::model::verdict::VerdictView>,
    pub component_status: Vec<ComponentStatusView>,
    pub sync: SyncView,
    pub revision: Option<String>,
    pub observed_revision: Option<String>,
    pub deployment_id: Option<String>,
    pub ingress_address: Option<String>,
    /// Why the agent could not write the App's addon folders to the cluster's GitOps
    /// repository (the App runs regardless; an alert is open meanwhile).
    pub gitops_error: Option<String>,
    pub observed_at: Option<String>,
    /// While the cluster is unreachable (`Ready` is `Unknown`, reason `ClusterUnreachable`):
    /// when it last reported; the phase and components are as of then.
    pub last_observation: Option<String>,
    pub created_at: Option<String>,
    /// The App's conditions (`Ready`, `RollbackFailed`, ...), each with its reason.
    pub conditions: Vec<ConditionView>,
}

/// One condition of an object.
#[derive(Debug, Serialize, JsonSchema)]
pub struct ConditionView {
    #[serde(rename = "type")]
    pub kind: String,
    /// `True`, `False` or `Unknown`.
    pub status: String,
    pub reason: String,
    pub message: String,
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
        verification: app.spec.verification.as_ref().map(VerificationView::from),
        verdict: status.verification.clone().map(Into::into),
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
        sync: sync.into(),
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
