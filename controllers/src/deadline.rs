//! Progress deadlines of standalone addons and Projects (pure): the clock a change's deadline
//! runs on, and what a passed deadline means.
//!
//! A change is first waited for at the door of its cluster: until the cluster holds it, the
//! deadline runs from when the change was first seen, and passing it only names the delay
//! (`DeliveryDelayed`): the command is still sent until the cluster confirms it or a newer
//! change supersedes it. Once the cluster holds it, the deadline of its rollout runs from that
//! moment, and passing it fails the change (`ProgressDeadlineExceeded`).

use chrono::{DateTime, Utc};
use kubenest_crds::common::ProgressClock;

use crate::rfc3339;

/// Where a change stands against its deadline.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Deadline {
    /// The clock to keep in the status.
    pub clock: ProgressClock,
    /// The cluster holds the change.
    pub delivered: bool,
    /// The deadline (of delivery, or of the rollout once delivered) has passed.
    pub expired: bool,
    /// When it passes (or passed).
    pub at: DateTime<Utc>,
}

fn parse(time: &str) -> Option<DateTime<Utc>> {
    DateTime::parse_from_rfc3339(time)
        .ok()
        .map(|t| t.with_timezone(&Utc))
}

/// The deadline of `change` at `now`, from the clock kept so far (`old`; restarted for another
/// change) and whether the cluster holds the change now.
pub fn judge(
    old: Option<&ProgressClock>,
    change: i64,
    delivered: bool,
    seconds: u32,
    now: DateTime<Utc>,
) -> Deadline {
    let mut clock = match old {
        Some(clock) if clock.change == change => clock.clone(),
        _ => ProgressClock {
            change,
            started_at: rfc3339(now),
            delivered_at: None,
        },
    };
    if delivered && clock.delivered_at.is_none() {
        clock.delivered_at = Some(rfc3339(now));
    }
    let from = clock
        .delivered_at
        .as_deref()
        .or(Some(clock.started_at.as_str()))
        .and_then(parse)
        .unwrap_or(now);
    let at = from + chrono::Duration::seconds(i64::from(seconds));
    Deadline {
        clock,
        delivered,
        expired: now > at,
        at,
    }
}

/// The deadline of a deletion asked at `asked` (the object's `deletionTimestamp`; `now` if it
/// has none) for an object whose changes may take `seconds`: whether it has passed, and when
/// it passes (or passed).
pub fn deletion(
    asked: Option<DateTime<Utc>>,
    seconds: u32,
    now: DateTime<Utc>,
) -> (bool, DateTime<Utc>) {
    let at = asked.unwrap_or(now) + chrono::Duration::seconds(i64::from(seconds));
    (now > at, at)
}

/// `next`, or sooner if a deadline at `at` passes before it: a deadline is judged when it
/// passes, not at the next retry of a backoff.
pub fn sooner(
    next: std::time::Duration,
    at: DateTime<Utc>,
    now: DateTime<Utc>,
) -> std::time::Duration {
    match (at - now).to_std() {
        Ok(left) => next.min(left + std::time::Duration::from_secs(1)),
        Err(_) => next,
    }
}

impl Deadline {
    /// Condition reason and message for a change whose deadline passed, or `None` while it has
    /// not; `what` names the change, `last` what it last waited for.
    pub fn passed(&self, what: &str, seconds: u32, last: &str) -> Option<(&'static str, String)> {
        if !self.expired {
            return None;
        }
        Some(if self.delivered {
            (
                "ProgressDeadlineExceeded",
                format!("{what} was not ready within {seconds}s of reaching the cluster: {last}"),
            )
        } else {
            (
                "DeliveryDelayed",
                format!(
                    "{what} has not reached the cluster within {seconds}s ({last}); it is sent \
                     again until the cluster confirms it"
                ),
            )
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(seconds: i64) -> DateTime<Utc> {
        DateTime::from_timestamp(1_800_000_000 + seconds, 0).unwrap()
    }

    #[test]
    fn the_clock_starts_with_a_change_and_restarts_at_delivery() {
        let first = judge(None, 3, false, 10, at(0));
        assert_eq!(first.clock.started_at, rfc3339(at(0)));
        assert!(!first.expired);
        let late = judge(Some(&first.clock), 3, false, 10, at(11));
        assert!(late.expired && !late.delivered);
        let (reason, message) = late.passed("revision 3", 10, "no session").unwrap();
        assert_eq!(reason, "DeliveryDelayed");
        assert!(message.contains("no session"), "{message}");
        // Delivered late: the rollout gets its own deadline from now.
        let delivered = judge(Some(&late.clock), 3, true, 10, at(30));
        assert!(!delivered.expired);
        assert_eq!(delivered.clock.delivered_at, Some(rfc3339(at(30))));
        assert_eq!(delivered.at, at(40));
        let stuck = judge(Some(&delivered.clock), 3, true, 10, at(41));
        assert_eq!(
            stuck.passed("revision 3", 10, "0/1 ready").unwrap().0,
            "ProgressDeadlineExceeded"
        );
        let second = std::time::Duration::from_secs(1);
        assert_eq!(sooner(30 * second, at(40), at(35)), 6 * second);
        assert_eq!(sooner(3 * second, at(40), at(35)), 3 * second);
        assert_eq!(sooner(30 * second, at(40), at(45)), 30 * second);
        let next = judge(Some(&stuck.clock), 4, false, 10, at(42));
        assert_eq!((next.clock.change, next.expired), (4, false));
        assert_eq!(next.clock.delivered_at, None);
    }

    #[test]
    fn a_deletion_is_overdue_once_its_progress_deadline_has_passed_since_it_was_asked() {
        let asked = Utc::now() - chrono::Duration::seconds(20);
        let (overdue, at) = deletion(Some(asked), 30, Utc::now());
        assert!(!overdue);
        assert_eq!(at, asked + chrono::Duration::seconds(30));
        assert!(deletion(Some(asked), 10, Utc::now()).0);
        // Not asked yet (no timestamp seen): the clock starts now.
        assert!(!deletion(None, 10, Utc::now()).0);
    }
}
