//! Organization: the tenant. Cluster-scoped; its objects live in a namespace of its own.

use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::common::{Condition, Member, conditions_by_type};

/// An organization's name, members and defaults.
#[derive(CustomResource, Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "kubenest.io",
    version = "v1alpha1",
    kind = "Organization",
    plural = "organizations",
    doc = "An Organization: a tenant, its members and their roles. Its clusters, projects and \
           apps live in the namespace recorded in its status."
)]
#[kube(
    shortname = "org",
    category = "kubenest",
    status = "OrganizationStatus"
)]
#[kube(printcolumn(
    name = "Display Name",
    type_ = "string",
    json_path = ".spec.displayName"
))]
#[kube(printcolumn(name = "Namespace", type_ = "string", json_path = ".status.namespace"))]
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
pub struct OrganizationSpec {
    /// The name people see.
    #[schemars(length(min = 1, max = 253))]
    pub display_name: String,
    /// Organization-wide roles.
    #[serde(default)]
    #[schemars(length(max = 1000))]
    pub members: Vec<Member>,
    /// The verification of the organization's Apps that set none of their own.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub verification: Option<crate::verification::VerificationSpec>,
    /// CPU and memory requests all the organization's projects may hold, across its clusters.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub budget: Option<crate::fences::Budget>,
}

/// What the Organization controller observed.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct OrganizationStatus {
    /// The organization's namespace on the management cluster.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
    /// `Ready` once the namespace and role bindings are in place.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phase: Option<String>,
    /// The generation of the spec the controller last wrote this status for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    /// `Ready`, one condition of each type.
    #[serde(default)]
    #[schemars(transform = conditions_by_type)]
    pub conditions: Vec<Condition>,
}
