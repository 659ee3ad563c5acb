//! Organizations.

use crate::members::MemberBody;
use crate::verification::{VerificationBody, VerificationView};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// An organization.
#[derive(Debug, Serialize, Deserialize, JsonSchema)]
pub struct OrgResponse {
    pub name: String,
    pub display_name: String,
    /// Its namespace on the management cluster (for kubectl).
    pub namespace: Option<String>,
    pub phase: Option<String>,
    /// Your strongest role at organization scope, if any.
    pub role: Option<crate::members::Role>,
    /// The verification of the organization's Apps that set none of their own (defaults
    /// filled in); `null`: such Apps' revisions are not verified.
    pub verification: Option<VerificationView>,
    /// CPU and memory requests all its projects may hold across its clusters
    /// (`GET /api/v1/orgs/{org}/usage` says what they use).
    pub budget: Option<crate::fences::BudgetBody>,
    pub created_at: Option<String>,
}

/// An organization to create.
#[derive(Debug, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct NewOrgBody {
    /// DNS label; also names its namespace (`org-{name}`).
    #[schemars(length(min = 1, max = 63), regex(pattern = crate::DNS_LABEL_PATTERN))]
    pub name: String,
    pub display_name: String,
    #[serde(default)]
    pub members: Vec<MemberBody>,
    /// The verification of the organization's Apps that set none of their own (see the App's
    /// `verification`); without it, such Apps' revisions are not verified.
    #[serde(
        default,
        deserialize_with = "crate::verification::object_or_null",
        skip_serializing_if = "Option::is_none"
    )]
    pub verification: Option<VerificationBody>,
}

/// A change of an organization: each field given replaces its own (at least one is given).
#[derive(Debug, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(extend("minProperties" = 1))]
pub struct PatchOrgBody {
    /// A new default verification of the organization's Apps that set none of their own
    /// (see the App's `verification`), replacing the whole one; `null` removes it.
    #[serde(
        default,
        deserialize_with = "crate::verification::given_or_null",
        skip_serializing_if = "Option::is_none"
    )]
    #[schemars(with = "Option<VerificationBody>")]
    pub verification: Option<Option<VerificationBody>>,
    /// A new budget of CPU and memory requests across all the organization's clusters,
    /// replacing the whole one; `null` removes it.
    #[serde(
        default,
        deserialize_with = "crate::verification::given_or_null",
        skip_serializing_if = "Option::is_none"
    )]
    // The document has always said `default: null` here (what serde's derive gave before the
    // body could be written); kept so the document does not change.
    #[schemars(with = "Option<crate::fences::BudgetBody>", extend("default" = null))]
    pub budget: Option<Option<crate::fences::BudgetBody>>,
}

/// `{org}/members/{user}` in a path.
#[derive(Debug, Deserialize, Serialize, JsonSchema)]
pub struct OrgMemberPath {
    pub org: String,
    pub user: String,
}
