//! The agent's own custom resources on its workload cluster: its durable local queue.
//!
//! A command that carries desired state becomes (or updates) one of these before the agent says
//! `command.accepted`, so work continues through hub outages and agent restarts: the controllers
//! here reconcile what is stored, with or without a hub.
//!
//! - **StackDeploy**: one per App, named `app-<app id>`, in the agent's namespace; its spec is the
//!   `app.deploy` command exactly as received (plus the latest redeploy request).
//! - **AddonRelease**: one per standalone addon (AddonInstance), named `addon-<addon id>`, with
//!   the revision history the agent keeps for rollbacks.
//! - **BuildRequest**: one per image build, named `build-<build id>`.
//!
//! The wire types inside are validated by the contracts' schemas when the command arrives; the
//! CRD schemas keep them as opaque objects (`x-kubernetes-preserve-unknown-fields`), so the
//! contracts stay the one definition of their shape.

// `#[kube(printcolumn(..., type_ = "string", ...))]` repeats arguments across columns by design.
#![allow(clippy::duplicated_attributes)]

use chrono::{DateTime, Utc};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::{CustomResource, CustomResourceExt};
use kubenest_contracts as wire;
use kubenest_crds::common::conditions_by_type;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Marks a field's schema as a free-form object the API server keeps as given.
fn opaque(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    schemars::json_schema!({
        "type": "object",
        "x-kubernetes-preserve-unknown-fields": true
    })
}

/// A free-form array of objects.
fn opaque_list(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    schemars::json_schema!({
        "type": "array",
        "items": { "type": "object", "x-kubernetes-preserve-unknown-fields": true }
    })
}

/// The desired state of one App on this cluster.
#[derive(CustomResource, Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "kubenest.io",
    version = "v1alpha1",
    kind = "StackDeploy",
    plural = "stackdeploys",
    shortname = "ksd",
    namespaced,
    status = "StackDeployStatus",
    doc = "A StackDeploy: the kubenest agent's durable copy of one App's deployment on this \
           cluster (the `app.deploy` command as received), reconciled with or without the hub."
)]
#[kube(printcolumn(name = "App", type_ = "string", json_path = ".spec.deploy.app.name"))]
#[kube(printcolumn(
    name = "Namespace",
    type_ = "string",
    json_path = ".spec.deploy.app.namespace"
))]
#[kube(printcolumn(name = "Phase", type_ = "string", json_path = ".status.phase"))]
#[kube(printcolumn(
    name = "Revision",
    type_ = "string",
    json_path = ".spec.deploy.revision"
))]
#[kube(printcolumn(
    name = "Ready",
    type_ = "string",
    json_path = r#".status.conditions[?(@.type=="Ready")].status"#,
    description = "The status of the Ready condition"
))]
#[kube(printcolumn(
    name = "Status",
    type_ = "string",
    json_path = r#".status.conditions[?(@.type=="Ready")].message"#,
    description = "The message of the Ready condition"
))]
#[kube(printcolumn(
    name = "Age",
    type_ = "date",
    json_path = ".metadata.creationTimestamp"
))]
#[serde(rename_all = "camelCase")]
pub struct StackDeploySpec {
    /// The `app.deploy` command as received.
    #[schemars(schema_with = "opaque")]
    pub deploy: wire::AppDeploy,
    /// The latest `app.redeploy` (its restart id): workloads restart once per distinct value.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub restart_id: Option<String>,
}

/// What the agent observes of a StackDeploy.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct StackDeployStatus {
    /// The generation of the spec the agent last wrote this status for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    /// `Pending`, `Deploying`, `Running`, `Failed`, `Paused` or `Deleting`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phase: Option<String>,
    /// The revision the status describes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_revision: Option<String>,
    /// When the agent started rolling out `observedRevision` (its progress deadline runs from
    /// here).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rollout_started_at: Option<DateTime<Utc>>,
    /// Health of each component.
    #[serde(default)]
    #[schemars(schema_with = "opaque_list")]
    pub components: Vec<wire::ComponentStatus>,
    /// The exports the addon components published.
    #[serde(default)]
    #[schemars(schema_with = "opaque_list")]
    pub exports: Vec<wire::PublishedExport>,
    /// The address the App's ingress answers on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ingress_address: Option<String>,
    /// Why the StackDeploy cannot be applied (e.g. a namespace outside its project).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rejection: Option<String>,
    /// The drift last reported: `recoverable` or `blocked_sync`, with the fields.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub drift_class: Option<String>,
    /// The drifted fields.
    #[serde(default)]
    #[schemars(schema_with = "opaque_list")]
    pub drift: Vec<wire::DriftDetail>,
    /// The restart id last carried out.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub handled_restart: Option<String>,
    /// Why the GitOps repository could not be written for an addon component at the last pass
    /// (the App runs regardless).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gitops_error: Option<String>,
    /// The verification of the running revision ([`crate::verify`]), written by its own loop
    /// and never by the StackDeploy controller's status writes (which skip it, so neither
    /// overwrites the other).
    #[serde(default, skip_serializing)]
    #[schemars(schema_with = "opaque")]
    pub verification: Option<serde_json::Value>,
    /// `Ready` (from the phase), one condition of each type.
    #[serde(default)]
    #[schemars(transform = conditions_by_type)]
    pub conditions: Vec<Condition>,
}

/// A standalone addon on this cluster, with the revisions the agent has applied.
#[derive(CustomResource, Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "kubenest.io",
    version = "v1alpha1",
    kind = "AddonRelease",
    plural = "addonreleases",
    shortname = "kar",
    namespaced,
    status = "AddonReleaseStatus",
    doc = "An AddonRelease: the kubenest agent's durable copy of one standalone addon on this \
           cluster, with every revision applied so far for rollbacks."
)]
#[kube(printcolumn(name = "Addon", type_ = "string", json_path = ".spec.apply.addon.name"))]
#[kube(printcolumn(
    name = "Revision",
    type_ = "integer",
    json_path = ".spec.apply.revision"
))]
#[kube(printcolumn(name = "Phase", type_ = "string", json_path = ".status.phase"))]
#[kube(printcolumn(
    name = "Ready",
    type_ = "string",
    json_path = r#".status.conditions[?(@.type=="Ready")].status"#,
    description = "The status of the Ready condition"
))]
#[kube(printcolumn(
    name = "Status",
    type_ = "string",
    json_path = r#".status.conditions[?(@.type=="Ready")].message"#,
    description = "The message of the Ready condition"
))]
#[kube(printcolumn(
    name = "Age",
    type_ = "date",
    json_path = ".metadata.creationTimestamp"
))]
#[serde(rename_all = "camelCase")]
pub struct AddonReleaseSpec {
    /// The revision to run now (an `addon.apply`, or a rollback's restored revision).
    #[schemars(schema_with = "opaque")]
    pub apply: wire::AddonApply,
    /// Every revision applied so far, oldest first, so a rollback needs nothing from the hub.
    #[serde(default)]
    #[schemars(schema_with = "opaque_list")]
    pub history: Vec<wire::AddonApply>,
}

/// What the agent observes of a standalone addon.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct AddonReleaseStatus {
    /// The generation of the spec the agent last wrote this status for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    /// `Installing`, `Ready` or `Failed`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phase: Option<String>,
    /// The revision the status describes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_revision: Option<u32>,
    /// What the last pass found.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub message: String,
    /// The GitOps commit holding the revision's folder.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub git_commit: Option<String>,
    /// Why the GitOps repository could not be written at the last pass (the addon runs
    /// regardless).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gitops_error: Option<String>,
    /// Fields another manager had changed, applied back by the last pass (reported once, then
    /// cleared by the next pass).
    #[serde(default)]
    #[schemars(schema_with = "opaque_list")]
    pub drift: Vec<wire::DriftDetail>,
    /// `Ready` (from the phase), one condition of each type.
    #[serde(default)]
    #[schemars(transform = conditions_by_type)]
    pub conditions: Vec<Condition>,
}

/// What the AddonRelease controller writes into the status after a pass (the whole status, each
/// field even when empty: in a merge patch `null` clears an earlier commit).
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct AddonReleaseObserved<'a> {
    pub observed_generation: Option<i64>,
    pub phase: &'a str,
    pub observed_revision: u32,
    pub message: &'a str,
    pub git_commit: Option<&'a str>,
    pub gitops_error: Option<&'a str>,
    pub drift: &'a [wire::DriftDetail],
    pub conditions: &'a [Condition],
}

/// An image build from Git.
#[derive(CustomResource, Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "kubenest.io",
    version = "v1alpha1",
    kind = "BuildRequest",
    plural = "buildrequests",
    shortname = "kbuild",
    namespaced,
    status = "BuildRequestStatus",
    doc = "A BuildRequest: one image build from Git on this cluster, run as a Job by the \
           kubenest agent."
)]
#[kube(printcolumn(name = "Image", type_ = "string", json_path = ".spec.request.image"))]
#[kube(printcolumn(name = "Phase", type_ = "string", json_path = ".status.phase"))]
#[kube(printcolumn(
    name = "Ready",
    type_ = "string",
    json_path = r#".status.conditions[?(@.type=="Ready")].status"#,
    description = "The status of the Ready condition"
))]
#[kube(printcolumn(
    name = "Status",
    type_ = "string",
    json_path = r#".status.conditions[?(@.type=="Ready")].message"#,
    description = "The message of the Ready condition"
))]
#[kube(printcolumn(
    name = "Age",
    type_ = "date",
    json_path = ".metadata.creationTimestamp"
))]
#[serde(rename_all = "camelCase")]
pub struct BuildRequestSpec {
    /// The `build.request` command as received (or derived from a Git workload).
    #[schemars(schema_with = "opaque")]
    pub request: wire::BuildRequest,
}

/// Progress of a build.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct BuildRequestStatus {
    /// The generation of the spec the agent last wrote this status for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    /// `Pending`, `Running`, `Succeeded` or `Failed`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phase: Option<String>,
    /// The pushed image, once Succeeded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image: Option<String>,
    /// What the build is doing, or why it failed.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub message: String,
    /// `Ready` (from the phase), one condition of each type.
    #[serde(default)]
    #[schemars(transform = conditions_by_type)]
    pub conditions: Vec<Condition>,
}

/// What the BuildRequest controller writes into the status on progress (`null` clears an image).
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct BuildRequestProgress<'a> {
    pub observed_generation: Option<i64>,
    pub phase: &'a str,
    pub image: Option<&'a str>,
    pub message: &'a str,
    pub conditions: &'a [Condition],
}

/// A status merge patch: `{"status": ...}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct StatusPatch<S> {
    pub status: S,
}

/// Every CRD the agent needs on its cluster.
pub fn all() -> Vec<CustomResourceDefinition> {
    vec![StackDeploy::crd(), AddonRelease::crd(), BuildRequest::crd()]
}

/// Every CRD as (file name, YAML), as committed under `agent/crds/`.
pub fn yaml_files() -> Result<Vec<(String, String)>, serde_yaml::Error> {
    all()
        .into_iter()
        .map(|crd| {
            let name = format!("{}.yaml", crd.metadata.name.clone().unwrap_or_default());
            Ok((name, serde_yaml::to_string(&crd)?))
        })
        .collect()
}

/// The StackDeploy name of an App.
pub fn stack_deploy_name(app_id: &str) -> String {
    format!("app-{app_id}")
}

/// The AddonRelease name of a standalone addon.
pub fn addon_release_name(addon_id: &str) -> String {
    format!("addon-{addon_id}")
}

/// The BuildRequest name of a build.
pub fn build_request_name(build_id: &str) -> String {
    format!("build-{build_id}")
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn status_patches_write_every_field_and_clear_with_null() {
        let release = StatusPatch {
            status: AddonReleaseObserved {
                observed_generation: Some(4),
                phase: "Installing",
                observed_revision: 2,
                message: "",
                git_commit: None,
                gitops_error: None,
                drift: &[],
                conditions: &[],
            },
        };
        // What the controllers wrote with `json!` before they were typed; a drift healed is
        // cleared by the empty list.
        assert_eq!(
            serde_json::to_value(&release).unwrap(),
            json!({"status": {"observedGeneration": 4, "phase": "Installing",
                              "observedRevision": 2, "message": "", "gitCommit": null,
                              "gitopsError": null, "drift": [], "conditions": []}})
        );
        let build = StatusPatch {
            status: BuildRequestProgress {
                observed_generation: Some(1),
                phase: "Running",
                image: None,
                message: "building",
                conditions: &[],
            },
        };
        assert_eq!(
            serde_json::to_value(&build).unwrap(),
            json!({"status": {"observedGeneration": 1, "phase": "Running", "image": null,
                              "message": "building", "conditions": []}})
        );
    }
}
