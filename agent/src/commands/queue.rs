//! The workers' queues: one per hash of the object a command is about, so commands about one
//! object run in the order they arrived. A copy of a command that is still waiting joins it.

use kubenest_contracts::{Envelope, Message};

/// Where a command's answer goes.
pub(super) type Reply = Box<dyn FnOnce(Message) + Send>;

/// A command waiting for its worker, and every send of it waiting for the answer.
pub(super) struct Pending {
    pub(super) envelope: Envelope,
    pub(super) replies: Vec<(uuid::Uuid, Reply)>,
}

/// One worker's queue. Closed when the [`Commands`](super::Commands) that feeds it is dropped; the worker then
/// finishes what is queued and ends.
#[derive(Default)]
pub(super) struct Queue {
    pending: std::sync::Mutex<std::collections::VecDeque<Pending>>,
    ready: tokio::sync::Notify,
    closed: std::sync::atomic::AtomicBool,
}

impl Queue {
    /// Queues `envelope`, or joins the same command already waiting.
    pub(super) fn push(&self, envelope: Envelope, reply: Reply) {
        let Ok(mut pending) = self.pending.lock() else {
            return;
        };
        let id = envelope.id;
        match pending
            .iter_mut()
            .find(|p| p.envelope.message == envelope.message)
        {
            Some(same) => same.replies.push((id, reply)),
            None => pending.push_back(Pending {
                envelope,
                replies: vec![(id, reply)],
            }),
        }
        drop(pending);
        self.ready.notify_one();
    }

    /// The next command, or `None` once the queue is closed and empty.
    pub(super) async fn pop(&self) -> Option<Pending> {
        loop {
            let notified = self.ready.notified();
            if let Some(next) = self.pending.lock().ok().and_then(|mut p| p.pop_front()) {
                return Some(next);
            }
            if self.closed.load(std::sync::atomic::Ordering::Acquire) {
                return None;
            }
            notified.await;
        }
    }

    /// Lets the worker end once what is queued is done.
    pub(super) fn close(&self) {
        self.closed
            .store(true, std::sync::atomic::Ordering::Release);
        self.ready.notify_one();
    }
}

/// The object a command is about, so commands about it stay in order.
pub(super) fn key_of(message: &Message) -> String {
    match message {
        Message::ProjectEnsure(p) => p.project_id.to_string(),
        Message::ProjectDelete(p) => p.project_id.to_string(),
        Message::AppDeploy(c) => c.app.app_id.to_string(),
        Message::AppDelete(c) => c.app.app_id.to_string(),
        Message::AppRedeploy(c) => c.app.app_id.to_string(),
        Message::AppPause(c) => c.app.app_id.to_string(),
        Message::AppResume(c) => c.app.app_id.to_string(),
        Message::AddonApply(c) => c.addon.addon_id.to_string(),
        Message::AddonRollback(c) => c.addon.addon_id.to_string(),
        Message::AddonDelete(c) => c.addon.addon_id.to_string(),
        Message::SecretSet(c) => format!(
            "{}/{}",
            c.target.namespace.as_str(),
            c.target.secret.as_str()
        ),
        Message::SecretDelete(c) => {
            format!(
                "{}/{}",
                c.target.namespace.as_str(),
                c.target.secret.as_str()
            )
        }
        Message::BuildRequest(c) => c.build_id.to_string(),
        // Reads only: spread over the workers, never behind one another.
        Message::ObjectsRequest(c) => c.request_id.to_string(),
        other => other.message_type().to_string(),
    }
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};

    use super::*;
    use kubenest_contracts as wire;

    fn resync(reason: &str) -> Envelope {
        Envelope::new(wire::ResyncRequest {
            reason: reason.into(),
        })
    }

    #[tokio::test]
    async fn a_copy_of_a_waiting_command_joins_it_and_is_answered_with_it() {
        let queue = Queue::default();
        let answered = Arc::new(Mutex::new(Vec::new()));
        let reply = |tag: &'static str| -> Reply {
            let answered = Arc::clone(&answered);
            Box::new(move |_| answered.lock().unwrap().push(tag))
        };
        let (first, copy, other) = (resync("a"), resync("a"), resync("b"));
        let (first_id, copy_id) = (first.id, copy.id);
        queue.push(first, reply("first"));
        queue.push(other, reply("other"));
        queue.push(copy, reply("copy"));

        let joined = queue.pop().await.unwrap();
        let ids: Vec<uuid::Uuid> = joined.replies.iter().map(|(id, _)| *id).collect();
        assert_eq!(
            ids,
            [first_id, copy_id],
            "the copy waits with the first, in order"
        );
        for (_, reply) in joined.replies {
            reply(Message::from(wire::CommandAccepted {
                command_id: uuid::Uuid::nil(),
            }));
        }
        assert_eq!(*answered.lock().unwrap(), ["first", "copy"]);
        let next = queue.pop().await.unwrap();
        assert_eq!(
            next.replies.len(),
            1,
            "a different command queues on its own"
        );
        assert!(queue.pending.lock().unwrap().is_empty());
        queue.close();
        assert!(
            queue.pop().await.is_none(),
            "a closed, empty queue ends its worker"
        );
    }
}
