//! What the agent remembers of the fences it keeps: per namespace, what it wants there and
//! what the API server stored when it applied it.

use std::collections::BTreeMap;
use std::sync::Mutex;

use kubenest_contracts as wire;
use serde_json::Value;

/// What the agent holds of one project namespace's fences.
#[derive(Debug, Clone)]
pub(super) struct Held {
    pub(super) project_id: wire::Id,
    /// Each fence wanted (by name): the object as rendered.
    pub(super) wanted: BTreeMap<&'static str, Value>,
    /// Each fence's `spec` (by name) as the API server stored it after the agent's apply.
    pub(super) stored: BTreeMap<&'static str, Value>,
    pub(super) usage: wire::Usage,
    pub(super) healed: Vec<String>,
}

/// The fences the agent keeps, by namespace.
#[derive(Debug, Default)]
pub struct Kept {
    held: Mutex<BTreeMap<String, Held>>,
    /// Taken by [`keep`] and by each look at a change, so a change the agent itself is making
    /// is never mistaken for someone else's.
    pub(super) turn: tokio::sync::Mutex<()>,
}

impl Kept {
    pub(super) fn with<T>(&self, f: impl FnOnce(&mut BTreeMap<String, Held>) -> T) -> Option<T> {
        self.held.lock().ok().map(|mut held| f(&mut held))
    }

    /// What `namespace` uses of its quota and the fences last healed there, as last seen.
    pub fn report(&self, namespace: &str) -> (wire::Usage, Vec<String>) {
        self.with(|held| {
            held.get(namespace)
                .map(|h| (h.usage.clone(), h.healed.clone()))
        })
        .flatten()
        .unwrap_or_default()
    }

    /// Forgets a namespace being deleted.
    pub fn forget(&self, namespace: &str) {
        self.with(|held| held.remove(namespace));
    }
}
