//! An App component's secrets and git credentials.

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// `{id}/components/{component}` in a path.
#[derive(Debug, Deserialize, Serialize, JsonSchema)]
pub struct ComponentPath {
    pub id: String,
    pub component: String,
}

#[derive(Debug, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SecretBody {
    /// Keys and values to set (other keys are kept). Never stored or echoed by kubenest.
    pub values: BTreeMap<String, String>,
}

/// What changed (the keys, never the values).
#[derive(Debug, Serialize, Deserialize, JsonSchema)]
pub struct SecretResponse {
    pub component: String,
    pub keys: Vec<String>,
}

#[derive(Debug, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SecretDeleteQuery {
    /// Comma-separated keys to remove; without it the whole Secret is deleted.
    pub keys: Option<String>,
}

/// A Git workload's repository credentials: a username and password (or token) for https, or
/// an ssh key with the server's `known_hosts` lines for `ssh://` and `git@` URLs.
#[derive(Debug, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct GitCredentialsBody {
    pub username: Option<String>,
    /// Never stored or echoed by kubenest.
    pub password: Option<String>,
    /// An OpenSSH private key. Never stored or echoed by kubenest.
    pub ssh_private_key: Option<String>,
    /// The server's host keys, as `known_hosts` lines (required with an ssh key: the build
    /// checks the server it talks to).
    pub known_hosts: Option<String>,
}

/// Which kind of credentials a component's build uses now (never the values).
#[derive(Debug, Serialize, Deserialize, JsonSchema)]
pub struct GitCredentialsResponse {
    pub component: String,
    /// `https` or `ssh`; `none` once removed.
    pub kind: String,
}
