//! A deletion past its deadline (pure). A deletion keeps its object until the cluster confirms
//! that what it ran is gone; when that does not happen within the object's progress deadline,
//! the controllers mark the object `Failed`, with `Ready=False` of reason
//! [`DELETION_DEADLINE_EXCEEDED`] saying what is still on the cluster and how to remove the
//! object by force, while `DeletionBlocked` goes on saying what the deletion waits for. The
//! deletion goes on being retried. The alerts and the API server's
//! forced removal read that condition through [`overdue`].

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
pub use kubenest_crds::names::conditions::DELETION_DEADLINE_EXCEEDED;
use kubenest_crds::names::conditions::READY;

/// The condition saying a deletion failed its deadline, if `conditions` hold one.
pub fn overdue(conditions: &[Condition]) -> Option<&Condition> {
    conditions
        .iter()
        .find(|c| c.type_ == READY && c.status == "False" && c.reason == DELETION_DEADLINE_EXCEEDED)
}

/// What a deletion past its deadline says: how long it had, what is still there, that it goes
/// on, and the way out (`force`, e.g. `kubenest apps delete shop --force`).
pub fn failed_message(seconds: u32, remaining: &str, force: &str) -> String {
    format!(
        "the deletion did not finish within {seconds}s: {remaining}. It is still retried; to \
         remove it from kubenest now and leave that on the cluster, an admin deletes it with \
         ?force=true ({force})"
    )
}

#[cfg(test)]
mod tests {
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

    use super::*;

    fn condition(type_: &str, status: &str, reason: &str) -> Condition {
        Condition {
            type_: type_.into(),
            status: status.into(),
            reason: reason.into(),
            message: "m".into(),
            observed_generation: None,
            last_transition_time: Time(k8s_openapi::jiff::Timestamp::UNIX_EPOCH),
        }
    }

    #[test]
    fn only_ready_false_of_the_deletion_deadline_reason_is_overdue() {
        let overdue_one = condition(READY, "False", DELETION_DEADLINE_EXCEEDED);
        assert!(overdue(std::slice::from_ref(&overdue_one)).is_some());
        for other in [
            condition(READY, "False", "ProgressDeadlineExceeded"),
            condition(READY, "True", DELETION_DEADLINE_EXCEEDED),
            condition("DeletionBlocked", "False", DELETION_DEADLINE_EXCEEDED),
        ] {
            assert!(overdue(&[other]).is_none());
        }
    }

    #[test]
    fn the_message_says_what_remains_that_it_goes_on_and_the_way_out() {
        let message = failed_message(
            30,
            "still on cluster east: Deployment/web (finalizers: example.test/hold)",
            "kubenest apps delete web --force",
        );
        assert!(message.contains("within 30s"), "{message}");
        assert!(message.contains("example.test/hold"), "{message}");
        assert!(message.contains("still retried"), "{message}");
        assert!(message.contains("--force"), "{message}");
    }
}
