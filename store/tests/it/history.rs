//! The history store against a real PostgreSQL server, a fresh database per test.

use kubenest_store::*;
use serde_json::json;

async fn history(prefix: &str) -> History {
    let postgres = kubenest_testkit::shared_postgres().await.unwrap();
    let db = postgres.fresh_database(prefix).await.unwrap();
    History::connect(&DatabaseUrl::new(db.url), 4)
        .await
        .unwrap()
}

fn deployment(
    intent: &str,
    org: &str,
    app: &str,
    before: Option<serde_json::Value>,
    after: serde_json::Value,
) -> NewDeployment {
    NewDeployment {
        intent_key: intent.into(),
        org_id: org.into(),
        project_id: "storefront".into(),
        cluster_id: "c1".into(),
        app_id: app.into(),
        app_name: "shop".into(),
        revision: format!("rev-{intent}"),
        operation: if before.is_some() {
            Operation::Update
        } else {
            Operation::Create
        },
        actor: "alice".into(),
        spec_before: before,
        spec_after: after,
        rollback_of: None,
    }
}

#[tokio::test]
async fn recording_the_same_intent_twice_keeps_one_deployment() {
    let h = history("hist_idem").await;
    let new = deployment("app1/1", "acme", "app1", None, json!({"image": "web:1"}));
    let (first, created) = h.record_deployment(&new).await.unwrap();
    assert!(created);
    assert_eq!(first.status, DeploymentStatus::Pending);
    let (again, created) = h.record_deployment(&new).await.unwrap();
    assert!(
        !created,
        "a restarted controller must not record the change twice"
    );
    assert_eq!(again.id, first.id);
    assert_eq!(h.app_history("acme", "app1", 10).await.unwrap().len(), 1);

    // The same key from another organization is refused rather than returned.
    let mut foreign = new.clone();
    foreign.org_id = "globex".into();
    assert!(matches!(
        h.record_deployment(&foreign).await,
        Err(StoreError::Conflict { .. })
    ));
}

#[tokio::test]
async fn a_burst_is_recorded_before_any_of_its_callers_goes_on() {
    use futures::FutureExt;
    use std::time::Duration;
    let h = history("hist_burst").await;
    let rows = 200;
    // Two changes of each App: the second is written in a transaction after the first, whose
    // callers are answered in between. Each future records, waits for the burst, then looks at
    // what is committed; the first poll of `join_all` starts every recording.
    let seen = futures::future::join_all((0..rows).map(|i| {
        let h = h.clone();
        async move {
            let (app, generation) = (format!("app{}", i / 2), i % 2 + 1);
            let spec = json!({"image": format!("web:{generation}")});
            let new = deployment(&format!("{app}/{generation}"), "acme", &app, None, spec);
            h.record_change(new).await.unwrap();
            h.recorded_burst(Duration::from_secs(3600)).await;
            h.deployments_recorded("acme").await.unwrap()
        }
    }))
    .await;
    assert!(
        seen.iter().all(|n| *n == rows),
        "a caller went on before the burst was recorded: {:?}",
        seen.iter().filter(|n| **n != rows).collect::<Vec<_>>()
    );

    // Nothing in flight, or a recording given up half-way: no wait for the hour's bound.
    let quick = Duration::from_secs(30);
    tokio::time::timeout(quick, h.recorded_burst(Duration::from_secs(3600)))
        .await
        .expect("an idle recorder makes no one wait");
    let abandoned = deployment("gone/1", "acme", "gone", None, json!({"image": "web:1"}));
    assert!(h.record_change(abandoned).now_or_never().is_none());
    tokio::time::timeout(quick, h.recorded_burst(Duration::from_secs(3600)))
        .await
        .expect("an abandoned recording is no longer in flight");
}

#[tokio::test]
async fn a_newer_deployment_supersedes_a_pending_one_and_outcomes_are_final() {
    let h = history("hist_final").await;
    let (d1, _) = h
        .record_deployment(&deployment(
            "app1/1",
            "acme",
            "app1",
            None,
            json!({"image": "web:1"}),
        ))
        .await
        .unwrap();
    let (d2, _) = h
        .record_deployment(&deployment(
            "app1/2",
            "acme",
            "app1",
            Some(json!({"image": "web:1"})),
            json!({"image": "web:2"}),
        ))
        .await
        .unwrap();
    let listed = h.app_history("acme", "app1", 10).await.unwrap();
    assert_eq!(
        listed.iter().map(|d| d.id).collect::<Vec<_>>(),
        vec![d2.id, d1.id],
        "newest first"
    );
    assert_eq!(listed[1].status, DeploymentStatus::Superseded);

    let done = h
        .finish_deployment(
            "acme",
            d2.id,
            DeploymentStatus::Succeeded,
            "revision observed",
        )
        .await
        .unwrap();
    assert_eq!(done.status, DeploymentStatus::Succeeded);
    assert!(done.finished_at.is_some());
    // A duplicate status event is harmless; a contradicting one is refused.
    h.finish_deployment("acme", d2.id, DeploymentStatus::Succeeded, "again")
        .await
        .unwrap();
    let error = h
        .finish_deployment("acme", d2.id, DeploymentStatus::Failed, "late")
        .await
        .unwrap_err();
    assert!(matches!(error, StoreError::InvalidTransition(_)), "{error}");
}

#[tokio::test]
async fn a_failed_deployment_that_runs_after_all_becomes_succeeded_and_nothing_else_changes() {
    let h = history("hist_late").await;
    let new = deployment("late/1", "acme", "late", None, json!({"image": "web:1"}));
    let (d, _) = h.record_deployment(&new).await.unwrap();
    h.finish_deployment(
        "acme",
        d.id,
        DeploymentStatus::Failed,
        "not running within 10s",
    )
    .await
    .unwrap();
    let late = h
        .finish_deployment("acme", d.id, DeploymentStatus::Succeeded, "Running")
        .await
        .unwrap();
    assert_eq!(
        (late.status, late.message.as_str()),
        (DeploymentStatus::Succeeded, "Running")
    );
    // Succeeded stays: a later failure of a running revision is not this deployment's outcome.
    let error = h
        .finish_deployment("acme", d.id, DeploymentStatus::Failed, "crashed")
        .await
        .unwrap_err();
    assert!(matches!(error, StoreError::InvalidTransition(_)), "{error}");
}

#[tokio::test]
async fn a_deployment_carries_its_diff_and_is_invisible_to_other_organizations() {
    let h = history("hist_diff").await;
    let before = json!({"components": [{"name": "web", "image": "web:1", "replicas": 2}]});
    let after = json!({"components": [{"name": "web", "image": "web:2", "replicas": 2}]});
    let (d, _) = h
        .record_deployment(&deployment("app1/2", "acme", "app1", Some(before), after))
        .await
        .unwrap();

    let with_diff = h.deployment("acme", d.id).await.unwrap();
    let diff = serde_json::to_value(&with_diff.diff).unwrap();
    assert_eq!(
        diff,
        json!([{"op": "replace", "path": "/components/0/image", "value": "web:2"}])
    );

    assert!(matches!(
        h.deployment("globex", d.id).await,
        Err(StoreError::NotFound)
    ));
    assert!(
        h.app_history("globex", "app1", 10)
            .await
            .unwrap()
            .is_empty()
    );
    let error = h
        .finish_deployment("globex", d.id, DeploymentStatus::Failed, "x")
        .await
        .unwrap_err();
    assert!(matches!(error, StoreError::NotFound));
}

#[tokio::test]
async fn a_rollback_must_point_at_a_recorded_deployment() {
    let h = history("hist_rollback").await;
    let mut rollback = deployment(
        "app1/9",
        "acme",
        "app1",
        Some(json!({"image": "web:2"})),
        json!({"image": "web:1"}),
    );
    rollback.operation = Operation::Rollback;
    rollback.rollback_of = Some(uuid::Uuid::new_v4());
    let error = h.record_deployment(&rollback).await.unwrap_err();
    assert!(
        matches!(&error, StoreError::Conflict { constraint } if constraint == "deployments_rollback_of_fkey"),
        "{error}"
    );
}

#[tokio::test]
async fn addon_revisions_count_up_and_a_rollback_restores_an_earlier_one() {
    let h = history("hist_addons").await;
    let new = |chart: &str, values, operation| NewAddonRevision {
        addon_id: "cache".into(),
        org_id: "acme".into(),
        project_id: "storefront".into(),
        definition: "redis".into(),
        chart: json!({"name": "redis", "version": chart}),
        values,
        operation,
        actor: "alice".into(),
    };
    let r1 = h
        .record_addon_revision(&new(
            "7.2.0",
            json!({"maxmemory": "64mb"}),
            AddonOperation::Install,
        ))
        .await
        .unwrap();
    let r2 = h
        .record_addon_revision(&new(
            "7.2.1",
            json!({"maxmemory": "128mb"}),
            AddonOperation::Upgrade,
        ))
        .await
        .unwrap();
    assert_eq!((r1.revision, r2.revision), (1, 2));

    let r3 = h
        .record_addon_rollback("acme", "cache", 1, "bob")
        .await
        .unwrap();
    assert_eq!(
        (r3.revision, r3.rollback_to, r3.operation),
        (3, Some(1), AddonOperation::Rollback)
    );
    assert_eq!(
        (r3.chart.clone(), r3.values.clone()),
        (r1.chart.clone(), r1.values.clone())
    );

    let revisions = h.addon_revisions("acme", "cache").await.unwrap();
    assert_eq!(
        revisions.iter().map(|r| r.revision).collect::<Vec<_>>(),
        vec![3, 2, 1]
    );
    assert!(
        h.addon_revisions("globex", "cache")
            .await
            .unwrap()
            .is_empty()
    );
    assert!(matches!(
        h.record_addon_rollback("globex", "cache", 1, "mallory")
            .await,
        Err(StoreError::NotFound)
    ));
}

#[tokio::test]
async fn the_audit_log_is_per_organization_newest_first() {
    let h = history("hist_audit").await;
    for (org, action) in [
        ("acme", "app.create"),
        ("globex", "cluster.delete"),
        ("acme", "app.rollback"),
    ] {
        h.audit(&NewAuditEntry {
            org_id: org.into(),
            actor: "alice".into(),
            actor_id: None,
            action: action.into(),
            resource_kind: "App".into(),
            resource_name: "shop".into(),
            path: AuditPath::Rest,
            outcome: Outcome::Succeeded,
            status: 200,
            details: json!({}),
        })
        .await
        .unwrap();
    }
    let acme: Vec<String> = h
        .audit_log("acme", 10)
        .await
        .unwrap()
        .into_iter()
        .map(|e| e.action)
        .collect();
    assert_eq!(acme, ["app.rollback", "app.create"]);
}

#[tokio::test]
async fn a_delete_removed_by_force_ends_forced_and_stays_so() {
    let h = history("hist_forced").await;
    let mut new = deployment(
        "app9/delete",
        "acme",
        "app9",
        None,
        json!({"image": "web:1"}),
    );
    new.operation = Operation::Delete;
    let (row, _) = h.record_deployment(&new).await.unwrap();
    let forced = h
        .finish_deployment("acme", row.id, DeploymentStatus::Forced, "removed by force")
        .await
        .unwrap();
    assert_eq!(forced.status, DeploymentStatus::Forced);
    assert_eq!(
        h.app_history("acme", "app9", 10).await.unwrap()[0].status,
        DeploymentStatus::Forced
    );
    assert!(matches!(
        h.finish_deployment("acme", row.id, DeploymentStatus::Succeeded, "late")
            .await,
        Err(StoreError::InvalidTransition(_))
    ));
}

#[tokio::test]
async fn an_admission_called_twice_for_one_request_is_one_entry() {
    let h = history("hist_audit_once").await;
    let entry = NewAuditEntry {
        org_id: "acme".into(),
        actor: "kubernetes:ci".into(),
        actor_id: None,
        action: "apps.delete".into(),
        resource_kind: "App".into(),
        resource_name: "shop".into(),
        path: AuditPath::Kubectl,
        outcome: Outcome::Succeeded,
        status: 200,
        details: json!({}),
    };
    assert!(h.audit_once(&entry, 2000).await.unwrap().is_some());
    assert!(h.audit_once(&entry, 2000).await.unwrap().is_none());
    let other = NewAuditEntry {
        resource_name: "cart".into(),
        ..entry.clone()
    };
    assert!(h.audit_once(&other, 2000).await.unwrap().is_some());
    tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    assert!(h.audit_once(&entry, 10).await.unwrap().is_some());
    let page = h
        .audit_page(
            "acme",
            &AuditFilter {
                path: Some(AuditPath::Kubectl),
                resource_kind: Some("App".into()),
                ..AuditFilter::default()
            },
            10,
        )
        .await
        .unwrap();
    let names: Vec<&str> = page.iter().map(|e| e.resource_name.as_str()).collect();
    assert_eq!(names, ["shop", "cart", "shop"]);
    let older = h
        .audit_page(
            "acme",
            &AuditFilter {
                before_id: Some(page[1].id),
                ..AuditFilter::default()
            },
            10,
        )
        .await
        .unwrap();
    assert_eq!(older.len(), 1);
    assert_eq!(older[0].id, page[2].id);
}
