//! No stale green: once a cluster has been silent past its heartbeat window (fleet health sets
//! its `Ready` to `Unknown` with reason `ClusterUnreachable`), what its Apps and Projects show is
//! only their last observation. Their `Ready` turns `Unknown` with the same reason and the time
//! the cluster last reported, and returns to what their controllers conclude once it reports
//! again.
//!
//! The controllers keep concluding from what was last observed ([`show`] only overrides the
//! `Ready` they would show), so a cluster that comes back needs nothing but a reconcile of its
//! objects: [`follow`] asks for one whenever a cluster's reachability flips in the cache the
//! controllers read.

use std::collections::HashMap;
use std::time::Duration;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::ResourceExt;
use kube::runtime::reflector::ObjectRef;
use kubenest_crds::app::App;
use kubenest_crds::cluster::Cluster;
use kubenest_crds::project::Project;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use crate::caches::Caches;
use crate::conditions::{self, CLUSTER_UNREACHABLE, READY};

/// How often the caches are looked at for clusters that went silent or came back.
const FOLLOW_EVERY: Duration = Duration::from_millis(500);

/// A cluster that has not reported within its heartbeat window.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Silence {
    /// The Cluster's name.
    pub cluster: String,
    /// When it last reported (its last heartbeat), if it ever did.
    pub since: Option<String>,
}

/// The silence of `cluster`, if its `Ready` says it is unreachable (pure).
pub fn silence(cluster: &Cluster) -> Option<Silence> {
    let status = cluster.status.as_ref()?;
    let ready = conditions::get(&status.conditions, READY)?;
    (ready.status == "Unknown" && ready.reason == CLUSTER_UNREACHABLE).then(|| Silence {
        cluster: cluster.name_any(),
        since: status.last_heartbeat.clone(),
    })
}

/// The silence of Cluster `name` in `namespace`, from the caches.
pub fn silence_in(caches: &Caches, namespace: &str, name: &str) -> Option<Silence> {
    caches
        .clusters
        .get(&ObjectRef::new(name).within(namespace))
        .and_then(|c| silence(&c))
}

/// Shows `silence` in `conditions`, the conditions a controller concluded from `old` (pure):
/// `Ready=Unknown`, reason `ClusterUnreachable`, saying since when and what `last` (the phase
/// last observed) was. The `Ready` of `old` is kept as it was when it already said so, so a
/// silent cluster's objects are written once, not on every reconcile. Returns the last
/// observation's time to write beside it, `None` when the cluster reports.
pub fn show(
    old: &[Condition],
    conditions: &mut Vec<Condition>,
    silence: Option<&Silence>,
    last: &str,
    generation: Option<i64>,
) -> Option<String> {
    let silence = silence?;
    let since = silence.since.as_deref().unwrap_or("it was registered");
    let message = format!(
        "cluster {} has not reported since {since}: {last} is its last observation, the state \
         now is unknown",
        silence.cluster
    );
    // Start from the Ready written before, so its transition time stays while it stays Unknown.
    if let (Some(before), Some(now)) = (
        conditions::get(old, READY),
        conditions.iter_mut().find(|c| c.type_ == READY),
    ) {
        *now = before.clone();
    }
    conditions::set_status(
        conditions,
        READY,
        "Unknown",
        CLUSTER_UNREACHABLE,
        message,
        generation,
    );
    Some(silence.since.clone().unwrap_or_default())
}

/// The clusters (namespace, name) whose silence differs from `seen`, which is brought up to
/// date (pure). A cluster seen for the first time counts as flipped only when silent: its
/// objects are reconciled at start anyway.
pub fn flipped(
    seen: &mut HashMap<(String, String), bool>,
    clusters: &[std::sync::Arc<Cluster>],
) -> Vec<(String, String)> {
    let mut flipped = Vec::new();
    let mut present = std::collections::HashSet::new();
    for cluster in clusters {
        let key = (cluster.namespace().unwrap_or_default(), cluster.name_any());
        let silent = silence(cluster).is_some();
        let changed = match seen.insert(key.clone(), silent) {
            None => silent,
            Some(was) => was != silent,
        };
        if changed {
            flipped.push(key.clone());
        }
        present.insert(key);
    }
    seen.retain(|key, _| present.contains(key));
    flipped
}

/// Asks for a reconcile of every App and Project on a cluster whose reachability flipped, until
/// `shutdown`. It reads the same cache the controllers read, so when they reconcile they see
/// the flip.
pub async fn follow(
    caches: Caches,
    apps: mpsc::Sender<ObjectRef<App>>,
    projects: mpsc::Sender<ObjectRef<Project>>,
    shutdown: CancellationToken,
) {
    let mut seen = HashMap::new();
    loop {
        for (namespace, cluster) in flipped(&mut seen, &caches.clusters.state()) {
            for project in caches.projects_on(&namespace, &cluster) {
                for app in caches.apps_of(&namespace, &project.name) {
                    let _ = apps.send(app).await;
                }
                let _ = projects.send(project).await;
            }
        }
        tokio::select! {
            () = shutdown.cancelled() => return,
            () = tokio::time::sleep(FOLLOW_EVERY) => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use kubenest_crds::cluster::{ClusterSpec, ClusterStatus};

    use super::*;

    fn cluster(ready: Option<(&str, &str)>) -> Arc<Cluster> {
        let mut c = Cluster::new(
            "east",
            ClusterSpec {
                display_name: None,
                provider: Default::default(),
                token_version: 1,
                desired_node_count: None,
                members: Vec::new(),
                budget: None,
            },
        );
        c.metadata.namespace = Some("org-acme".into());
        let mut status = ClusterStatus {
            last_heartbeat: Some("2026-01-01T00:00:00Z".into()),
            ..Default::default()
        };
        if let Some((value, reason)) = ready {
            conditions::set_status(&mut status.conditions, READY, value, reason, "", None);
        }
        c.status = Some(status);
        Arc::new(c)
    }

    fn ready(conditions: &[Condition]) -> (String, String, String) {
        let c = conditions::get(conditions, READY).unwrap();
        (c.status.clone(), c.reason.clone(), c.message.clone())
    }

    #[test]
    fn only_an_unreachable_ready_is_a_silence() {
        assert_eq!(silence(&cluster(None)), None);
        assert_eq!(silence(&cluster(Some(("True", "AgentReporting")))), None);
        assert_eq!(silence(&cluster(Some(("Unknown", "Other")))), None);
        assert_eq!(
            silence(&cluster(Some(("Unknown", CLUSTER_UNREACHABLE)))),
            Some(Silence {
                cluster: "east".into(),
                since: Some("2026-01-01T00:00:00Z".into())
            })
        );
    }

    #[test]
    fn a_silent_cluster_turns_a_green_ready_unknown_once_and_a_report_gives_it_back() {
        let silent = silence(&cluster(Some(("Unknown", CLUSTER_UNREACHABLE))));
        let mut old = Vec::new();
        conditions::set(
            &mut old,
            READY,
            true,
            "Running",
            "revision r1 is running",
            Some(1),
        );
        // What the controller concludes from the last observation: still Running.
        let concluded = old.clone();

        let mut shown = concluded.clone();
        let last = show(&old, &mut shown, silent.as_ref(), "Running", Some(1));
        assert_eq!(last.as_deref(), Some("2026-01-01T00:00:00Z"));
        let (status, reason, message) = ready(&shown);
        assert_eq!(
            (status.as_str(), reason.as_str()),
            ("Unknown", CLUSTER_UNREACHABLE)
        );
        assert!(
            message.contains("since 2026-01-01T00:00:00Z") && message.contains("Running"),
            "{message}"
        );

        // The next reconcile concludes Running again (the transition time moves as it flips
        // back to True): what is shown is what was written, so nothing is written again.
        let mut again = shown.clone();
        conditions::set(
            &mut again,
            READY,
            true,
            "Running",
            "revision r1 is running",
            Some(1),
        );
        show(&shown, &mut again, silent.as_ref(), "Running", Some(1));
        assert_eq!(again, shown);

        // The cluster reports: the controller's own Ready stands, with no last observation.
        let mut back = concluded.clone();
        assert_eq!(show(&shown, &mut back, None, "Running", Some(1)), None);
        assert_eq!(ready(&back).0, "True");
    }

    #[test]
    fn a_flip_either_way_is_seen_once_and_a_first_sight_only_when_silent() {
        let mut seen = HashMap::new();
        let reporting = cluster(Some(("True", "AgentReporting")));
        let silent = cluster(Some(("Unknown", CLUSTER_UNREACHABLE)));
        let key = ("org-acme".to_owned(), "east".to_owned());
        assert!(flipped(&mut seen, std::slice::from_ref(&reporting)).is_empty());
        assert_eq!(
            flipped(&mut seen, std::slice::from_ref(&silent)),
            std::slice::from_ref(&key)
        );
        assert!(flipped(&mut seen, std::slice::from_ref(&silent)).is_empty());
        assert_eq!(
            flipped(&mut seen, std::slice::from_ref(&reporting)),
            std::slice::from_ref(&key)
        );
        assert!(flipped(&mut seen, &[]).is_empty());
        assert!(seen.is_empty(), "a deleted cluster is forgotten");
        assert_eq!(flipped(&mut seen, &[silent]), [key]);
    }
}
