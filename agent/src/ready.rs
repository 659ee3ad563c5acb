//! The `Ready` condition of the agent's own kinds, said from their phase, so `kubectl get`
//! (the Ready and Status columns) and kstatus readers (Flux, Argo CD) see them as they see any
//! other object.

use chrono::{DateTime, Utc};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use kubenest_crds::names::conditions::READY;

/// What `Ready` says: `True`, `False` or `Unknown` (still on its way), with why.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Readiness<'a> {
    pub status: &'a str,
    pub reason: &'a str,
    pub message: &'a str,
}

impl<'a> Readiness<'a> {
    /// Done: the object is what its spec asks for.
    pub fn done(reason: &'a str, message: &'a str) -> Self {
        Self {
            status: "True",
            reason,
            message,
        }
    }

    /// Failed, with why.
    pub fn failed(reason: &'a str, message: &'a str) -> Self {
        Self {
            status: "False",
            reason,
            message,
        }
    }

    /// On its way: nothing is known to be wrong yet.
    pub fn progressing(message: &'a str) -> Self {
        Self {
            status: "Unknown",
            reason: "Progressing",
            message,
        }
    }
}

/// `old` with `Ready` set to `ready` for `generation`. The transition time moves only when the
/// status flips, so a pass that finds nothing new writes nothing.
pub fn with_ready(
    old: &[Condition],
    ready: Readiness<'_>,
    generation: Option<i64>,
    now: DateTime<Utc>,
) -> Vec<Condition> {
    let mut conditions = old.to_vec();
    let previous = conditions.iter().position(|c| c.type_ == READY);
    let last_transition_time = previous
        .map(|i| &conditions[i])
        .filter(|c| c.status == ready.status)
        .map(|c| c.last_transition_time.clone())
        .unwrap_or_else(|| time(now));
    let condition = Condition {
        type_: READY.into(),
        status: ready.status.into(),
        reason: ready.reason.into(),
        // The API server refuses a condition message over 32768 bytes.
        message: ready.message.chars().take(4096).collect(),
        observed_generation: generation,
        last_transition_time,
    };
    match previous {
        Some(i) => conditions[i] = condition,
        None => conditions.push(condition),
    }
    conditions
}

fn time(now: DateTime<Utc>) -> Time {
    Time(k8s_openapi::jiff::Timestamp::from_second(now.timestamp()).unwrap_or_default())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_transition_time_moves_only_when_the_status_flips() {
        let start = DateTime::from_timestamp(1_700_000_000, 0).unwrap();
        let later = DateTime::from_timestamp(1_700_000_100, 0).unwrap();
        let first = with_ready(&[], Readiness::progressing("deploying"), Some(1), start);
        assert_eq!(first.len(), 1);
        assert_eq!(
            (first[0].status.as_str(), first[0].reason.as_str()),
            ("Unknown", "Progressing")
        );
        let again = with_ready(&first, Readiness::progressing("deploying"), Some(1), later);
        assert_eq!(again, first, "nothing new: nothing to write");
        let ready = with_ready(&again, Readiness::done("Running", "runs"), Some(2), later);
        assert_eq!(ready.len(), 1);
        assert_eq!(ready[0].observed_generation, Some(2));
        assert_eq!(ready[0].last_transition_time, time(later));
        let reworded = with_ready(&ready, Readiness::done("Running", "still"), Some(2), start);
        assert_eq!(reworded[0].last_transition_time, time(later));
    }
}
