//! The management plane end to end: every controller, a real hub replica and the history on a
//! real PostgreSQL server, on a real management kube-apiserver, with a scripted agent speaking
//! the real protocol over a real socket in place of a cluster.

use crate::common;

use std::time::Duration;

use crate::common::agent::Agent;
use crate::common::tenant::{reason, tenant};
use crate::common::{eventually, eventually_within, shared_plane};
use k8s_openapi::api::core::v1::Secret;
use kube::ResourceExt;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use kubenest_contracts::{AppPhase, RejectReason};
use kubenest_crds::cluster::Cluster;
use kubenest_crds::project::{Project, ProjectPhase, ProjectSpec};
use kubenest_store::{DeploymentStatus, Operation};

#[tokio::test]
async fn an_app_is_recorded_before_it_is_sent_and_runs_when_the_agent_says_so() {
    let t = tenant("deploy").await;
    let project = t.project("shop", "shop").await;
    assert_eq!(t.agent.count("project.ensure"), 1);
    let ensure = t
        .agent
        .received()
        .into_iter()
        .find(|e| e.message.message_type().to_string() == "project.ensure")
        .unwrap();
    let kubenest_contracts::Message::ProjectEnsure(ensure) = ensure.message else {
        panic!()
    };
    assert_eq!(ensure.namespace.as_str(), "shop");
    assert_eq!(ensure.project_id.as_str(), project.uid().unwrap());

    t.app("web", "shop", "nginx:1.27").await;
    let app = t.running("web").await;
    let uid = app.uid().unwrap();
    let status = app.status.clone().unwrap();
    assert_eq!(status.components.len(), 1);
    assert_eq!(status.components[0].ready_replicas, 2);

    // The command the agent got carries the revision the history recorded, and the row was
    // written before the command was sent (its creation precedes the envelope's sent_at).
    let deploys: Vec<_> = t
        .agent
        .received()
        .into_iter()
        .filter(|e| e.message.message_type().to_string() == "app.deploy")
        .collect();
    let kubenest_contracts::Message::AppDeploy(deploy) = &deploys[0].message else {
        panic!()
    };
    assert_eq!(Some(&deploy.revision), status.revision.as_ref());
    assert_eq!(deploy.app.namespace.as_str(), "shop");
    assert_eq!(
        deploys[0].cluster_id.as_ref().unwrap().as_str(),
        t.cluster_id
    );
    let history = t.history.app_history(&t.org, &uid, 10).await.unwrap();
    assert_eq!(history.len(), 1);
    let row = &history[0];
    assert_eq!(
        (row.operation, row.status),
        (Operation::Create, DeploymentStatus::Succeeded)
    );
    assert_eq!(row.revision, deploy.revision);
    assert!(
        row.created_at <= deploys[0].sent_at,
        "the row must precede the command"
    );
    assert_eq!(status.deployment_id, Some(row.id.to_string()));
    assert!(row.actor.starts_with("kubernetes:"), "{}", row.actor);

    // Another organization cannot see the history.
    assert!(
        t.history
            .app_history("someone-else", &uid, 10)
            .await
            .unwrap()
            .is_empty()
    );
}

#[tokio::test]
async fn a_lost_command_is_sent_again_and_a_duplicate_is_harmless() {
    let t = tenant("lost").await;
    t.project("shop", "shop").await;
    t.agent.behave(|b| b.drop_deploys = 1);
    t.app("web", "shop", "nginx:1.27").await;
    let app = t.running("web").await;
    assert!(
        t.agent.count("app.deploy") >= 2,
        "the lost command was never re-sent"
    );
    let uid = app.uid().unwrap();

    // The cluster claims to hold something else (a lost or corrupted StackDeploy): the snapshot's
    // checksum differs, so the controllers send the desired state again.
    let before = t.agent.count("app.deploy");
    t.agent
        .send_snapshot_with(|entries| entries[0].checksum = "0".repeat(64));
    eventually("a re-send after the snapshot", async || {
        t.agent.count("app.deploy") > before
    })
    .await;
    // ... and a cluster that lost the App entirely gets it back.
    t.agent.forget(&uid);
    let before = t.agent.count("app.deploy");
    t.agent.send_snapshot();
    eventually("a re-send of a missing app", async || {
        t.agent.count("app.deploy") > before
    })
    .await;

    // Every send was the same revision, and it is one deployment in the history.
    let revisions: std::collections::BTreeSet<String> = t
        .agent
        .received()
        .into_iter()
        .filter_map(|e| match e.message {
            kubenest_contracts::Message::AppDeploy(d) => Some(d.revision),
            _ => None,
        })
        .collect();
    assert_eq!(revisions.len(), 1);
    let history = t.history.app_history(&t.org, &uid, 10).await.unwrap();
    assert_eq!(history.len(), 1, "{history:?}");
    assert_eq!(
        t.running("web").await.status.unwrap().phase.as_deref(),
        Some("Running")
    );
}

#[tokio::test]
async fn updates_pause_resume_redeploy_and_rollback_are_each_a_deployment() {
    let t = tenant("life").await;
    t.project("shop", "shop").await;
    t.app("web", "shop", "nginx:1.27").await;
    let first = t.running("web").await;
    let uid = first.uid().unwrap();
    let first_status = first.status.clone().unwrap();
    let first_id = first_status.deployment_id.unwrap();
    let first_revision = first_status.revision.unwrap();

    let patch = serde_json::json!({"spec": {"components": [{"name": "web", "workload": {"image": "nginx:1.28", "replicas": 3}}]}});
    t.merge("web", patch).await;
    let second = t
        .until("web", Duration::from_secs(30), |s| {
            s.deployment_id.as_deref() != Some(first_id.as_str())
                && s.phase.as_deref() == Some("Running")
                && s.observed_revision == s.revision
        })
        .await;
    assert_eq!(second.status.unwrap().components[0].desired_replicas, 3);

    t.merge("web", serde_json::json!({"spec": {"paused": true}}))
        .await;
    let paused = t
        .until("web", Duration::from_secs(30), |s| {
            s.phase.as_deref() == Some("Paused")
        })
        .await;
    assert_eq!(paused.status.unwrap().components[0].ready_replicas, 0);
    t.merge("web", serde_json::json!({"spec": {"paused": false}}))
        .await;
    t.until("web", Duration::from_secs(30), |s| {
        s.phase.as_deref() == Some("Running") && s.observed_revision == s.revision
    })
    .await;

    t.annotate("web", "kubenest.io/redeploy", "r1").await;
    t.until("web", Duration::from_secs(30), |s| {
        s.handled_redeploy.as_deref() == Some("r1")
    })
    .await;
    assert_eq!(t.agent.count("app.redeploy"), 1);

    t.annotate("web", "kubenest.io/rollback-to", &first_id)
        .await;
    let first_revision = first_revision.clone();
    let restored = t
        .until("web", Duration::from_secs(30), |s| {
            s.revision.as_ref() == Some(&first_revision)
                && s.phase.as_deref() == Some("Running")
                && s.observed_revision == s.revision
        })
        .await;
    let image = restored.spec.components[0]
        .workload
        .as_ref()
        .unwrap()
        .image
        .clone();
    assert_eq!(
        image.as_deref(),
        Some("nginx:1.27"),
        "the snapshot is the spec again"
    );
    assert!(
        !restored
            .annotations()
            .contains_key("kubenest.io/rollback-to")
    );

    let history = t.history.app_history(&t.org, &uid, 20).await.unwrap();
    let operations: Vec<Operation> = history.iter().rev().map(|d| d.operation).collect();
    assert_eq!(
        operations,
        vec![
            Operation::Create,
            Operation::Update,
            Operation::Pause,
            Operation::Resume,
            Operation::Redeploy,
            Operation::Rollback
        ]
    );
    let rollback = &history[0];
    assert_eq!(
        rollback.rollback_of.map(|id| id.to_string()),
        Some(first_id.clone())
    );
    assert_eq!(
        rollback.revision,
        history.last().unwrap().revision,
        "the snapshot's revision"
    );
    eventually("the rollback succeeded", async || {
        t.history.app_history(&t.org, &uid, 1).await.unwrap()[0].status
            == DeploymentStatus::Succeeded
    })
    .await;
    let diff = t
        .history
        .deployment(&t.org, history[4].id)
        .await
        .unwrap()
        .diff;
    assert!(!diff.0.is_empty(), "an update has a diff");
}

#[tokio::test]
async fn deletion_waits_for_the_agent_and_projects_wait_for_their_apps() {
    let t = tenant("delete").await;
    t.project("shop", "shop").await;
    t.app("web", "shop", "nginx:1.27").await;
    let app = t.running("web").await;
    let uid = app.uid().unwrap();

    t.agent.behave(|b| b.confirm_deletes = false);
    t.apps()
        .delete("web", &DeleteParams::default())
        .await
        .unwrap();
    t.projects()
        .delete("shop", &DeleteParams::default())
        .await
        .unwrap();
    eventually("app.delete sent", async || t.agent.count("app.delete") >= 1).await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    let waiting = t.apps().get("web").await.unwrap();
    assert_eq!(
        waiting.status.as_ref().unwrap().phase.as_deref(),
        Some("Deleting")
    );
    let project = t.projects().get("shop").await.unwrap();
    assert!(
        reason_of_project(&project).contains("app/web"),
        "{}",
        reason_of_project(&project)
    );
    assert_eq!(
        t.agent.count("project.delete"),
        0,
        "the namespace went before its app"
    );

    t.agent.behave(|b| b.confirm_deletes = true);
    eventually_within("the app gone", Duration::from_secs(40), async || {
        t.apps().get_opt("web").await.unwrap().is_none()
    })
    .await;
    eventually_within("the project gone", Duration::from_secs(40), async || {
        t.projects().get_opt("shop").await.unwrap().is_none()
    })
    .await;
    assert_eq!(t.agent.count("project.delete"), 1);
    let history = t.history.app_history(&t.org, &uid, 10).await.unwrap();
    assert_eq!(
        (history[0].operation, history[0].status),
        (Operation::Delete, DeploymentStatus::Succeeded)
    );
}

fn reason_of_project(project: &Project) -> String {
    let status = project.status.as_ref().unwrap();
    status
        .conditions
        .iter()
        .find(|c| c.type_ == "DeletionBlocked")
        .map(|c| c.message.clone())
        .unwrap_or_default()
}

#[tokio::test]
async fn a_refused_command_fails_the_revision_with_the_agents_reason_and_field() {
    let t = tenant("refuse").await;
    t.project("shop", "shop").await;
    t.agent.behave(|b| {
        b.reject_deploys = Some((
            RejectReason::NamespaceViolation,
            "targets a namespace outside its project".into(),
            Some("/app/namespace".into()),
        ))
    });
    t.app("web", "shop", "nginx:1.27").await;
    let failed = t
        .until("web", Duration::from_secs(30), |s| {
            s.phase.as_deref() == Some("Failed")
        })
        .await;
    let why = reason(&failed, "Ready");
    assert!(
        why.starts_with("Rejected")
            && why.contains("namespace_violation")
            && why.contains("/app/namespace"),
        "{why}"
    );
    // A refusal is final for that revision: no retry storm.
    let sent = t.agent.count("app.deploy");
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert_eq!(t.agent.count("app.deploy"), sent);
    // A new revision is tried afresh.
    t.agent.behave(|b| b.reject_deploys = None);
    let patch = serde_json::json!({"spec": {"components": [{"name": "web", "workload": {"image": "nginx:1.28"}}]}});
    t.merge("web", patch).await;
    t.running("web").await;
}

#[tokio::test]
async fn two_projects_never_share_a_namespace_on_one_cluster() {
    let t = tenant("conflict").await;
    t.project("first", "shared").await;
    let spec = ProjectSpec {
        cluster: "east".into(),
        namespace: "shared".into(),
        registry_secret: None,
        ingress_ca: false,
        members: vec![],
        progress_deadline_seconds: 600,
        pod_security: None,
        quota: None,
        defaults: None,
        network: None,
    };
    t.projects()
        .create(&PostParams::default(), &Project::new("second", spec))
        .await
        .unwrap();
    let second = t
        .until_project("second", |s| s.phase == ProjectPhase::Failed)
        .await;
    let ready = second
        .status
        .unwrap()
        .conditions
        .into_iter()
        .find(|c| c.type_ == "Ready")
        .unwrap();
    assert_eq!(ready.reason, "NamespaceConflict");
    assert!(ready.message.contains("first"), "{}", ready.message);
    assert_eq!(
        t.agent.count("project.ensure"),
        1,
        "the loser never reaches the cluster"
    );
    // Deleting the loser does not delete the winner's namespace.
    t.projects()
        .delete("second", &DeleteParams::default())
        .await
        .unwrap();
    eventually("the loser gone", async || {
        t.projects().get_opt("second").await.unwrap().is_none()
    })
    .await;
    assert_eq!(t.agent.count("project.delete"), 0);
}

#[tokio::test]
async fn rotating_the_token_cuts_the_session_and_the_new_token_connects() {
    let t = tenant("rotate").await;
    let clusters: Api<Cluster> = Api::namespaced(t.client.clone(), &t.namespace);
    let patch = serde_json::json!({"spec": {"tokenVersion": 2}});
    clusters
        .patch("east", &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .unwrap();
    assert_eq!(t.agent.closed(Duration::from_secs(15)).await, Some(4003));
    eventually("the new token", async || {
        let secrets: Api<Secret> = Api::namespaced(t.client.clone(), &t.namespace);
        let s = secrets
            .get(&kubenest_controllers::cluster::token_secret_name("east"))
            .await
            .unwrap();
        s.data.unwrap()["token-version"].0 == b"2"
    })
    .await;
    let fresh = common::credentials(&t.client, &t.namespace, "east").await;
    let plane = shared_plane().await;
    Agent::connect_eventually(&plane.hub_url, &fresh).await;
}

#[tokio::test]
async fn an_app_applied_with_kubectl_behaves_like_any_other() {
    let t = tenant("gitops").await;
    t.project("shop", "shop").await;
    let bins = kubenest_testkit::Binaries::locate().unwrap();
    let plane = shared_plane().await;
    let dir = tempfile::tempdir().unwrap();
    let manifest = |image: &str| {
        format!(
            "apiVersion: kubenest.io/v1alpha1\nkind: App\nmetadata:\n  name: web\n  namespace: {}\nspec:\n  project: shop\n  components:\n  - name: web\n    workload:\n      image: {image}\n      replicas: 2\n",
            t.namespace
        )
    };
    let apply = |image: &str| {
        let path = dir.path().join("app.yaml");
        std::fs::write(&path, manifest(image)).unwrap();
        let out = std::process::Command::new(&bins.kubectl)
            .arg(format!(
                "--kubeconfig={}",
                plane.mgmt.kubeconfig_path().display()
            ))
            .args(["apply", "--server-side", "--field-manager=gitops", "-f"])
            .arg(&path)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    };
    apply("nginx:1.27");
    let app = t.running("web").await;
    let uid = app.uid().unwrap();
    apply("nginx:1.27"); // the same again: nothing to deploy
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(
        t.history.app_history(&t.org, &uid, 10).await.unwrap().len(),
        1
    );
    apply("nginx:1.28");
    t.until("web", Duration::from_secs(30), |s| {
        s.phase.as_deref() == Some("Running")
            && s.observed_revision == s.revision
            && s.recorded_generation == Some(2)
    })
    .await;
    let history = t.history.app_history(&t.org, &uid, 10).await.unwrap();
    assert_eq!(history.len(), 2);
    assert_eq!(history[0].actor, "kubernetes:gitops");
    // kubectl shows the phase and revision columns.
    let out = std::process::Command::new(&bins.kubectl)
        .arg(format!(
            "--kubeconfig={}",
            plane.mgmt.kubeconfig_path().display()
        ))
        .args(["get", "kapp", "-n", &t.namespace])
        .output()
        .unwrap();
    let table = String::from_utf8_lossy(&out.stdout);
    assert!(
        table.contains("Running") && table.contains(&history[0].revision),
        "{table}"
    );
}

#[tokio::test]
async fn a_standalone_addon_keeps_revisions_and_rolls_back() {
    use kubenest_crds::addon::{AddonDefinition, AddonInstance};
    let t = tenant("addon").await;
    t.project("data", "data").await;
    let definition: AddonDefinition = serde_json::from_value(serde_json::json!({
        "apiVersion": "kubenest.io/v1alpha1", "kind": "AddonDefinition",
        "metadata": {"name": "redis"},
        "spec": {"displayName": "Redis", "chart": {"repository": "charts/addons", "name": "redis", "version": "1.0.0"},
                 "exports": {"host": "host", "port": "port"}, "defaultValues": {"memory": "256Mi"}}
    }))
    .unwrap();
    Api::<AddonDefinition>::namespaced(t.client.clone(), &t.namespace)
        .create(&PostParams::default(), &definition)
        .await
        .unwrap();
    let addons: Api<AddonInstance> = Api::namespaced(t.client.clone(), &t.namespace);
    let addon: AddonInstance = serde_json::from_value(serde_json::json!({
        "apiVersion": "kubenest.io/v1alpha1", "kind": "AddonInstance",
        "metadata": {"name": "cache"},
        "spec": {"project": "data", "definition": "redis", "values": {"memory": "512Mi"}}
    }))
    .unwrap();
    addons.create(&PostParams::default(), &addon).await.unwrap();
    let ready = |revision: u32| {
        let addons = addons.clone();
        async move {
            let mut ok = false;
            eventually_within("addon ready", Duration::from_secs(30), async || {
                let s = addons
                    .get("cache")
                    .await
                    .unwrap()
                    .status
                    .unwrap_or_default();
                ok = s.phase.as_deref() == Some("Ready")
                    && s.revision == Some(revision)
                    && s.observed_revision == Some(revision);
                ok
            })
            .await;
        }
    };
    ready(1).await;
    let patch = serde_json::json!({"spec": {"version": "1.1.0"}});
    addons
        .patch("cache", &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .unwrap();
    ready(2).await;
    let patch = serde_json::json!({"metadata": {"annotations": {"kubenest.io/rollback-to": "1"}}});
    addons
        .patch("cache", &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .unwrap();
    ready(3).await;
    let restored = addons.get("cache").await.unwrap();
    assert_eq!(restored.spec.version.as_deref(), Some("1.0.0"));
    let uid = restored.uid().unwrap();
    let revisions = t.history.addon_revisions(&t.org, &uid).await.unwrap();
    let ops: Vec<String> = revisions
        .iter()
        .rev()
        .map(|r| format!("{:?}/{}", r.operation, r.status))
        .collect();
    assert_eq!(
        ops,
        [
            "Install/succeeded",
            "Upgrade/succeeded",
            "Rollback/succeeded"
        ]
    );
    assert_eq!(revisions[0].rollback_to, Some(1));
    assert_eq!(revisions[0].values["memory"], "512Mi");
}

#[tokio::test]
async fn the_app_deploy_reaches_only_its_own_cluster_and_foreign_reports_are_ignored() {
    let a = tenant("tenant-a").await;
    let b = tenant("tenant-b").await;
    a.project("shop", "shop").await;
    a.app("web", "shop", "nginx:1.27").await;
    let app = a.running("web").await;
    assert_eq!(b.agent.count("app.deploy"), 0);
    // B's agent claims A's app failed: the router drops it (not B's cluster).
    b.agent.send(kubenest_contracts::AppStatus {
        app_id: kubenest_contracts::Id::new(app.uid().unwrap()),
        observed_revision: app.status.as_ref().unwrap().revision.clone().unwrap(),
        phase: AppPhase::Failed,
        components: vec![],
        ingress_address: None,
        exports: vec![],
        conditions: vec![],
        observed_at: chrono::Utc::now(),
        sequence: 1_000_000,
    });
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(
        a.apps()
            .get("web")
            .await
            .unwrap()
            .status
            .unwrap()
            .phase
            .as_deref(),
        Some("Running")
    );
}

#[tokio::test]
async fn drift_reports_reach_the_app_and_blocked_sync_is_recorded() {
    let t = tenant("drift").await;
    t.project("shop", "shop").await;
    t.app("web", "shop", "nginx:1.27").await;
    let app = t.running("web").await;
    let revision = app.status.as_ref().unwrap().revision.clone().unwrap();
    let report =
        |class, details: Vec<kubenest_contracts::DriftDetail>| kubenest_contracts::DriftReport {
            app_id: kubenest_contracts::Id::new(app.uid().unwrap()),
            revision: revision.clone(),
            class,
            details,
            observed_at: chrono::Utc::now(),
        };
    let scaled = kubenest_contracts::DriftDetail {
        resource: "Deployment/web".into(),
        field: "spec.replicas".into(),
        desired: serde_json::json!(2),
        observed: serde_json::json!(5),
        manager: Some("kubectl-scale".into()),
    };
    t.agent.send(report(
        kubenest_contracts::DriftClass::Recoverable,
        vec![scaled],
    ));
    let drifted = t
        .until("web", Duration::from_secs(15), |s| {
            s.sync.as_ref().is_some_and(|s| s.drift_detected)
        })
        .await;
    let sync = drifted.status.as_ref().unwrap().sync.clone().unwrap();
    assert_eq!(sync.drift_class.as_deref(), Some("recoverable"));
    assert_eq!(
        sync.drift_details[0].manager.as_deref(),
        Some("kubectl-scale")
    );
    assert_eq!(
        (
            sync.drift_details[0].desired.as_str(),
            sync.drift_details[0].observed.as_str()
        ),
        ("2", "5")
    );

    t.agent
        .send(report(kubenest_contracts::DriftClass::BlockedSync, vec![]));
    let blocked = t
        .until("web", Duration::from_secs(15), |s| {
            s.conditions
                .iter()
                .any(|c| c.type_ == "Synced" && c.reason == "BlockedSync")
        })
        .await;
    assert_eq!(
        blocked.status.unwrap().sync.unwrap().drift_class.as_deref(),
        Some("blocked_sync")
    );

    t.agent
        .send(report(kubenest_contracts::DriftClass::Recoverable, vec![]));
    t.until("web", Duration::from_secs(15), |s| {
        s.conditions
            .iter()
            .any(|c| c.type_ == "Synced" && c.status == "True")
    })
    .await;
}

#[tokio::test]
async fn a_stack_template_is_marked_valid_or_told_what_is_wrong() {
    use kubenest_crds::template::StackTemplate;
    let t = tenant("tpl").await;
    let templates: Api<StackTemplate> = Api::namespaced(t.client.clone(), &t.namespace);
    let template: StackTemplate = serde_json::from_value(serde_json::json!({
        "apiVersion": "kubenest.io/v1alpha1", "kind": "StackTemplate",
        "metadata": {"name": "web"},
        "spec": {
            "scope": "global",
            "parameters": [{"name": "image", "type": "string", "required": true}],
            "components": [{"name": "web", "workload": {"image": "${image}", "replicas": "${replicas}"}}]
        }
    }))
    .unwrap();
    templates
        .create(&PostParams::default(), &template)
        .await
        .unwrap();
    let ready = async |status: &str| {
        let mut found = None;
        eventually("the template's Ready condition", async || {
            let t = templates.get("web").await.unwrap();
            found = t
                .status
                .unwrap_or_default()
                .conditions
                .into_iter()
                .find(|c| c.type_ == "Ready" && c.status == status);
            found.is_some()
        })
        .await;
        found.unwrap()
    };
    let invalid = ready("False").await;
    assert_eq!(invalid.reason, "InvalidTemplate");
    assert!(
        invalid.message.contains("components[0].workload.replicas")
            && invalid.message.contains("${replicas}"),
        "{}",
        invalid.message
    );
    let patch = serde_json::json!({"spec": {"parameters": [
        {"name": "image", "type": "string", "required": true},
        {"name": "replicas", "type": "integer", "default": "2"}
    ]}});
    templates
        .patch("web", &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .unwrap();
    assert_eq!(ready("True").await.reason, "Valid");
}
