//! The project decisions against hand-made facts.

use super::*;
use crate::project::fixtures::{key, placement, project};

#[test]
fn the_older_claim_owns_a_namespace_and_a_confirmed_one_is_never_displaced() {
    let projects = [
        project("b", "shop", 100, false),
        project("a", "shop", 200, false),
        project("c", "other", 1, false),
    ];
    assert_eq!(owner_of(&projects, "east", "shop").unwrap().name_any(), "b");
    let projects = [
        project("b", "shop", 100, false),
        project("a", "shop", 200, true),
    ];
    assert_eq!(owner_of(&projects, "east", "shop").unwrap().name_any(), "a");
    assert!(owner_of(&projects, "west", "shop").is_none());
}

fn ready(status: &ProjectStatus) -> Option<(&str, &str)> {
    conditions::get(&status.conditions, READY).map(|c| (c.status.as_str(), c.reason.as_str()))
}

#[test]
fn a_namespace_held_by_another_project_fails_the_newer_claim_without_a_command() {
    let web = project("web", "shop", 200, false);
    let key = key();
    let facts = Facts {
        project: &web,
        key: &key,
        generation: 1,
        old: &ProjectStatus::default(),
        owner: Some("older".into()),
        placement: Ok(placement(&web)),
        now: chrono::Utc::now(),
        silence: None,
    };
    let Plan::Write {
        status, requeue, ..
    } = decide(&facts)
    else {
        panic!("a conflict sends nothing");
    };
    assert_eq!(status.phase, ProjectPhase::Failed);
    assert_eq!(ready(&status), Some(("False", "NamespaceConflict")));
    assert_eq!(requeue, Duration::from_secs(30));
}

#[test]
fn an_unplaced_project_waits_and_a_confirmed_one_is_ready_and_settled() {
    let web = project("web", "shop", 200, false);
    let key = key();
    let unplaced = Facts {
        project: &web,
        key: &key,
        generation: 1,
        old: &ProjectStatus::default(),
        owner: None,
        placement: Err(Unplaced::ClusterNotRegistered("east".into())),
        now: chrono::Utc::now(),
        silence: None,
    };
    let Plan::Write {
        status, requeue, ..
    } = decide(&unplaced)
    else {
        panic!("an unplaced project sends nothing");
    };
    assert_eq!(status.phase, ProjectPhase::Pending);
    assert_eq!(ready(&status), Some(("False", "ClusterNotRegistered")));
    assert_eq!(requeue, Duration::from_secs(10));

    let old = ProjectStatus {
        cluster_phase: Some("Ready".into()),
        ensured_generation: Some(1),
        ..Default::default()
    };
    let confirmed = Facts {
        old: &old,
        placement: Ok(placement(&web)),
        silence: None,
        ..unplaced
    };
    let Plan::Write {
        status,
        requeue,
        settled,
    } = decide(&confirmed)
    else {
        panic!("a confirmed namespace needs no command");
    };
    assert_eq!(status.phase, ProjectPhase::Ready);
    assert_eq!(ready(&status), Some(("True", "NamespaceReady")));
    assert!(settled);
    assert_eq!(requeue, Duration::from_secs(300));
}

#[test]
fn an_unconfirmed_generation_is_ensured_and_waits_with_the_attempts_reason() {
    let web = project("web", "shop", 200, false);
    let key = key();
    let old = ProjectStatus {
        cluster_phase: Some("Ready".into()),
        ensured_generation: Some(1),
        ..Default::default()
    };
    let facts = Facts {
        project: &web,
        key: &key,
        generation: 2,
        old: &old,
        owner: None,
        placement: Ok(placement(&web)),
        now: chrono::Utc::now(),
        silence: None,
    };
    let Plan::Ensure { command, .. } = decide(&facts) else {
        panic!("generation 2 was never confirmed");
    };
    assert_eq!(command.namespace.as_str(), "shop");
    assert_eq!(command.labels[labels::ORGANIZATION], "acme");
    let attempt = Attempt {
        waiting: Some(("ClusterUnreachable".into(), "not connected".into())),
        retry: Duration::from_secs(4),
    };
    let (status, _) = waiting(&facts, &attempt);
    assert_eq!(
        status.phase,
        ProjectPhase::Ready,
        "the namespace is still there"
    );
    assert_eq!(
        conditions::get(&status.conditions, PROGRESSING).map(|c| c.reason.as_str()),
        Some("ClusterUnreachable")
    );
    let fresh = Facts {
        old: &ProjectStatus::default(),
        ..facts
    };
    let (status, _) = waiting(&fresh, &attempt);
    assert_eq!(status.phase, ProjectPhase::Pending);
    assert_eq!(ready(&status), Some(("False", "ClusterUnreachable")));
}

#[test]
fn a_namespace_never_confirmed_fails_at_the_deadline_and_an_undelivered_one_is_delayed() {
    let web = project("web", "shop", 200, false);
    let key = key();
    let start = chrono::Utc::now() - chrono::Duration::seconds(700);
    let clock = |delivered| deadline::judge(None, 1, delivered, 600, start).clock;
    let unreachable = Attempt {
        waiting: Some(("ClusterUnreachable".into(), "not connected".into())),
        retry: Duration::from_secs(4),
    };
    let old = ProjectStatus {
        progress: Some(clock(false)),
        ..Default::default()
    };
    let facts = Facts {
        project: &web,
        key: &key,
        generation: 1,
        old: &old,
        owner: None,
        placement: Ok(placement(&web)),
        now: chrono::Utc::now(),
        silence: None,
    };
    let (status, _) = waiting(&facts, &unreachable);
    assert_eq!(
        status.phase,
        ProjectPhase::Pending,
        "never final while undelivered"
    );
    assert_eq!(ready(&status), Some(("False", "DeliveryDelayed")));
    assert_eq!(
        conditions::get(&status.conditions, PROGRESSING).map(|c| c.reason.as_str()),
        Some("ClusterUnreachable")
    );

    let accepted = ProjectStatus {
        ensured_generation: Some(1),
        progress: Some(clock(true)),
        ..Default::default()
    };
    let routed = Attempt {
        waiting: Some(("AwaitingAgent".into(), "requested".into())),
        retry: Duration::from_secs(4),
    };
    let stuck = Facts {
        old: &accepted,
        ..facts
    };
    let (status, _) = waiting(&stuck, &routed);
    assert_eq!(status.phase, ProjectPhase::Failed);
    assert_eq!(ready(&status), Some(("False", "ProgressDeadlineExceeded")));
    let why = &conditions::get(&status.conditions, READY).unwrap().message;
    assert!(
        why.contains("namespace shop") && why.contains("accepted"),
        "{why}"
    );
    // Delivered just now after a long outage: the namespace gets its own deadline.
    let late = ProjectStatus {
        ensured_generation: Some(1),
        progress: Some(clock(false)),
        ..Default::default()
    };
    let fresh = Facts {
        old: &late,
        ..stuck
    };
    let (status, requeue) = waiting(&fresh, &routed);
    assert_eq!(
        requeue,
        Duration::from_secs(4),
        "the backoff, before the new deadline"
    );
    assert_eq!(status.phase, ProjectPhase::Pending);
    assert!(status.progress.unwrap().delivered_at.is_some());
}

#[test]
fn a_ready_project_on_a_silent_cluster_shows_unknown_with_its_last_observation_until_it_reports() {
    let web = project("web", "shop", 200, true);
    let key = key();
    let old = ProjectStatus {
        cluster_phase: Some("Ready".into()),
        ensured_generation: Some(1),
        ..Default::default()
    };
    let silent = Facts {
        project: &web,
        key: &key,
        generation: 1,
        old: &old,
        owner: None,
        placement: Ok(placement(&web)),
        now: chrono::Utc::now(),
        silence: Some(Silence {
            cluster: "east".into(),
            since: Some("2026-01-01T00:00:00Z".into()),
        }),
    };
    let Plan::Write { status, .. } = decide(&silent) else {
        panic!("a confirmed namespace needs no command");
    };
    assert_eq!(
        status.phase,
        ProjectPhase::Ready,
        "the phase is the last observed"
    );
    assert_eq!(ready(&status), Some(("Unknown", "ClusterUnreachable")));
    assert_eq!(
        status.last_observation.as_deref(),
        Some("2026-01-01T00:00:00Z")
    );

    let shown = status;
    let reporting = Facts {
        old: &shown,
        silence: None,
        ..silent
    };
    let Plan::Write { status, .. } = decide(&reporting) else {
        panic!("a confirmed namespace needs no command");
    };
    assert_eq!(ready(&status), Some(("True", "NamespaceReady")));
    assert_eq!(status.last_observation, None);
}
