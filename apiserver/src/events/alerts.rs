//! The live stream's `alert` events: a cluster's or an App's alert (its progress deadline, its
//! deletion's, or its verification's automation stopped) opening or resolving, by the
//! rules the controllers open and resolve the alert rows with ([`kubenest_domain::alerts`]), so
//! the stream and `GET /api/v1/orgs/{org}/alerts` say the same.

use kubenest_crds::App;
use kubenest_crds::cluster::Cluster;
use kubenest_domain::alerts::{
    AlertKind, Signal, app_signal, cluster_signal, deletion_signal, open_after, verification_signal,
};
use serde_json::{Value, json};

/// Whether the cluster's alert is open after this version, given whether it was.
pub(super) fn cluster_alerting(was: bool, cluster: &Cluster) -> bool {
    open_after(was, &cluster_signal(cluster.status.as_ref()))
}

/// Whether the App's alert is open after this version, given whether it was.
pub(super) fn app_alerting(was: bool, app: &App) -> bool {
    open_after(was, &app_signal(app.status.as_ref()))
}

/// Whether the App's deletion alert is open after this version, given whether it was.
pub(super) fn deletion_alerting(was: bool, app: &App) -> bool {
    open_after(was, &deletion_signal(conditions(app)))
}

/// Whether the App's verification alert (its automation stopped) is open after this version.
pub(super) fn verification_alerting(was: bool, app: &App) -> bool {
    open_after(was, &verification_signal(app.status.as_ref()))
}

/// What the App's verification says, for the event's message.
pub(super) fn verification_message(app: &App) -> String {
    message(&verification_signal(app.status.as_ref()))
}

/// What the App's deletion past its deadline says, for the event's message.
pub(super) fn deletion_message(app: &App) -> String {
    message(&deletion_signal(conditions(app)))
}

fn conditions(app: &App) -> &[k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition] {
    app.status
        .as_ref()
        .map(|s| s.conditions.as_slice())
        .unwrap_or_default()
}

/// What the cluster's status says, for the event's message.
pub(super) fn cluster_message(cluster: &Cluster) -> String {
    message(&cluster_signal(cluster.status.as_ref()))
}

/// What the App's status says, for the event's message.
pub(super) fn app_message(app: &App) -> String {
    message(&app_signal(app.status.as_ref()))
}

fn message(signal: &Signal) -> String {
    match signal {
        Signal::Raise(message) | Signal::Clear(message) => message.clone(),
        Signal::Keep => String::new(),
    }
}

/// The payload of an `alert` event about `name` (a cluster or an App, by `kind`).
pub(super) fn payload(kind: AlertKind, open: bool, name: &str, message: &str) -> Value {
    let mut payload = json!({
        "alert": kind.as_str(),
        "state": if open { "open" } else { "resolved" },
        "severity": kind.severity(),
        "subject": kind.subject(),
        "message": message,
    });
    payload[kind.subject()] = name.into();
    payload
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_alert_event_names_its_subject_and_state() {
        assert_eq!(
            payload(AlertKind::HeartbeatMissed, true, "east", "no report"),
            json!({"alert": "heartbeat_missed", "state": "open", "severity": "critical",
                   "subject": "cluster", "cluster": "east", "message": "no report"})
        );
        assert_eq!(
            payload(AlertKind::ProgressDeadlineExceeded, false, "shop", "runs")["app"],
            "shop"
        );
    }
}
