//! The ways out of an App (or a standalone addon) that does not converge.
//!
//! An App whose workloads cannot converge (`blocked_sync`: a Deployment past its progress
//! deadline, a StatefulSet, DaemonSet or Job still not ready at the App's deadline) or whose
//! revision failed is stuck, and changes that pile onto it without touching what fails are
//! refused: they would only queue behind the failure. The ways out are always allowed: a
//! rollback to any recorded deployment, a change of the failing components, a pause, and a
//! delete. A refusal lists them, so the caller is never left with only "no".

use kubenest_crds::app::{AppStatus, Component};

/// Why an App does not converge.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StuckReason {
    /// The agent reports workloads that cannot converge (`blocked_sync`).
    BlockedSync,
    /// The App's revision failed (its deadline passed, or the cluster refused it).
    Failed,
}

/// An App that does not converge: why, and which components fail.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Stuck {
    pub reason: StuckReason,
    /// The failing components, in the order of the spec. When the status names none, every
    /// component (any of them may be the cause, so changing any is a way out).
    pub failing: Vec<String>,
}

/// A request that changes an App.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Change<'a> {
    /// Restore a recorded deployment's spec.
    Rollback,
    /// New components (`after`) for the current ones (`before`); the same list when only the
    /// deadline changes.
    Patch {
        before: &'a [Component],
        after: &'a [Component],
    },
    /// Set or remove values of a workload component's Secret.
    Secret {
        component: &'a str,
    },
    Pause,
    Resume,
    Redeploy,
    Delete,
}

/// A way out of a stuck App, as a refusal lists it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WayOut {
    /// Roll back to any recorded deployment.
    Rollback,
    /// Change these components (for a standalone addon: its version or values; no components).
    Patch {
        components: Vec<String>,
    },
    /// Scale every workload to zero, keeping the spec.
    Pause,
    Delete,
}

/// A change refused because it piles onto a stuck App; the ways out that remain.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refused {
    pub stuck: Stuck,
    pub ways_out: Vec<WayOut>,
}

/// Whether the App (named `app`, with `components`) is stuck, from its status.
pub fn stuck(app: &str, components: &[Component], status: Option<&AppStatus>) -> Option<Stuck> {
    let status = status?;
    let sync = status.sync.as_ref();
    let reason = if sync.and_then(|s| s.drift_class.as_deref()) == Some("blocked_sync") {
        StuckReason::BlockedSync
    } else if status.phase.as_deref() == Some("Failed") {
        StuckReason::Failed
    } else {
        return None;
    };
    // `Deployment/shop-web` is component `web` of App `shop`.
    let prefix = format!("{app}-");
    let drifted: Vec<&str> = sync
        .map(|s| s.drift_details.as_slice())
        .unwrap_or_default()
        .iter()
        .filter_map(|d| d.resource.split_once('/').map(|(_, name)| name))
        .map(|name| name.strip_prefix(&prefix).unwrap_or(name))
        .collect();
    let unready: Vec<&str> = status
        .components
        .iter()
        .filter(|c| !c.ready)
        .map(|c| c.name.as_str())
        .collect();
    let named: Vec<String> = components
        .iter()
        .map(|c| c.name.as_str())
        .filter(|name| drifted.contains(name) || unready.contains(name))
        .map(str::to_owned)
        .collect();
    let failing = if named.is_empty() {
        components.iter().map(|c| c.name.clone()).collect()
    } else {
        named
    };
    Some(Stuck { reason, failing })
}

/// The ways out of `stuck`; pause only while the App runs (a paused App is paused already).
pub fn ways_out(stuck: &Stuck, paused: bool) -> Vec<WayOut> {
    let mut ways = vec![
        WayOut::Rollback,
        WayOut::Patch {
            components: stuck.failing.clone(),
        },
    ];
    if !paused {
        ways.push(WayOut::Pause);
    }
    ways.push(WayOut::Delete);
    ways
}

/// Whether `change` may be made to an App that is `stuck` (or not), and `paused` (or not).
pub fn admit(stuck: Option<&Stuck>, paused: bool, change: Change<'_>) -> Result<(), Refused> {
    let Some(stuck) = stuck else {
        return Ok(());
    };
    let way_out = match change {
        Change::Rollback | Change::Pause | Change::Delete => true,
        Change::Patch { before, after } => stuck.failing.iter().any(|name| {
            let old = before.iter().find(|c| &c.name == name);
            let new = after.iter().find(|c| &c.name == name);
            old != new
        }),
        Change::Secret { component } => stuck.failing.iter().any(|name| name == component),
        Change::Resume | Change::Redeploy => false,
    };
    if way_out {
        Ok(())
    } else {
        Err(Refused {
            stuck: stuck.clone(),
            ways_out: ways_out(stuck, paused),
        })
    }
}

/// A request that changes a standalone addon.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AddonChange {
    Rollback,
    /// A new version or values; `changes` when either differs from the spec.
    Patch {
        changes: bool,
    },
    Delete,
}

/// The ways out of a failed standalone addon.
pub fn addon_ways_out() -> Vec<WayOut> {
    vec![
        WayOut::Rollback,
        WayOut::Patch { components: vec![] },
        WayOut::Delete,
    ]
}

/// Whether `change` may be made to a standalone addon that `failed` (or not). The addon is
/// one component: every real change of it is a way out; only a change that changes nothing
/// piles onto the failure.
pub fn admit_addon(failed: bool, change: AddonChange) -> Result<(), Vec<WayOut>> {
    match change {
        AddonChange::Patch { changes: false } if failed => Err(addon_ways_out()),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use kubenest_crds::app::{ComponentStatus, DriftDetail, Sync, Workload};

    use super::*;

    fn workload(name: &str, image: &str) -> Component {
        Component {
            name: name.into(),
            workload: Some(Workload {
                image: Some(image.into()),
                git: None,
                helm: None,
                replicas: 1,
                port: None,
                env: vec![],
                ingress: None,
                resources: None,
                health_check: None,
            }),
            addon: None,
        }
    }

    fn blocked(resource: &str) -> AppStatus {
        AppStatus {
            sync: Some(Sync {
                drift_detected: true,
                drift_class: Some("blocked_sync".into()),
                drift_details: vec![DriftDetail {
                    resource: resource.into(),
                    field: "status.conditions[Progressing]".into(),
                    desired: "NewReplicaSetAvailable".into(),
                    observed: "ProgressDeadlineExceeded".into(),
                    manager: None,
                }],
            }),
            ..AppStatus::default()
        }
    }

    #[test]
    fn a_blocked_app_names_the_component_its_drift_is_about() {
        let components = [workload("web", "shop:2"), workload("worker", "jobs:1")];
        let status = blocked("Deployment/shop-web");
        let found = stuck("shop", &components, Some(&status)).unwrap();
        assert_eq!(found.reason, StuckReason::BlockedSync);
        assert_eq!(found.failing, ["web"]);
        assert_eq!(
            stuck("shop", &components, Some(&AppStatus::default())),
            None
        );
        assert_eq!(stuck("shop", &components, None), None);
    }

    #[test]
    fn a_failed_app_without_named_components_counts_every_component_as_failing() {
        let components = [workload("web", "shop:2"), workload("worker", "jobs:1")];
        let status = AppStatus {
            phase: Some("Failed".into()),
            ..AppStatus::default()
        };
        let found = stuck("shop", &components, Some(&status)).unwrap();
        assert_eq!(found.reason, StuckReason::Failed);
        assert_eq!(found.failing, ["web", "worker"]);

        let named = AppStatus {
            phase: Some("Failed".into()),
            components: vec![
                ComponentStatus {
                    name: "web".into(),
                    ready: true,
                    ..ComponentStatus::default()
                },
                ComponentStatus {
                    name: "worker".into(),
                    ready: false,
                    ..ComponentStatus::default()
                },
            ],
            ..AppStatus::default()
        };
        let found = stuck("shop", &components, Some(&named)).unwrap();
        assert_eq!(found.failing, ["worker"]);
    }

    #[test]
    fn the_ways_out_pass_and_changes_that_pile_on_are_refused_with_the_ways_out() {
        let before = [workload("web", "shop:2"), workload("worker", "jobs:1")];
        let found = stuck("shop", &before, Some(&blocked("Deployment/shop-web"))).unwrap();
        let fixed = [workload("web", "shop:1"), workload("worker", "jobs:1")];
        let elsewhere = [workload("web", "shop:2"), workload("worker", "jobs:2")];
        let removed = [workload("worker", "jobs:1")];
        for change in [
            Change::Rollback,
            Change::Pause,
            Change::Delete,
            Change::Patch {
                before: &before,
                after: &fixed,
            },
            Change::Patch {
                before: &before,
                after: &removed,
            },
            Change::Secret { component: "web" },
        ] {
            assert_eq!(admit(Some(&found), false, change), Ok(()), "{change:?}");
        }
        for change in [
            Change::Redeploy,
            Change::Resume,
            Change::Patch {
                before: &before,
                after: &before,
            },
            Change::Patch {
                before: &before,
                after: &elsewhere,
            },
            Change::Secret {
                component: "worker",
            },
        ] {
            let refused = admit(Some(&found), false, change).unwrap_err();
            assert_eq!(
                refused.ways_out,
                [
                    WayOut::Rollback,
                    WayOut::Patch {
                        components: vec!["web".into()]
                    },
                    WayOut::Pause,
                    WayOut::Delete
                ],
                "{change:?}"
            );
        }
        let paused = admit(Some(&found), true, Change::Redeploy).unwrap_err();
        assert!(!paused.ways_out.contains(&WayOut::Pause), "already paused");
        assert_eq!(admit(None, false, Change::Redeploy), Ok(()), "not stuck");
    }

    #[test]
    fn a_failed_addon_takes_every_real_change_and_refuses_an_empty_one() {
        for change in [
            AddonChange::Rollback,
            AddonChange::Delete,
            AddonChange::Patch { changes: true },
        ] {
            assert_eq!(admit_addon(true, change), Ok(()));
        }
        assert_eq!(
            admit_addon(true, AddonChange::Patch { changes: false }),
            Err(addon_ways_out())
        );
        assert_eq!(
            admit_addon(false, AddonChange::Patch { changes: false }),
            Ok(())
        );
    }
}
