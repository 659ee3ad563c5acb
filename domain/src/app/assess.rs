//! The assessment of an App's state: what the agent reported, what the controllers know of the
//! send and the deadline, weighed into a phase, a `Ready` condition and a deployment outcome.

/// How a deployment ended, once it has.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// The revision runs (or is paused) on the cluster.
    Succeeded,
    /// The revision was refused, failed on the cluster, or missed its progress deadline.
    Failed,
}

/// The outcome of weighing what the App wants against what is known of the cluster (pure).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Assessment {
    /// The App's phase: `Pending`, `Deploying`, `Running`, `Paused` or `Failed`.
    pub phase: &'static str,
    /// Whether the App is `Ready`.
    pub ready: bool,
    /// The `Ready` condition's reason.
    pub reason: String,
    /// The `Ready` condition's message.
    pub message: String,
    /// The deployment's final outcome, once there is one.
    pub outcome: Option<Outcome>,
}

/// What [`assess`] weighs.
#[derive(Debug, Clone, Default)]
pub struct Facts<'a> {
    /// The revision being rolled out.
    pub revision: &'a str,
    /// The agent reported this revision observed.
    pub observed: bool,
    /// The phase the agent reported.
    pub cluster_phase: Option<&'a str>,
    /// Why, when the agent said.
    pub cluster_message: Option<&'a str>,
    /// The agent accepted this revision (stored it durably).
    pub accepted: bool,
    /// The agent refused this revision: (reason, message).
    pub rejected: Option<String>,
    /// The progress deadline of this revision has passed.
    pub expired: bool,
    /// The App's progress deadline.
    pub deadline_seconds: u32,
    /// Why a send did not get through, or that it is on its way: (reason, message).
    pub waiting: Option<(&'a str, String)>,
}

/// Decides phase, readiness and outcome (pure).
pub fn assess(facts: &Facts<'_>) -> Assessment {
    let revision = facts.revision;
    let done = |phase, ready, reason: &str, message: String, outcome| Assessment {
        phase,
        ready,
        reason: reason.into(),
        message,
        outcome,
    };
    if let Some(rejection) = &facts.rejected {
        return done(
            "Failed",
            false,
            "Rejected",
            format!("the agent refused revision {revision}: {rejection}"),
            Some(Outcome::Failed),
        );
    }
    // Only a command the hub refuses as malformed can never be delivered: past the deadline,
    // that fails the revision. Any other delay is not the revision's failure.
    let undeliverable = matches!(&facts.waiting, Some(("InvalidCommand", _)));
    if facts.observed {
        // The cluster holds the revision: the agent judges its rollout, against a deadline that
        // runs from when it got it (a delivery delayed by an outage does not count).
        return match facts.cluster_phase {
            Some("Running") => done(
                "Running",
                true,
                "Running",
                format!("revision {revision} is running"),
                Some(Outcome::Succeeded),
            ),
            Some("Paused") => done(
                "Paused",
                false,
                "Paused",
                format!("revision {revision} is paused: workloads scaled to zero"),
                Some(Outcome::Succeeded),
            ),
            Some("Failed") => done(
                "Failed",
                false,
                "ComponentsFailed",
                match facts.cluster_message {
                    Some(why) => format!("revision {revision} failed on the cluster: {why}"),
                    None => format!("revision {revision} failed on the cluster; see components"),
                },
                Some(Outcome::Failed),
            ),
            _ => done(
                "Deploying",
                false,
                "RollingOut",
                format!(
                    "revision {revision} is applied; waiting for its components to become ready"
                ),
                None,
            ),
        };
    }
    let last = facts
        .waiting
        .as_ref()
        .map(|(reason, message)| format!(" (last: {reason}: {message})"))
        .unwrap_or_default();
    if facts.expired && undeliverable {
        return done(
            "Failed",
            false,
            "ProgressDeadlineExceeded",
            format!(
                "revision {revision} was not running within {}s{last}",
                facts.deadline_seconds
            ),
            Some(Outcome::Failed),
        );
    }
    if facts.expired {
        // Durable intent does not expire: the command is still derived and re-sent until the
        // cluster confirms this revision or a newer one supersedes it.
        let (phase, what) = if facts.accepted {
            (
                "Deploying",
                "was accepted by the agent but not reported applied",
            )
        } else {
            ("Pending", "was not delivered to the cluster")
        };
        return done(
            phase,
            false,
            "DeliveryDelayed",
            format!(
                "revision {revision} {what} within {}s{last}; it is sent again until the \
                 cluster confirms it",
                facts.deadline_seconds
            ),
            None,
        );
    }
    match &facts.waiting {
        Some((reason @ ("ClusterUnreachable" | "HubUnavailable" | "InvalidCommand"), message)) => {
            done("Pending", false, reason, message.clone(), None)
        }
        _ if facts.accepted => done(
            "Deploying",
            false,
            "AwaitingAgent",
            format!("revision {revision} was accepted by the agent; waiting for it to be applied"),
            None,
        ),
        Some((reason, message)) => done("Deploying", false, reason, message.clone(), None),
        None => done(
            "Pending",
            false,
            "AwaitingAgent",
            format!("revision {revision} is recorded; sending it to the cluster"),
            None,
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn facts(revision: &str) -> Facts<'_> {
        Facts {
            revision,
            deadline_seconds: 600,
            ..Facts::default()
        }
    }

    #[test]
    fn an_unreachable_cluster_is_pending_with_the_reason() {
        let mut f = facts("r1");
        f.waiting = Some(("ClusterUnreachable", "no session".into()));
        let a = assess(&f);
        assert_eq!(
            (a.phase, a.reason.as_str()),
            ("Pending", "ClusterUnreachable")
        );
        assert_eq!(a.outcome, None);
    }

    #[test]
    fn a_routed_command_is_deploying_until_the_agent_reports_running() {
        let mut f = facts("r1");
        f.waiting = Some(("AwaitingAgent", "sent".into()));
        assert_eq!(assess(&f).phase, "Deploying");
        f.accepted = true;
        f.waiting = None;
        assert_eq!(assess(&f).reason, "AwaitingAgent");
        f.observed = true;
        f.cluster_phase = Some("Deploying");
        assert_eq!(assess(&f).reason, "RollingOut");
        f.cluster_phase = Some("Running");
        let a = assess(&f);
        assert_eq!((a.phase, a.ready), ("Running", true));
        assert_eq!(a.outcome, Some(Outcome::Succeeded));
    }

    #[test]
    fn a_deadline_passed_before_delivery_names_the_delay_and_is_not_final() {
        let mut f = facts("r1");
        f.expired = true;
        f.waiting = Some(("ClusterUnreachable", "no session".into()));
        let a = assess(&f);
        assert_eq!((a.phase, a.reason.as_str()), ("Pending", "DeliveryDelayed"));
        assert_eq!(a.outcome, None, "the revision is still on its way");
        assert!(a.message.contains("ClusterUnreachable"), "{}", a.message);
        f.accepted = true;
        f.waiting = None;
        let a = assess(&f);
        assert_eq!(
            (a.phase, a.reason.as_str()),
            ("Deploying", "DeliveryDelayed")
        );
        assert_eq!(a.outcome, None);
        f.observed = true;
        f.cluster_phase = Some("Running");
        assert_eq!(assess(&f).outcome, Some(Outcome::Succeeded));
    }

    #[test]
    fn the_agent_judges_an_observed_rollout_and_only_an_invalid_command_expires() {
        let mut f = facts("r1");
        f.observed = true;
        f.expired = true;
        f.cluster_phase = Some("Deploying");
        let a = assess(&f);
        assert_eq!((a.phase, a.outcome), ("Deploying", None));
        f.cluster_phase = Some("Failed");
        assert_eq!(assess(&f).outcome, Some(Outcome::Failed));
        let mut f = facts("r1");
        f.expired = true;
        f.waiting = Some(("InvalidCommand", "frame too large".into()));
        let a = assess(&f);
        assert_eq!(
            (a.phase, a.reason.as_str()),
            ("Failed", "ProgressDeadlineExceeded")
        );
        assert_eq!(a.outcome, Some(Outcome::Failed));
    }

    #[test]
    fn a_rejection_fails_the_revision_with_the_agents_reason() {
        let mut f = facts("r1");
        f.rejected = Some("namespace_violation: outside its project (field /namespace)".into());
        let a = assess(&f);
        assert_eq!((a.phase, a.reason.as_str()), ("Failed", "Rejected"));
        assert!(a.message.contains("field /namespace"));
        assert_eq!(a.outcome, Some(Outcome::Failed));
    }

    #[test]
    fn a_failure_the_agent_explains_carries_its_reason() {
        let mut f = facts("r1");
        f.observed = true;
        f.cluster_phase = Some("Failed");
        assert!(assess(&f).message.ends_with("see components"));
        f.cluster_message = Some("NamespaceViolation: namespace shop belongs to another project");
        let a = assess(&f);
        assert_eq!((a.phase, a.reason.as_str()), ("Failed", "ComponentsFailed"));
        assert!(
            a.message.contains("belongs to another project"),
            "{}",
            a.message
        );
    }
}
