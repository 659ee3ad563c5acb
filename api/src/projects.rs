//! Projects.

use crate::members::MemberView;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// A project.
#[derive(Debug, Serialize, Deserialize, JsonSchema)]
pub struct ProjectResponse {
    pub id: String,
    pub name: String,
    pub org: String,
    pub cluster: String,
    pub cluster_id: Option<String>,
    /// The namespace on the cluster.
    pub namespace: String,
    /// `Pending` until the agent confirms the namespace, then `Ready`.
    pub phase: String,
    pub message: String,
    /// While the cluster is unreachable (`Ready` is `Unknown`): when it last reported; the
    /// phase is as of then.
    pub last_observation: Option<String>,
    pub registry_secret: Option<String>,
    /// The project has an ingress CA (`/api/v1/projects/{id}/ingress-ca`): an ingress with
    /// `tls` and no `tls_secret` gets a certificate from it.
    pub ingress_ca: bool,
    pub members: Vec<MemberView>,
    pub created_at: Option<String>,
    /// Seconds the cluster may take to confirm the namespace.
    pub progress_deadline_seconds: u32,
    /// The Pod Security Standard the namespace enforces.
    pub pod_security: PodSecurity,
    /// Its quota, default limits and network isolation (`PUT /api/v1/projects/{id}/fences`;
    /// what it uses: `GET /api/v1/projects/{id}/usage`).
    pub fences: crate::fences::FencesBody,
    /// The fences its cluster last put back after someone changed them there.
    pub fences_healed: Vec<String>,
}

#[derive(Debug, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct NewProjectBody {
    /// DNS label, unique in the organization.
    #[schemars(length(min = 1, max = 63), regex(pattern = crate::DNS_LABEL_PATTERN))]
    pub name: String,
    /// The cluster the project lives on.
    pub cluster_id: String,
    /// The namespace on the cluster (defaults to the name): a DNS label, not one of the
    /// cluster's own (`kube-system`, ...).
    #[serde(default)]
    #[schemars(length(min = 1, max = 63), regex(pattern = crate::DNS_LABEL_PATTERN))]
    pub namespace: Option<String>,
    /// A registry pull secret to keep in the namespace.
    #[serde(default)]
    #[schemars(length(min = 1, max = 63), regex(pattern = crate::DNS_LABEL_PATTERN))]
    pub registry_secret: Option<String>,
    /// Seconds the cluster may take to confirm the namespace before the project is `Failed`:
    /// 10 to 86400 (default 600).
    #[serde(default)]
    #[schemars(range(min = 10, max = 86400))]
    pub progress_deadline_seconds: Option<u32>,
    /// The Pod Security Standard the namespace enforces: `baseline` (default) or `restricted`.
    /// Anything but the default needs the admin role in the organization.
    #[serde(default)]
    pub pod_security: Option<PodSecurity>,
    /// Its quota, default limits and network isolation (absent: no quota, no defaults,
    /// isolated). Setting any needs the admin role in the organization.
    #[serde(default)]
    pub fences: Option<crate::fences::FencesBody>,
}

/// A Pod Security Standard a project namespace may enforce; there is no `privileged`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum PodSecurity {
    /// No privileged or host-namespace pods, no hostPath volumes, no added capabilities.
    #[default]
    Baseline,
    /// Baseline, and pods run as non-root with every capability dropped.
    Restricted,
}
