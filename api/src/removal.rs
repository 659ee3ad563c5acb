//! What a delete answers: removed, or still deleting and waiting for what.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// `?force=true` on a DELETE.
#[derive(Debug, Default, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct DeleteQuery {
    /// Admins only: remove it (and what it holds) from kubenest now, without the agent's
    /// confirmation. For a cluster that will not answer again; what may be left on the cluster
    /// is listed in the answer.
    #[serde(default)]
    pub force: bool,
}

/// Where a deletion stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum RemovalState {
    /// Deleting: it goes once its cluster confirms (see `waiting_for`).
    Deleting,
    /// Removed from kubenest by force; `left_on_cluster` is what may remain there.
    Removed,
}

/// The answer to a DELETE of an App, addon, project or cluster.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct RemovalResponse {
    pub state: RemovalState,
    /// What the deletion waits for (the agent's confirmation, and whether it is reachable).
    pub waiting_for: Vec<String>,
    /// Forced removals: every object removed from kubenest (`app/shop`, `project/web`, ...).
    pub removed: Vec<String>,
    /// Forced removals: what may be left on the cluster, for its owner to clean up.
    pub left_on_cluster: Vec<String>,
}

impl RemovalResponse {
    /// A deletion that waits for `waiting_for`.
    pub fn deleting(waiting_for: Vec<String>) -> Self {
        Self {
            state: RemovalState::Deleting,
            waiting_for,
            removed: vec![],
            left_on_cluster: vec![],
        }
    }

    /// A forced removal, filled in as it goes.
    pub fn removed() -> Self {
        Self {
            state: RemovalState::Removed,
            waiting_for: vec![],
            removed: vec![],
            left_on_cluster: vec![],
        }
    }
}
