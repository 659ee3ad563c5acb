//! The readers of log streams on this API server, by subscription id: the hub's `log.lines`
//! and `log.end` frames for a subscription go to its reader's bounded queue and nowhere else.
//! A reader whose queue is full is cut (its stream ends with reason `limit`) rather than
//! buffered for without limit; nothing is kept for a reader that is gone.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use kubenest_contracts::{LogEnd, LogEndReason, LogLine, LogLines};
use tokio::sync::mpsc;

/// Frames a reader may have waiting before it counts as too slow.
pub const READER_QUEUE: usize = 64;

/// What a reader gets.
#[derive(Debug)]
pub enum Frame {
    Lines(Vec<LogLine>),
    End(LogEnd),
}

#[derive(Debug)]
struct Reader {
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

    /// Registers a reader for `id` (before the subscribe is sent, so no line falls between).
    pub fn open(&self, id: &str) -> Subscription {
        let (tx, rx) = mpsc::channel(READER_QUEUE);
        let end = Arc::new(Mutex::new(None));
        self.lock().insert(
            id.to_owned(),
            Reader {
                tx,
                end: end.clone(),
            },
        );
        crate::metrics::log_readers(self.len());
        Subscription { rx, end }
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
        let mut sub = subscribers.open("s1");
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
    fn frames_of_other_subscriptions_never_reach_a_reader() {
        let subscribers = Subscribers::default();
        let mut sub = subscribers.open("mine");
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
