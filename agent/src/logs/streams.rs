//! The agent's live log streams, by subscription id: what [`crate::context::Context`] holds
//! so a `logs.unsubscribe` or a dropped session can end a stream.

use std::collections::HashMap;
use std::sync::Mutex;

use tokio_util::sync::CancellationToken;

/// The agent's live log streams, by subscription id.
#[derive(Debug, Default)]
pub struct Streams {
    active: Mutex<HashMap<String, CancellationToken>>,
}

impl Streams {
    pub(super) fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, CancellationToken>> {
        self.active.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// How many streams are live.
    pub fn len(&self) -> usize {
        self.lock().len()
    }

    /// Whether no stream is live.
    pub fn is_empty(&self) -> bool {
        self.lock().is_empty()
    }

    pub(super) fn remove(&self, id: &str) {
        self.lock().remove(id);
        crate::metrics::metrics().log_streams(self.len());
    }
}
