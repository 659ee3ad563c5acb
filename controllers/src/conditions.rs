//! Kubernetes-style conditions: set one by type, keeping its transition time while its status
//! does not change, so `kubectl describe` shows when something really changed.

pub use kubenest_crds::names::conditions::*;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};

/// Sets the condition of `type_`; returns whether anything changed.
pub fn set(
    conditions: &mut Vec<Condition>,
    type_: &str,
    status: bool,
    reason: &str,
    message: impl Into<String>,
    generation: Option<i64>,
) -> bool {
    let status = if status { "True" } else { "False" };
    set_status(conditions, type_, status, reason, message, generation)
}

/// Sets the condition of `type_` to `status` (`True`, `False` or `Unknown`); returns whether
/// anything changed.
pub fn set_status(
    conditions: &mut Vec<Condition>,
    type_: &str,
    status: &str,
    reason: &str,
    message: impl Into<String>,
    generation: Option<i64>,
) -> bool {
    let message = message.into();
    if let Some(existing) = conditions.iter_mut().find(|c| c.type_ == type_) {
        let same = existing.status == status
            && existing.reason == reason
            && existing.message == message
            && existing.observed_generation == generation;
        if same {
            return false;
        }
        if existing.status != status {
            existing.last_transition_time = now();
        }
        existing.status = status.into();
        existing.reason = reason.into();
        existing.message = message;
        existing.observed_generation = generation;
        return true;
    }
    conditions.push(Condition {
        type_: type_.into(),
        status: status.into(),
        reason: reason.into(),
        message,
        observed_generation: generation,
        last_transition_time: now(),
    });
    true
}

/// Removes the condition of `type_`; returns whether it was there.
pub fn remove(conditions: &mut Vec<Condition>, type_: &str) -> bool {
    let before = conditions.len();
    conditions.retain(|c| c.type_ != type_);
    conditions.len() != before
}

/// The condition of `type_`, if set.
pub fn get<'a>(conditions: &'a [Condition], type_: &str) -> Option<&'a Condition> {
    conditions.iter().find(|c| c.type_ == type_)
}

fn now() -> Time {
    Time(k8s_openapi::jiff::Timestamp::now())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn transition_time_moves_only_when_the_status_flips() {
        let mut conditions = Vec::new();
        assert!(set(&mut conditions, READY, false, "Waiting", "a", Some(1)));
        let first = conditions[0].last_transition_time.clone();
        assert!(!set(&mut conditions, READY, false, "Waiting", "a", Some(1)));
        assert!(set(&mut conditions, READY, false, "Other", "b", Some(1)));
        assert_eq!(conditions[0].last_transition_time, first);
        assert!(set(&mut conditions, READY, true, "Running", "", Some(1)));
        assert_eq!(conditions.len(), 1);
        assert_eq!(conditions[0].status, "True");
        assert!(remove(&mut conditions, READY));
        assert!(conditions.is_empty());
    }
}
