//! Pieces shared by the kinds: memberships, conditions, chart references.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

pub use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
/// The roles are the REST API's words too: one definition, in the API types.
pub use kubenest_api::members::Role;

/// A user's role on the object that lists it (organization, cluster or project).
///
/// The membership binds the user's immutable id, never the name: a user deleted and created
/// again under the same name is another id and holds nothing. The REST API always fills
/// `userId` in; a kubectl or GitOps write without it is refused by the admission webhook (an
/// object stored before that rule binds nobody for such a member). On the management cluster the member is the
/// Kubernetes user [`kubernetes_user`] of that id.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct Member {
    /// The kubenest user name when the role was given (for people; binds nothing).
    #[schemars(length(min = 1, max = 253))]
    pub user: String,
    /// The user's immutable id (`kubenest users list`), which the role binds.
    #[serde(rename = "userId", default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 64))]
    pub user_id: Option<String>,
    /// `admin`, `member` or `viewer`.
    pub role: Role,
}

/// The prefix of every kubenest user's Kubernetes user name.
pub const KUBERNETES_USER_PREFIX: &str = "kubenest:";

/// The Kubernetes user a kubenest user of id `user_id` is on the management cluster
/// (`kubenest:<id>`): the subject of the RoleBindings the controllers generate from
/// memberships, and the name the management cluster's authenticator must map a kubenest user
/// to (for example a JWT authenticator with `claims.uid` and the prefix `kubenest:`).
pub fn kubernetes_user(user_id: &str) -> String {
    format!("{KUBERNETES_USER_PREFIX}{user_id}")
}

/// A pinned Helm chart.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Chart {
    /// The agent's catalog (`charts/<folder>`), an `https://` chart repository or an `oci://`
    /// registry path.
    #[schemars(
        length(min = 1, max = 1024),
        regex(pattern = kubenest_contracts::patterns::CHART_REPOSITORY)
    )]
    pub repository: String,
    /// The chart's name in the repository.
    #[schemars(
        length(min = 1, max = 253),
        regex(pattern = kubenest_contracts::patterns::CHART_NAME)
    )]
    pub name: String,
    /// An exact version; ranges are refused.
    #[schemars(regex(pattern = kubenest_contracts::patterns::CHART_VERSION))]
    pub version: String,
}

/// The progress deadline of Apps, standalone addons and Projects unless their spec sets one.
pub const DEFAULT_PROGRESS_DEADLINE_SECONDS: u32 = 600;

pub(crate) fn default_progress_deadline() -> u32 {
    DEFAULT_PROGRESS_DEADLINE_SECONDS
}

/// The clock of one change's progress deadline, kept in the status by the controllers. The
/// deadline of its delivery runs from `startedAt`; once the cluster holds the change, the
/// deadline of its rollout runs from `deliveredAt`, so an outage before delivery is not blamed
/// on the rollout.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ProgressClock {
    /// The change it times: a Project's generation, an AddonInstance's revision.
    pub change: i64,
    /// When the change was first seen (RFC 3339).
    pub started_at: String,
    /// When the cluster was first seen to hold it (RFC 3339).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub delivered_at: Option<String>,
}

/// Free-form Helm values, kept as given.
pub type Values = serde_json::Map<String, serde_json::Value>;

/// Marks a free-form object in a CRD schema so the API server keeps its fields.
pub(crate) fn preserve_unknown_fields(schema: &mut schemars::Schema) {
    schema.insert("x-kubernetes-preserve-unknown-fields".into(), true.into());
    schema.remove("additionalProperties");
}

/// Condition types and reasons shared by every kind.
pub use crate::names::conditions;

/// Makes a list of conditions a map keyed by `type`, as Kubernetes' own conditions are: a
/// server-side apply of one condition leaves the others, and a type appears once.
pub fn conditions_by_type(schema: &mut schemars::Schema) {
    list_map(schema, "type");
}

/// Makes a list of named items a map keyed by `name`: a server-side apply (from Git, say) of
/// one item leaves the items other managers own, and a name appears once.
pub fn items_by_name(schema: &mut schemars::Schema) {
    list_map(schema, "name");
}

/// `x-kubernetes-list-type: map` keyed by `key`, which the item schema must require.
fn list_map(schema: &mut schemars::Schema, key: &str) {
    schema.insert("x-kubernetes-list-type".into(), "map".into());
    schema.insert(
        "x-kubernetes-list-map-keys".into(),
        serde_json::json!([key]),
    );
}

/// Marks the items of an array of free-form objects so the API server keeps their fields.
pub(crate) fn preserve_unknown_items(schema: &mut schemars::Schema) {
    if let Some(items) = schema.get_mut("items").and_then(|v| v.as_object_mut()) {
        items.insert("x-kubernetes-preserve-unknown-fields".into(), true.into());
        items.remove("additionalProperties");
    }
}
