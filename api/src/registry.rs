//! A project's image registry credentials.

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// One registry's account.
#[derive(Debug, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RegistryAccount {
    /// 1 to 255 characters, without `:`.
    pub username: String,
    /// Never stored or echoed by kubenest.
    pub password: String,
}

#[derive(Debug, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RegistryCredentialsBody {
    /// Accounts by registry host (`host` or `host:port`, no scheme or path), 1 to 16. They
    /// replace the project's earlier credentials.
    pub registries: BTreeMap<String, RegistryAccount>,
}

/// Which registries the project has credentials for (never the passwords).
#[derive(Debug, Serialize, Deserialize, JsonSchema)]
pub struct RegistryCredentialsResponse {
    pub project: String,
    /// The Secret in the project's namespace.
    pub secret: String,
    pub registries: Vec<String>,
}
