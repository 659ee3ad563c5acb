//! Members and their roles on an organization, cluster or project.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// `{id}/members/{user}` in a path.
#[derive(Debug, Deserialize, Serialize, JsonSchema)]
pub struct MemberPath {
    pub id: String,
    pub user: String,
}

/// A role to give a user at a scope.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct MemberBody {
    /// The user's name.
    #[schemars(length(min = 1, max = 253), regex(pattern = crate::USERNAME_PATTERN))]
    pub user: String,
    /// `admin`, `member` or `viewer`.
    pub role: Role,
}

/// A member and their role at a scope.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct MemberView {
    /// The user's name.
    pub user: String,
    /// The user's immutable id, which the role binds (none: written by hand, binds nobody).
    pub user_id: Option<String>,
    /// `admin`, `member` or `viewer`.
    pub role: Role,
}

/// A role of a member at some scope.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize, JsonSchema,
)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    /// Everything, including destructive operations.
    Admin,
    /// Create and change, no destructive operations.
    Member,
    /// Read only.
    Viewer,
}
