//! The askers of `objects.request`s on this API server, by request id: the hub's
//! `objects.snapshot` for a request goes to its asker and nowhere else; one nobody waits for
//! any more is dropped.
//!
//! At most [`MAX_WAITING`] requests wait at once here, so a flood of requests cannot hold an
//! unbounded number of waiters (each answer may be most of a megabyte).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use kubenest_contracts::ObjectsSnapshot;
use tokio::sync::oneshot;

/// Requests one API server waits for at once.
pub const MAX_WAITING: usize = 64;

/// The waiting askers; cheap to clone.
#[derive(Debug, Clone, Default)]
pub struct Askers {
    waiting: Arc<Mutex<HashMap<String, oneshot::Sender<ObjectsSnapshot>>>>,
}

/// One asker's wait; dropping it forgets the request.
#[derive(Debug)]
pub struct Waiting {
    askers: Askers,
    id: String,
    /// The answer, when it comes.
    pub answer: oneshot::Receiver<ObjectsSnapshot>,
}

impl Drop for Waiting {
    fn drop(&mut self) {
        self.askers.lock().remove(&self.id);
    }
}

impl Askers {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, oneshot::Sender<ObjectsSnapshot>>> {
        self.waiting.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Registers an asker for request `id` (before the request is sent, so the answer cannot
    /// come first); `None` when [`MAX_WAITING`] wait already.
    pub fn open(&self, id: &str) -> Option<Waiting> {
        let (tx, answer) = oneshot::channel();
        let mut waiting = self.lock();
        if waiting.len() >= MAX_WAITING {
            return None;
        }
        waiting.insert(id.to_owned(), tx);
        Some(Waiting {
            askers: self.clone(),
            id: id.to_owned(),
            answer,
        })
    }

    /// Hands an answer to its asker, if one waits.
    pub fn answer(&self, snapshot: ObjectsSnapshot) {
        let asker = self.lock().remove(snapshot.request_id.as_str());
        if let Some(asker) = asker {
            let _ = asker.send(snapshot);
        }
    }

    /// Askers waiting now.
    pub fn len(&self) -> usize {
        self.lock().len()
    }

    /// Whether nobody waits.
    pub fn is_empty(&self) -> bool {
        self.lock().is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kubenest_contracts::Id;

    fn snapshot(id: &str) -> ObjectsSnapshot {
        ObjectsSnapshot {
            request_id: Id::new(id),
            objects: vec![],
            truncated: false,
            refused: None,
            taken_at: chrono::Utc::now(),
        }
    }

    #[test]
    fn an_answer_reaches_its_asker_only_and_a_gone_asker_leaves_nothing_behind() {
        let askers = Askers::default();
        let mut mine = askers.open("mine").unwrap();
        let mut theirs = askers.open("theirs").unwrap();
        askers.answer(snapshot("mine"));
        assert_eq!(mine.answer.try_recv().unwrap().request_id.as_str(), "mine");
        assert!(theirs.answer.try_recv().is_err());
        drop(theirs);
        drop(mine);
        assert!(askers.is_empty());
        // An answer nobody waits for is dropped.
        askers.answer(snapshot("theirs"));
        assert!(askers.is_empty());
    }

    #[test]
    fn no_more_than_the_cap_wait_at_once() {
        let askers = Askers::default();
        let held: Vec<Waiting> = (0..MAX_WAITING)
            .map(|i| askers.open(&format!("r{i}")).unwrap())
            .collect();
        assert!(askers.open("one-more").is_none());
        drop(held);
        assert!(askers.open("one-more").is_some());
    }
}
