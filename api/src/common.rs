//! The paths every area shares: an object by its id, an organization by its name.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// `{id}` in a path.
#[derive(Debug, Deserialize, Serialize, JsonSchema)]
pub struct IdPath {
    pub id: String,
}

/// `{org}` in a path.
#[derive(Debug, Deserialize, Serialize, JsonSchema)]
pub struct OrgPath {
    pub org: String,
}
