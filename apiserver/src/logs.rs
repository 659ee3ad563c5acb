//! The readers of log streams on this API server, by subscription id: the hub's `log.lines`
//! and `log.end` frames for a subscription go to its reader's bounded queue and nowhere else.
//! A reader whose queue is full is cut (its stream ends with reason `limit`) rather than
//! buffered for without limit; nothing is kept for a reader that is gone.
//!
//! Streams are shared fairly: one user reads at most [`MAX_STREAMS_PER_USER`] streams at once
//! here, and this API server reads at most [`MAX_STREAMS_PER_CLUSTER`] of one cluster's, so no
//! reader can take all of an agent's streams ([`MAX_STREAMS_PER_CLUSTER`] is half of what an
//! agent serves, leaving room for another API server replica).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use kubenest_contracts::{LogEnd, LogEndReason, LogLine, LogLines};
use tokio::sync::mpsc;

/// Frames a reader may have waiting before it counts as too slow.
pub const READER_QUEUE: usize = 64;

/// Log streams one user may read at once on one API server.
pub const MAX_STREAMS_PER_USER: usize = 8;

/// Log streams of one cluster one API server reads at once (an agent serves 64).
pub const MAX_STREAMS_PER_CLUSTER: usize = 32;

/// Why a reader was not registered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Full {
    /// The user reads [`MAX_STREAMS_PER_USER`] streams already.
    User,
    /// This API server reads [`MAX_STREAMS_PER_CLUSTER`] of the cluster's streams already.
    Cluster,
}

/// What a reader gets.
#[derive(Debug)]
pub enum Frame {
    Lines(Vec<LogLine>),
    End(LogEnd),
}

#[derive(Debug)]
struct Reader {
    /// The user id reading and the cluster read, for the fair-share caps.
    user: String,
    cluster: String,
    tx: mpsc::Sender<Frame>,
    /// Why the stream ended when the queue had no room to say it.
    end: Arc<Mutex<Option<LogEnd>>>,
}

/// The live readers; cheap to clone.
#[derive(Debug, Clone, Default)]
pub struct Subscribers {
    readers: Arc<Mutex<HashMap<String, Reader>>>,
}

/// A reader's end of its subscription.
#[derive(Debug)]
pub struct Subscription {
    pub rx: mpsc::Receiver<Frame>,
    /// Why the stream ended, when it was cut without a final frame.
    pub end: Arc<Mutex<Option<LogEnd>>>,
}

impl Subscription {
    /// The reason the stream was cut, if it was.
    pub fn cut_reason(&self) -> Option<LogEnd> {
        self.end.lock().unwrap_or_else(|e| e.into_inner()).take()
    }
}

impl Subscribers {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Reader>> {
        self.readers.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Registers a reader for `id` (before the subscribe is sent, so no line falls between),
    /// read by user `user` from cluster `cluster`, unless either is at its cap.
    pub fn open(&self, id: &str, user: &str, cluster: &str) -> Result<Subscription, Full> {
        let (tx, rx) = mpsc::channel(READER_QUEUE);
        let end = Arc::new(Mutex::new(None));
        let mut readers = self.lock();
        if readers.values().filter(|r| r.user == user).count() >= MAX_STREAMS_PER_USER {
            return Err(Full::User);
        }
        if readers.values().filter(|r| r.cluster == cluster).count() >= MAX_STREAMS_PER_CLUSTER {
            return Err(Full::Cluster);
        }
        readers.insert(
            id.to_owned(),
            Reader {
                user: user.to_owned(),
                cluster: cluster.to_owned(),
                tx,
                end: end.clone(),
            },
        );
        crate::metrics::log_readers(readers.len());
        Ok(Subscription { rx, end })
    }

    /// Forgets the reader of `id`.
    pub fn close(&self, id: &str) {
        self.lock().remove(id);
        crate::metrics::log_readers(self.len());
    }

    /// Readers registered now.
    pub fn len(&self) -> usize {
        self.lock().len()
    }

    /// Whether no reader is registered.
    pub fn is_empty(&self) -> bool {
        self.lock().is_empty()
    }

    /// Hands lines to their reader; a reader with a full queue is cut.
    pub fn lines(&self, frame: LogLines) {
        let id = frame.subscription_id.as_str().to_owned();
        let mut readers = self.lock();
        let Some(reader) = readers.get(&id) else {
            return;
        };
        if reader.tx.try_send(Frame::Lines(frame.lines)).is_err() {
            *reader.end.lock().unwrap_or_else(|e| e.into_inner()) = Some(LogEnd {
                subscription_id: frame.subscription_id,
                reason: LogEndReason::Limit,
                message: "the reader did not keep up; the stream was cut".into(),
            });
            readers.remove(&id);
            crate::metrics::log_readers(readers.len());
        }
    }

    /// Ends a reader's stream with the agent's reason.
    pub fn end(&self, end: LogEnd) {
        let Some(reader) = self.lock().remove(end.subscription_id.as_str()) else {
            return;
        };
        crate::metrics::log_readers(self.len());
        if let Err(mpsc::error::TrySendError::Full(Frame::End(end))) =
            reader.tx.try_send(Frame::End(end))
        {
            *reader.end.lock().unwrap_or_else(|e| e.into_inner()) = Some(end);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kubenest_contracts::Id;

    fn lines(id: &str) -> LogLines {
        LogLines {
            subscription_id: Id::new(id),
            lines: vec![LogLine {
                timestamp: chrono::Utc::now(),
                pod: "p".into(),
                container: "c".into(),
                line: "x".into(),
            }],
        }
    }

    #[test]
    fn a_reader_that_does_not_keep_up_is_cut_with_reason_limit() {
        let subscribers = Subscribers::default();
        let mut sub = subscribers.open("s1", "u1", "c1").unwrap();
        for _ in 0..READER_QUEUE + 5 {
            subscribers.lines(lines("s1"));
        }
        assert_eq!(subscribers.len(), 0);
        let mut received = 0;
        while sub.rx.try_recv().is_ok() {
            received += 1;
        }
        assert_eq!(received, READER_QUEUE);
        assert_eq!(
            sub.cut_reason().map(|e| e.reason),
            Some(LogEndReason::Limit)
        );
    }

    #[test]
    fn one_user_cannot_take_every_stream_and_one_cluster_keeps_room_for_others() {
        let subscribers = Subscribers::default();
        let mut held = Vec::new();
        for i in 0..MAX_STREAMS_PER_USER {
            held.push(subscribers.open(&format!("a{i}"), "greedy", "c1").unwrap());
        }
        assert_eq!(
            subscribers.open("a-more", "greedy", "c1").err(),
            Some(Full::User)
        );
        // Another user still reads, until the cluster's share is taken.
        let mut user = 0;
        while subscribers.len() < MAX_STREAMS_PER_CLUSTER {
            user += 1;
            held.push(
                subscribers
                    .open(&format!("b{user}"), &format!("u{}", user / 4), "c1")
                    .unwrap(),
            );
        }
        assert_eq!(
            subscribers.open("c-more", "late", "c1").err(),
            Some(Full::Cluster)
        );
        assert!(subscribers.open("d", "late", "c2").is_ok());
        // A stream that ends gives its place back.
        subscribers.close("a0");
        assert!(subscribers.open("a-again", "greedy", "c2").is_ok());
    }

    #[test]
    fn frames_of_other_subscriptions_never_reach_a_reader() {
        let subscribers = Subscribers::default();
        let mut sub = subscribers.open("mine", "u1", "c1").unwrap();
        subscribers.lines(lines("theirs"));
        assert!(sub.rx.try_recv().is_err());
        subscribers.end(LogEnd {
            subscription_id: Id::new("mine"),
            reason: LogEndReason::PodEnded,
            message: String::new(),
        });
        assert!(matches!(sub.rx.try_recv(), Ok(Frame::End(_))));
        assert!(subscribers.is_empty());
    }
}
