//! Users and sessions.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

#[derive(Debug, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct LoginBody {
    #[schemars(length(min = 1, max = 253))]
    pub username: String,
    #[schemars(length(min = 1, max = 1024))]
    pub password: String,
}

/// A fresh access token; the refresh token is in the `kubenest_refresh` cookie.
#[derive(Debug, Serialize, Deserialize, JsonSchema)]
pub struct TokenResponse {
    pub access_token: String,
    /// Always `Bearer`.
    pub token_type: String,
    /// Seconds until the access token expires.
    pub expires_in: i64,
    pub username: String,
    /// Your immutable user id (what memberships name).
    pub user_id: String,
}

/// A user as the API shows them (never the hash).
#[derive(Debug, Serialize, Deserialize, JsonSchema)]
pub struct UserView {
    pub username: String,
    /// Immutable: what memberships bind (and the Kubernetes user `kubenest:<id>`).
    pub id: String,
    pub platform_admin: bool,
    /// Disabled users can neither log in nor use their tokens.
    pub disabled: bool,
    pub created_at: String,
}

#[derive(Debug, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct NewUserBody {
    /// Lowercase letters, digits and `-._@`, starting and ending with a letter or digit.
    #[schemars(length(min = 1, max = 253), regex(pattern = crate::USERNAME_PATTERN))]
    pub username: String,
    #[schemars(length(min = 12, max = 1024))]
    pub password: String,
    #[serde(default)]
    pub platform_admin: bool,
}

#[derive(Debug, Deserialize, Serialize, JsonSchema)]
pub struct UserPath {
    pub username: String,
}

#[derive(Debug, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PasswordBody {
    #[schemars(length(min = 12, max = 1024))]
    pub password: String,
}
