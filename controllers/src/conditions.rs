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

/// Sets `Synced` from the drift the agent last reported (an App's or a standalone addon's):
/// `BlockedSync` while the cluster cannot converge, `DriftDetected` naming the fields another
/// manager changed (the agent applies them back), `InSync` otherwise.
pub fn synced(conditions: &mut Vec<Condition>, sync: &kubenest_crds::app::Sync, generation: i64) {
    let fields = || {
        let named: Vec<String> = sync
            .drift_details
            .iter()
            .take(3)
            .map(|d| {
                let by = d.manager.as_deref().map(|m| format!(", by {m}"));
                format!(
                    "{} {} (desired {}, observed {}{})",
                    d.resource,
                    d.field,
                    d.desired,
                    d.observed,
                    by.unwrap_or_default()
                )
            })
            .collect();
        let more = sync.drift_details.len().saturating_sub(named.len());
        let more = if more > 0 {
            format!(" and {more} more")
        } else {
            String::new()
        };
        format!("{}{more}", named.join("; "))
    };
    let (ok, reason, message) = match (sync.drift_detected, sync.drift_class.as_deref()) {
        (_, Some("blocked_sync")) => (
            false,
            "BlockedSync",
            format!(
                "the cluster cannot converge: {}; changes are refused until it clears",
                fields()
            ),
        ),
        (true, _) => (
            false,
            "DriftDetected",
            format!(
                "changed on the cluster: {}; the agent is re-applying them",
                fields()
            ),
        ),
        (false, _) => (
            true,
            "InSync",
            "the cluster matches the desired state".to_owned(),
        ),
    };
    set(conditions, SYNCED, ok, reason, message, Some(generation));
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

    #[test]
    fn synced_names_the_drifted_fields_and_who_changed_them() {
        use kubenest_crds::app::{DriftDetail, Sync};
        let detail = |n: u32| DriftDetail {
            resource: format!("Service/cache-{n}"),
            field: "spec.ports[0].port".into(),
            desired: "6379".into(),
            observed: "6380".into(),
            manager: Some("kubectl-edit".into()),
        };
        let mut conditions = Vec::new();
        let drifted = Sync {
            drift_detected: true,
            drift_class: Some("recoverable".into()),
            drift_details: (0..5).map(detail).collect(),
        };
        synced(&mut conditions, &drifted, 3);
        let condition = get(&conditions, SYNCED).unwrap();
        assert_eq!(
            (condition.status.as_str(), condition.reason.as_str()),
            ("False", "DriftDetected")
        );
        assert!(
            condition.message.starts_with(
                "changed on the cluster: Service/cache-0 spec.ports[0].port (desired 6379, \
                 observed 6380, by kubectl-edit); "
            ) && condition.message.contains("and 2 more"),
            "{}",
            condition.message
        );
        synced(&mut conditions, &Sync::default(), 3);
        let condition = get(&conditions, SYNCED).unwrap();
        assert_eq!(
            (condition.status.as_str(), condition.reason.as_str()),
            ("True", "InSync")
        );
    }
}
