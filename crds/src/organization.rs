//! Organization: the tenant. Cluster-scoped; its objects live in a namespace of its own.

use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::common::{Condition, Member};

/// An organization: members and their roles; its clusters, projects and apps live in the
/// namespace recorded in its status.
#[derive(CustomResource, Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "kubenest.io",
    version = "v1alpha1",
    kind = "Organization",
    plural = "organizations"
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
    name = "Age",
    type_ = "date",
    json_path = ".metadata.creationTimestamp"
))]
#[serde(rename_all = "camelCase")]
pub struct OrganizationSpec {
    #[schemars(length(min = 1, max = 253))]
    pub display_name: String,
    /// Organization-wide roles.
    #[serde(default)]
    #[schemars(length(max = 1000))]
    pub members: Vec<Member>,
    /// The verification of the organization's Apps that set none of their own.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub verification: Option<crate::verification::VerificationSpec>,
}

/// What the Organization controller observed.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct OrganizationStatus {
    /// The organization's namespace on the management cluster.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phase: Option<String>,
    #[serde(default)]
    pub conditions: Vec<Condition>,
}
