//! Fleet health: heartbeats make a cluster `connected` with fresh capacity and checks; a cluster
//! that stops reporting is not shown as healthy from stale data — once the report window passes,
//! every check turns `unknown` and a critical `HeartbeatMissed` condition is raised.

use std::sync::Arc;

use chrono::{DateTime, Utc};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use kube::ResourceExt;
use kube::api::{Api, ListParams};
use kubenest_contracts::Heartbeat;
use kubenest_crds::cluster::{
    Capacity, CheckStatus, Cluster, ClusterState, ClusterStatus, HealthCheck,
};

use kubenest_crds::observed::ClusterHealth;

use crate::conditions::{self, AGENT_REPORTING, CLUSTER_UNREACHABLE, READY};
use crate::patch::merge_status;
use crate::rfc3339;
use kubenest_crds::names::reasons;
use kubenest_runtime::events::{Event, EventSink, EventType, event};

/// Share of CPU or memory requested above which capacity is a warning.
const CAPACITY_WARNING: f64 = 0.9;

fn now_time() -> Time {
    Time(k8s_openapi::jiff::Timestamp::now())
}

/// Folds a heartbeat into the status (pure).
pub fn apply_heartbeat(status: &mut ClusterStatus, heartbeat: &Heartbeat) {
    let observed = rfc3339(heartbeat.observed_at);
    status.state = ClusterState::Connected;
    status.last_heartbeat = Some(observed.clone());
    status.capacity = Some(Capacity {
        node_count: heartbeat.node_count,
        cpu_total_millis: heartbeat.cpu_allocatable_millis,
        cpu_used_millis: heartbeat.cpu_requested_millis,
        mem_total_bytes: heartbeat.memory_allocatable_bytes,
        mem_used_bytes: heartbeat.memory_requested_bytes,
    });
    let share = |used: u64, total: u64| {
        if total == 0 {
            1.0
        } else {
            used as f64 / total as f64
        }
    };
    let busiest = share(
        heartbeat.cpu_requested_millis,
        heartbeat.cpu_allocatable_millis,
    )
    .max(share(
        heartbeat.memory_requested_bytes,
        heartbeat.memory_allocatable_bytes,
    ));
    let (capacity_status, capacity_message) = match (heartbeat.node_count, busiest) {
        (0, _) => (CheckStatus::Critical, "no schedulable nodes".to_owned()),
        (_, b) if b >= CAPACITY_WARNING => (
            CheckStatus::Warning,
            format!("{:.0}% of capacity requested", b * 100.0),
        ),
        (_, b) => (
            CheckStatus::Ok,
            format!("{:.0}% of capacity requested", b * 100.0),
        ),
    };
    status.health = vec![
        HealthCheck {
            name: "heartbeat".into(),
            status: CheckStatus::Ok,
            message: "agent reporting".into(),
            observed_at: observed.clone(),
        },
        HealthCheck {
            name: "capacity".into(),
            status: capacity_status,
            message: capacity_message,
            observed_at: observed,
        },
    ];
    status
        .conditions
        .retain(|c| c.type_ != crate::conditions::HEARTBEAT_MISSED);
    conditions::set(
        &mut status.conditions,
        READY,
        true,
        AGENT_REPORTING,
        "the agent reports within its heartbeat window",
        None,
    );
}

/// Marks a silent cluster (pure): returns whether the status changed. Past the window nothing
/// is known any more: every check turns `unknown`, a critical `HeartbeatMissed` is raised, the
/// state is `disconnected` and `Ready` is `Unknown` (reason `ClusterUnreachable`), which the
/// cluster's Apps and Projects then show too ([`crate::reach`]).
pub fn evaluate(status: &mut ClusterStatus, now: DateTime<Utc>, window: chrono::Duration) -> bool {
    let Some(last) = status
        .last_heartbeat
        .as_deref()
        .and_then(|t| DateTime::parse_from_rfc3339(t).ok())
    else {
        return false; // never reported: the state (pending) already says so
    };
    if now.signed_duration_since(last) <= window {
        return false;
    }
    let before = status.clone();
    let message = format!("no report since {last}; the cluster's health is unknown");
    let raised = status
        .conditions
        .iter()
        .any(|c| c.type_ == crate::conditions::HEARTBEAT_MISSED && c.message == message);
    if !raised {
        for check in &mut status.health {
            check.status = CheckStatus::Unknown;
            check.message = format!("no report since {last}");
        }
        status
            .conditions
            .retain(|c| c.type_ != crate::conditions::HEARTBEAT_MISSED);
        status.conditions.push(Condition {
            type_: crate::conditions::HEARTBEAT_MISSED.into(),
            status: "True".into(),
            reason: "Critical".into(),
            message,
            observed_generation: None,
            last_transition_time: now_time(),
        });
    }
    status.state = ClusterState::Disconnected;
    conditions::set_status(
        &mut status.conditions,
        READY,
        "Unknown",
        CLUSTER_UNREACHABLE,
        format!(
            "the agent has not reported since {last} (window {}s): what the cluster shows is \
             its last observation",
            window.num_seconds()
        ),
        None,
    );
    *status != before
}

async fn clusters(client: &kube::Client) -> Result<Vec<Cluster>, kube::Error> {
    Ok(Api::<Cluster>::all(client.clone())
        .list(&ListParams::default())
        .await?
        .items)
}

async fn write(
    client: &kube::Client,
    events: &EventSink,
    cluster: &Cluster,
    status: &ClusterStatus,
) -> Result<(), kube::Error> {
    let Some(namespace) = cluster.namespace() else {
        return Ok(());
    };
    // Only fleet health's fields: the Cluster controller writes the token fields concurrently.
    let health = ClusterHealth {
        state: status.state,
        last_heartbeat: status.last_heartbeat.clone(),
        capacity: status.capacity.clone(),
        health: status.health.clone(),
        conditions: status.conditions.clone(),
    };
    let api = Api::<Cluster>::namespaced(client.clone(), &namespace);
    merge_status(&api, &cluster.name_any(), &health).await?;
    let old = cluster.status.clone().unwrap_or_default();
    events.emit(cluster, cluster_events(&old, status));
    Ok(())
}

/// What a health write from `old` to `new` tells: the agent connecting or going away, and the
/// conditions turning (`AgentReporting`, `ClusterUnreachable`, `HeartbeatMissed`).
pub fn cluster_events(old: &ClusterStatus, new: &ClusterStatus) -> Vec<Event> {
    let mut events = Vec::new();
    if old.state != new.state {
        let (type_, reason, note) = match new.state {
            ClusterState::Connected => (
                EventType::Normal,
                reasons::CLUSTER_CONNECTED,
                "the agent is connected and reporting",
            ),
            ClusterState::Disconnected => (
                EventType::Warning,
                reasons::CLUSTER_DISCONNECTED,
                "the agent's hub session is gone or silent",
            ),
            _ => return crate::events::condition_list(&old.conditions, &new.conditions),
        };
        events.push(event(type_, reason, note.into(), "Connect"));
    }
    events.extend(crate::events::condition_list(
        &old.conditions,
        &new.conditions,
    ));
    events
}

/// Records a heartbeat of the cluster whose id (uid) is `cluster_id`. Returns false when no such
/// cluster exists (a deleted cluster's agent may still be talking).
pub async fn record_heartbeat(
    client: &kube::Client,
    cluster_id: &str,
    heartbeat: &Heartbeat,
) -> Result<bool, kube::Error> {
    let found = clusters(client)
        .await?
        .into_iter()
        .find(|c| c.uid().as_deref() == Some(cluster_id));
    let Some(cluster) = found else {
        return Ok(false);
    };
    record_heartbeat_of(client, &EventSink::disabled(), &cluster, heartbeat).await?;
    Ok(true)
}

/// Records a heartbeat of `cluster`.
pub async fn record_heartbeat_of(
    client: &kube::Client,
    events: &EventSink,
    cluster: &Cluster,
    heartbeat: &Heartbeat,
) -> Result<(), kube::Error> {
    let mut status = cluster.status.clone().unwrap_or_default();
    apply_heartbeat(&mut status, heartbeat);
    write(client, events, cluster, &status).await
}

/// Marks every cluster silent for longer than `window` (run periodically).
pub async fn sweep(
    client: &kube::Client,
    now: DateTime<Utc>,
    window: chrono::Duration,
) -> Result<usize, kube::Error> {
    let clusters: Vec<Arc<Cluster>> = clusters(client).await?.into_iter().map(Arc::new).collect();
    sweep_clusters(client, &EventSink::disabled(), &clusters, now, window).await
}

/// [`sweep`] over clusters the caller already has (e.g. from a cache).
pub async fn sweep_clusters(
    client: &kube::Client,
    events: &EventSink,
    clusters: &[Arc<Cluster>],
    now: DateTime<Utc>,
    window: chrono::Duration,
) -> Result<usize, kube::Error> {
    let mut marked = 0;
    for cluster in clusters {
        let mut status = cluster.status.clone().unwrap_or_default();
        if evaluate(&mut status, now, window) {
            write(client, events, cluster, &status).await?;
            marked += 1;
        }
    }
    Ok(marked)
}

/// How long after its last heartbeat a connected cluster without a hub session is still
/// given for the session to show (the Lease and the first heartbeat race at connect).
const SESSION_GRACE: chrono::Duration = chrono::Duration::seconds(5);

/// Marks a connected cluster whose hub session is gone as disconnected (pure): returns whether
/// the status changed.
pub fn session_lost(status: &mut ClusterStatus, has_session: bool, now: DateTime<Utc>) -> bool {
    if has_session || status.state != ClusterState::Connected {
        return false;
    }
    let recent = status
        .last_heartbeat
        .as_deref()
        .and_then(|t| DateTime::parse_from_rfc3339(t).ok())
        .is_some_and(|last| now.signed_duration_since(last) < SESSION_GRACE);
    if recent {
        return false;
    }
    status.state = ClusterState::Disconnected;
    true
}

/// Whether a hub session Lease is live at `now`.
pub fn lease_live(lease: &k8s_openapi::api::coordination::v1::Lease, now: DateTime<Utc>) -> bool {
    let Some(spec) = lease.spec.as_ref() else {
        return false;
    };
    let (Some(renewed), Some(seconds)) = (spec.renew_time.as_ref(), spec.lease_duration_seconds)
    else {
        return false;
    };
    let Ok(renewed) = DateTime::parse_from_rfc3339(&renewed.0.to_string()) else {
        return false;
    };
    now.signed_duration_since(renewed) <= chrono::Duration::seconds(i64::from(seconds))
}

/// Marks every connected cluster whose session Lease (in `sessions`) is gone or expired as
/// disconnected. Returns how many changed.
pub async fn sweep_sessions(
    client: &kube::Client,
    events: &EventSink,
    clusters: &[Arc<Cluster>],
    sessions: &Api<k8s_openapi::api::coordination::v1::Lease>,
    now: DateTime<Utc>,
) -> Result<usize, kube::Error> {
    let live: std::collections::HashSet<String> = sessions
        .list(&ListParams::default())
        .await?
        .items
        .into_iter()
        .filter(|l| lease_live(l, now))
        .filter_map(|l| {
            l.metadata
                .name?
                .strip_prefix(kubenest_contracts::names::lease::NAME_PREFIX)
                .map(str::to_owned)
        })
        .collect();
    let mut marked = 0;
    for cluster in clusters {
        let mut status = cluster.status.clone().unwrap_or_default();
        let has_session = cluster.uid().is_some_and(|uid| live.contains(&uid));
        if session_lost(&mut status, has_session, now) {
            write(client, events, cluster, &status).await?;
            marked += 1;
        }
    }
    Ok(marked)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn heartbeat(at: DateTime<Utc>, cpu_used: u64) -> Heartbeat {
        Heartbeat {
            node_count: 3,
            cpu_allocatable_millis: 12000,
            cpu_requested_millis: cpu_used,
            memory_allocatable_bytes: 1 << 34,
            memory_requested_bytes: 1 << 30,
            observed_at: at,
        }
    }

    #[test]
    fn a_lost_session_disconnects_after_the_grace() {
        let start = Utc::now();
        let mut status = ClusterStatus::default();
        assert!(
            !session_lost(&mut status, false, start),
            "pending stays pending"
        );
        apply_heartbeat(&mut status, &heartbeat(start, 100));
        assert!(!session_lost(
            &mut status,
            true,
            start + chrono::Duration::seconds(60)
        ));
        assert!(!session_lost(
            &mut status,
            false,
            start + chrono::Duration::seconds(1)
        ));
        assert!(session_lost(
            &mut status,
            false,
            start + chrono::Duration::seconds(10)
        ));
        assert_eq!(status.state, ClusterState::Disconnected);
        apply_heartbeat(
            &mut status,
            &heartbeat(start + chrono::Duration::seconds(20), 100),
        );
        assert_eq!(status.state, ClusterState::Connected);
    }

    #[test]
    fn a_heartbeat_connects_and_reports_capacity() {
        let mut status = ClusterStatus::default();
        apply_heartbeat(&mut status, &heartbeat(Utc::now(), 1200));
        assert_eq!(status.state, ClusterState::Connected);
        assert_eq!(
            status.capacity.as_ref().map(|c| c.cpu_used_millis),
            Some(1200)
        );
        assert!(status.health.iter().all(|c| c.status == CheckStatus::Ok));
        apply_heartbeat(&mut status, &heartbeat(Utc::now(), 11500));
        assert_eq!(status.health[1].status, CheckStatus::Warning);
    }

    #[test]
    fn a_silent_cluster_turns_unknown_and_critical_and_a_heartbeat_clears_it() {
        let start = Utc::now();
        let window = chrono::Duration::seconds(90);
        let mut status = ClusterStatus::default();
        assert!(
            !evaluate(&mut status, start, window),
            "a cluster that never reported is just pending"
        );
        apply_heartbeat(&mut status, &heartbeat(start, 100));
        assert!(!evaluate(
            &mut status,
            start + chrono::Duration::seconds(60),
            window
        ));
        assert!(evaluate(
            &mut status,
            start + chrono::Duration::seconds(120),
            window
        ));
        assert!(
            status
                .health
                .iter()
                .all(|c| c.status == CheckStatus::Unknown),
            "stale green shown"
        );
        assert!(
            status
                .conditions
                .iter()
                .any(|c| c.type_ == crate::conditions::HEARTBEAT_MISSED && c.reason == "Critical")
        );
        assert_eq!(status.state, ClusterState::Disconnected);
        let ready = crate::conditions::get(&status.conditions, READY).unwrap();
        assert_eq!(
            (ready.status.as_str(), ready.reason.as_str()),
            ("Unknown", CLUSTER_UNREACHABLE)
        );
        assert!(
            !evaluate(&mut status, start + chrono::Duration::seconds(130), window),
            "raised once"
        );
        apply_heartbeat(
            &mut status,
            &heartbeat(start + chrono::Duration::seconds(140), 100),
        );
        assert!(
            status
                .conditions
                .iter()
                .all(|c| c.type_ != crate::conditions::HEARTBEAT_MISSED)
        );
        assert!(status.health.iter().all(|c| c.status == CheckStatus::Ok));
        assert_eq!(status.state, ClusterState::Connected);
        let ready = crate::conditions::get(&status.conditions, READY).unwrap();
        assert_eq!(
            (ready.status.as_str(), ready.reason.as_str()),
            ("True", AGENT_REPORTING)
        );
    }
}
