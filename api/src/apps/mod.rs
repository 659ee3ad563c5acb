//! Apps: create, change, roll back, and what the API answers about them.

pub mod components;
pub mod history;
pub mod list;
pub mod logs;
pub mod objects;
pub mod secrets;
pub mod views;

pub use components::*;
pub use history::*;
pub use list::*;
pub use logs::*;
pub use objects::*;
pub use secrets::*;
pub use views::*;

use crate::verification::VerificationBody;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// An App to create.
#[derive(Debug, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct NewAppBody {
    pub project_id: String,
    /// DNS label, unique in the organization.
    #[schemars(length(min = 1, max = 63), regex(pattern = crate::DNS_LABEL_PATTERN))]
    pub name: String,
    #[schemars(length(min = 1, max = 64))]
    pub components: Vec<ComponentBody>,
    /// Seconds a revision may take, from when the cluster holds it, to become ready before the
    /// App is Failed (10 to 86400, default 600). A revision the cluster has not received yet is
    /// never failed by it: it is still delivered, and `Ready` says `DeliveryDelayed`.
    #[serde(default)]
    #[schemars(range(min = 10, max = 86400))]
    pub progress_deadline_seconds: Option<u32>,
    /// How each revision is judged once it runs, and what a failed one does (fields left out
    /// take their defaults). Without it, the organization's default applies, if it has one.
    #[serde(
        default,
        deserialize_with = "crate::verification::object_or_null",
        skip_serializing_if = "Option::is_none"
    )]
    pub verification: Option<VerificationBody>,
}

/// A change of an App: each field given replaces the App's.
#[derive(Debug, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PatchAppBody {
    /// The new components (the whole list).
    #[serde(default)]
    pub components: Option<Vec<ComponentBody>>,
    /// A new progress deadline (see the App's create body).
    #[serde(default)]
    #[schemars(range(min = 10, max = 86400))]
    pub progress_deadline_seconds: Option<u32>,
    /// A new verification (see the App's create body), replacing the whole one; `null` removes
    /// the App's own, so its organization's default applies again.
    #[serde(
        default,
        deserialize_with = "crate::verification::given_or_null",
        skip_serializing_if = "Option::is_none"
    )]
    #[schemars(with = "Option<VerificationBody>")]
    pub verification: Option<Option<VerificationBody>>,
}

#[derive(Debug, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RollbackBody {
    /// A deployment of this App whose spec to restore.
    pub deployment_id: String,
}

/// Every phase an App shows: the assessment's, and `Deleting` while its cleanup runs.
pub const PHASES: &[&str] = &[
    "Pending",
    "Deploying",
    "Running",
    "Paused",
    "Failed",
    "Deleting",
];
