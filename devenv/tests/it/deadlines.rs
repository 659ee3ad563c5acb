//! Rollouts that go wrong, end to end on the whole system (the release programs as processes on
//! real clusters with kwok nodes and PostgreSQL, see `common`): a revision whose new pods never
//! become Ready is never `Running` nor recorded `succeeded`, and fails at its deadline, told as
//! Kubernetes Events on the App and its StackDeploy (and when
//! they do become Ready after all, the App runs and its row says so); changes
//! made while an agent's link is cut for longer than the deadline are not lost: the latest runs,
//! applied once; a standalone addon whose pods never become Ready ends `Failed`. A deletion
//! that something on the cluster holds (a finalizer nothing removes) fails at its deadline
//! naming what holds it, with an alert and the way out, and still finishes once released; a
//! project in that state can be removed by force while its agent is connected, and not before.
//! A `Failed` App rolled back to its first deployment runs it on the cluster, with a real agent.
//!
//! kwok never readies a pod whose first container's image is tagged `never-ready` (the stage
//! the test kit configures, see `tools/build-k8s-bins.sh`).

use crate::common;

use std::time::{Duration, Instant};

use crate::common::{
    CONVERGE, Expect, converged, converged_as, events_until, eventually, fixture, gone, run,
    simple_app,
};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, ListParams, Patch, PatchParams, PostParams};
use kubenest_cli::api::Client;
use kubenest_crds::addon::AddonInstance;
use kubenest_testkit::LinkMode;
use serde_json::{Value, json};

const NEVER_READY: &str = "kubenest-test/web:never-ready";

/// A finalizer no controller removes: whatever carries it stays until the test takes it off.
const HOLD: &str = "example.test/hold";

/// Sets (`Some`) or clears (`None`) [`HOLD`] on `name` through `api`.
async fn hold<K>(api: &Api<K>, name: &str, held: bool)
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    let finalizers = if held { json!([HOLD]) } else { json!(null) };
    let patch = json!({"metadata": {"finalizers": finalizers}});
    api.patch(name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .unwrap();
}

/// The org's alerts of `kind` about `subject_id`.
async fn alerts_of(admin: &mut Client, org: &str, kind: &str, subject_id: &str) -> Vec<Value> {
    let alerts = admin
        .get(&format!("/api/v1/orgs/{org}/alerts"))
        .await
        .unwrap();
    alerts
        .as_array()
        .unwrap()
        .iter()
        .filter(|a| a["kind"] == kind && a["subject_id"] == subject_id)
        .cloned()
        .collect()
}

/// The App's condition `kind` as `reason: message`, if set.
fn condition(app: &Value, kind: &str) -> Option<String> {
    app["conditions"]
        .as_array()?
        .iter()
        .find(|c| c["type"] == kind)
        .map(|c| format!("{}: {}", c["reason"].as_str().unwrap_or(""), c["message"]))
}

async fn create_with_deadline(
    admin: &mut Client,
    project_id: &str,
    name: &str,
    image: &str,
    deadline: u32,
) -> String {
    let mut body = simple_app(project_id, name, image);
    body["progress_deadline_seconds"] = json!(deadline);
    let app = admin.post("/api/v1/apps", &body).await.unwrap();
    app["id"].as_str().unwrap().to_owned()
}

#[test]
fn an_image_whose_new_pods_never_become_ready_is_never_running_and_fails_at_the_deadline() {
    run(async {
        let mut f = fixture().await;
        let (project, namespace) = f.project("east", "unready").await;
        let mut admin = f.admin().await;
        let id = create_with_deadline(&mut admin, &project, "u-web", "nginx:1.27", 20).await;
        converged(
            &mut f,
            "east",
            &namespace,
            &[Expect {
                app_id: &id,
                name: "u-web",
                image: "nginx:1.27",
                operations: &["create"],
            }],
        )
        .await;

        // The rolling update keeps the old pod serving; the new one never becomes Ready.
        common::change_image(&mut admin, &id, NEVER_READY).await;
        let path = format!("/api/v1/apps/{id}");
        let mut seen: Vec<String> = Vec::new();
        let deadline = Instant::now() + CONVERGE;
        let app = loop {
            f.check_running();
            let app = admin.get(&path).await.unwrap();
            let history = admin.get(&format!("{path}/deployments")).await.unwrap();
            let newest = &history[0];
            let current = newest["operation"] == "update" && app["revision"] == newest["revision"];
            if current {
                let observed = app["observed_revision"] == app["revision"];
                let state = format!(
                    "phase {} (observed {observed}), row {}",
                    app["phase"], newest["result"]
                );
                if seen.last() != Some(&state) {
                    seen.push(state);
                }
                assert_ne!(
                    newest["result"], "succeeded",
                    "the row of a revision that never ran says succeeded: {seen:?}"
                );
                assert!(
                    !(observed && app["phase"] == "Running"),
                    "the App is Running on a revision whose pods are not Ready: {seen:?} {app}"
                );
                if app["phase"] == "Failed" && newest["result"] == "failed" {
                    break app;
                }
            }
            assert!(
                Instant::now() < deadline,
                "not Failed with a failed row: {seen:?}; {app}"
            );
            tokio::time::sleep(Duration::from_millis(250)).await;
        };
        assert!(
            seen.iter().any(|s| s.starts_with("phase \"Deploying\"")),
            "it was Deploying before it failed: {seen:?}"
        );
        let ready = condition(&app, "Ready").unwrap();
        assert!(ready.starts_with("ComponentsFailed"), "{ready}");
        // The failure is told as Kubernetes Events naming the reason: on the App (management
        // cluster) and on its StackDeploy (workload cluster), as `kubectl describe` shows them.
        let mgmt = f.env.management().unwrap().client().await.unwrap();
        let on_app = format!("involvedObject.uid={id}");
        let app_events = events_until(&mgmt, &on_app, "RolloutFailed").await;
        let failed = app_events
            .iter()
            .find(|e| e.reason.as_deref() == Some("RolloutFailed"));
        let failed = failed.unwrap();
        assert_eq!(failed.type_.as_deref(), Some("Warning"));
        assert!(
            failed
                .message
                .as_deref()
                .unwrap_or("")
                .contains("ComponentsFailed"),
            "{failed:?}"
        );
        let reasons: Vec<&str> = app_events
            .iter()
            .filter_map(|e| e.reason.as_deref())
            .collect();
        assert!(reasons.contains(&"RevisionRecorded"), "{reasons:?}");
        let on_stack = format!("involvedObject.kind=StackDeploy,involvedObject.name=app-{id}");
        let east = f.workload("east").await;
        let stack_events = events_until(&east, &on_stack, "RolloutFailed").await;
        let failed = stack_events
            .iter()
            .find(|e| e.reason.as_deref() == Some("RolloutFailed"));
        assert!(
            failed
                .unwrap()
                .message
                .as_deref()
                .unwrap_or("")
                .contains("web"),
            "the StackDeploy's failure names the component: {failed:?}"
        );
        // The old pod still serves: Failed names the rollout, not an outage.
        let deployments: Api<Deployment> = Api::namespaced(f.workload("east").await, &namespace);
        let live = deployments.get("u-web-web").await.unwrap();
        assert_eq!(live.status.unwrap().ready_replicas, Some(1));

        // The new pod becomes Ready after all (a slow image pull that finished, say: here its
        // status is written by hand, as a kubelet would). The rollout completes, the App runs
        // its revision, and the row no longer says failed: the history never contradicts it.
        let pods: Api<Pod> = Api::namespaced(f.workload("east").await, &namespace);
        let ready = json!({"status": {"phase": "Running", "conditions": [
            {"type": "PodScheduled", "status": "True"}, {"type": "Initialized", "status": "True"},
            {"type": "ContainersReady", "status": "True"}, {"type": "Ready", "status": "True"}]}});
        for pod in pods.list(&ListParams::default()).await.unwrap() {
            if pod.spec.as_ref().unwrap().containers[0].image.as_deref() == Some(NEVER_READY) {
                let name = pod.metadata.name.unwrap();
                pods.patch_status(&name, &PatchParams::default(), &Patch::Merge(&ready))
                    .await
                    .unwrap();
            }
        }
        let late = Instant::now() + CONVERGE;
        loop {
            let app = admin.get(&path).await.unwrap();
            let history = admin.get(&format!("{path}/deployments")).await.unwrap();
            if app["phase"] == "Running"
                && app["observed_revision"] == app["revision"]
                && history[0]["revision"] == app["revision"]
                && history[0]["result"] == "succeeded"
            {
                break;
            }
            let live = deployments.get("u-web-web").await.unwrap().status;
            assert!(
                Instant::now() < late,
                "the late revision never ran: phase {}, ready {:?}, row {}, deployment {live:?}",
                app["phase"],
                condition(&app, "Ready"),
                history[0]["result"]
            );
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
    });
}

#[test]
fn changes_made_while_the_link_is_cut_past_the_deadline_arrive_and_the_latest_runs_once() {
    run(async {
        let mut f = fixture().await;
        let (project, namespace) = f.project("west", "outage").await;
        let mut admin = f.admin().await;
        let id = create_with_deadline(&mut admin, &project, "o-web", "nginx:1.27", 10).await;
        let first = Expect {
            app_id: &id,
            name: "o-web",
            image: "nginx:1.27",
            operations: &["create"],
        };
        converged(&mut f, "west", &namespace, &[first]).await;

        f.system.set_link("west", LinkMode::Drop).unwrap();
        f.cluster_state("west", "disconnected", Duration::from_secs(60))
            .await;
        common::change_image(&mut admin, &id, "nginx:1.28").await;
        common::change_image(&mut admin, &id, "nginx:1.29").await;
        // Past the deadline the delay is named; nothing is final, the intent stays.
        let path = format!("/api/v1/apps/{id}");
        let mut app = Value::Null;
        eventually("the delay named", Duration::from_secs(60), async || {
            app = admin.get(&path).await.unwrap();
            app["phase"] == "Failed"
                || condition(&app, "Ready").is_some_and(|r| r.starts_with("DeliveryDelayed"))
        })
        .await;
        assert_eq!(app["phase"], "Pending", "{app}");
        let history = admin.get(&format!("{path}/deployments")).await.unwrap();
        let results: Vec<&str> = history
            .as_array()
            .unwrap()
            .iter()
            .map(|d| d["result"].as_str().unwrap())
            .collect();
        assert_eq!(results, ["pending", "superseded", "succeeded"], "{history}");

        f.system.set_link("west", LinkMode::Pass).unwrap();
        let latest = Expect {
            app_id: &id,
            name: "o-web",
            image: "nginx:1.29",
            operations: &["update", "update", "create"],
        };
        // The superseded change never reached the cluster: two specs were applied, not three.
        let results = ["succeeded", "superseded", "succeeded"];
        converged_as(&mut f, "west", &namespace, &latest, &results, 2).await;
    });
}

#[test]
fn a_standalone_addon_whose_pods_never_become_ready_fails_at_its_deadline() {
    run(async {
        let mut f = fixture().await;
        let (_, project) = f.project("east", "stuckdb").await;
        let org = f.system.options().org.clone();
        // Applied with kubectl's path (the CRD is the API for GitOps too), with a short deadline.
        let mgmt = f.env.management().unwrap().client().await.unwrap();
        let addons: Api<AddonInstance> = Api::namespaced(mgmt, &format!("org-{org}"));
        let addon: AddonInstance = serde_json::from_value(json!({
            "apiVersion": "kubenest.io/v1alpha1", "kind": "AddonInstance",
            "metadata": {"name": format!("{project}-db")},
            "spec": {"project": project, "definition": "postgres", "progressDeadlineSeconds": 15,
                     "values": {"image": "postgres:never-ready", "persistence": {"enabled": false}}}
        }))
        .unwrap();
        let created = addons.create(&PostParams::default(), &addon).await.unwrap();
        let id = created.metadata.uid.unwrap();
        let mut admin = f.admin().await;
        let mut seen: Vec<String> = Vec::new();
        let deadline = Instant::now() + CONVERGE;
        let last = loop {
            f.check_running();
            let last = admin
                .get(&format!("/api/v1/addon-instances/{id}"))
                .await
                .unwrap();
            let phase = last["phase"].as_str().unwrap_or_default().to_owned();
            if seen.last() != Some(&phase) {
                seen.push(phase.clone());
            }
            assert_ne!(phase, "Ready", "{last}");
            if phase == "Failed" {
                break last;
            }
            assert!(Instant::now() < deadline, "not Failed: {seen:?}; {last}");
            tokio::time::sleep(Duration::from_millis(250)).await;
        };
        assert!(seen.iter().any(|p| p == "Installing"), "{seen:?}");
        let message = last["message"].as_str().unwrap();
        assert!(
            message.contains("within 15s") && message.contains("StatefulSet"),
            "{message}"
        );
        let revisions = &last["revisions"];
        assert_eq!(revisions[0]["result"], "failed", "{last}");
    });
}

#[test]
fn a_deletion_held_on_the_cluster_fails_at_its_deadline_naming_what_holds_it_then_finishes() {
    run(async {
        let mut f = fixture().await;
        let (project, namespace) = f.project("east", "held").await;
        let org = f.system.options().org.clone();
        let mut admin = f.admin().await;
        let id = create_with_deadline(&mut admin, &project, "h-web", "nginx:1.27", 15).await;
        let expect = Expect {
            app_id: &id,
            name: "h-web",
            image: "nginx:1.27",
            operations: &["create"],
        };
        converged(&mut f, "east", &namespace, &[expect]).await;
        let deployments: Api<Deployment> = Api::namespaced(f.workload("east").await, &namespace);
        hold(&deployments, "h-web-web", true).await;

        let path = format!("/api/v1/apps/{id}");
        admin.delete(&path).await.unwrap();
        let mut seen: Vec<String> = Vec::new();
        let deadline = Instant::now() + CONVERGE;
        let failed = loop {
            f.check_running();
            let app = admin.get(&path).await.unwrap();
            let state = format!("{} {:?}", app["phase"], condition(&app, "Ready"));
            if seen.last() != Some(&state) {
                seen.push(state);
            }
            if app["phase"] == "Failed" {
                break app;
            }
            assert!(Instant::now() < deadline, "not Failed: {seen:?}");
            tokio::time::sleep(Duration::from_millis(250)).await;
        };
        let ready = condition(&failed, "Ready").unwrap();
        assert!(
            ready.starts_with("DeletionDeadlineExceeded: ")
                && ready.contains("within 15s")
                && ready.contains("cluster east")
                && ready.contains(&format!("Deployment/h-web-web (finalizers: {HOLD})"))
                && ready.contains("kubenest apps delete h-web --force"),
            "{ready}"
        );
        let history = admin.get(&format!("{path}/deployments")).await.unwrap();
        assert_eq!(
            (&history[0]["operation"], &history[0]["result"]),
            (&json!("delete"), &json!("failed")),
            "{history}"
        );
        let mut alerts = Vec::new();
        eventually(
            "the deletion's alert opens",
            Duration::from_secs(30),
            async || {
                alerts = alerts_of(&mut admin, &org, "deletion_deadline_exceeded", &id).await;
                alerts.iter().any(|a| a["state"] == "open")
            },
        )
        .await;
        assert_eq!(alerts[0]["subject_kind"], "app", "{alerts:?}");
        assert!(
            alerts[0]["message"].as_str().unwrap().contains(HOLD),
            "{alerts:?}"
        );

        // Released, the deletion it kept trying finishes; the alert goes with the App.
        hold(&deployments, "h-web-web", false).await;
        gone(&f, "east", &namespace, &id, "h-web").await;
        eventually(
            "the deletion's alert resolves",
            Duration::from_secs(30),
            async || {
                let alerts = alerts_of(&mut admin, &org, "deletion_deadline_exceeded", &id).await;
                alerts.iter().all(|a| a["state"] == "resolved")
            },
        )
        .await;
    });
}

#[test]
fn a_project_whose_namespace_is_held_fails_its_deletion_and_only_then_may_be_forced() {
    run(async {
        let mut f = fixture().await;
        let mut admin = f.admin().await;
        let org = f.system.options().org.clone();
        let namespace = format!(
            "stuckns-{}",
            &uuid::Uuid::new_v4().simple().to_string()[..6]
        );
        let body = json!({"name": namespace, "cluster_id": f.cluster_id("east"),
                          "progress_deadline_seconds": 15});
        let created = admin
            .post(&format!("/api/v1/orgs/{org}/projects"), &body)
            .await
            .unwrap();
        let path = format!("/api/v1/projects/{}", created["id"].as_str().unwrap());
        eventually("the project is Ready", CONVERGE, async || {
            admin.get(&path).await.unwrap()["phase"] == "Ready"
        })
        .await;
        // Something in the namespace kubenest did not put there, held by a finalizer.
        let configs: Api<k8s_openapi::api::core::v1::ConfigMap> =
            Api::namespaced(f.workload("east").await, &namespace);
        let held: k8s_openapi::api::core::v1::ConfigMap = serde_json::from_value(json!({
            "metadata": {"name": "left-by-hand", "finalizers": [HOLD]}, "data": {"a": "b"}
        }))
        .unwrap();
        configs.create(&PostParams::default(), &held).await.unwrap();

        admin.delete(&path).await.unwrap();
        let early = admin
            .delete(&format!("{path}?force=true"))
            .await
            .unwrap_err();
        assert_eq!(early.status(), Some(409), "{early}");
        assert!(early.to_string().contains("agent_connected"), "{early}");

        let mut failed = Value::Null;
        eventually("the project's deletion fails", CONVERGE, async || {
            f.check_running();
            failed = admin.get(&path).await.unwrap();
            failed["phase"] == "Failed"
        })
        .await;
        let message = failed["message"].as_str().unwrap();
        assert!(
            message.contains("did not finish within 15s")
                && message.contains("kubenest projects delete"),
            "{failed}"
        );
        // The namespace controller names the finalizer when it has tried the content, which on
        // a busy machine may be after the deadline; the failed message follows what it says.
        eventually(
            "the failed message names what holds it",
            CONVERGE,
            async || {
                failed = admin.get(&path).await.unwrap();
                failed["phase"] == "Failed" && failed["message"].to_string().contains(HOLD)
            },
        )
        .await;
        let forced = admin.delete(&format!("{path}?force=true")).await.unwrap();
        assert_eq!(forced["state"], "removed", "{forced}");
        assert!(
            forced["left_on_cluster"].to_string().contains(&namespace),
            "{forced}"
        );
        let gone = admin.get(&path).await.unwrap_err();
        assert_eq!(gone.status(), Some(404), "{gone}");
        // What was left on the cluster goes once its owner releases it.
        hold(&configs, "left-by-hand", false).await;
    });
}

#[test]
fn a_standalone_addon_whose_deletion_is_held_fails_at_its_deadline_then_finishes() {
    run(async {
        let mut f = fixture().await;
        let (_, project) = f.project("east", "helddb").await;
        let org = f.system.options().org.clone();
        let mgmt = f.env.management().unwrap().client().await.unwrap();
        let addons: Api<AddonInstance> = Api::namespaced(mgmt, &format!("org-{org}"));
        let addon: AddonInstance = serde_json::from_value(json!({
            "apiVersion": "kubenest.io/v1alpha1", "kind": "AddonInstance",
            "metadata": {"name": format!("{project}-db")},
            "spec": {"project": project, "definition": "postgres", "progressDeadlineSeconds": 15,
                     "values": {"persistence": {"enabled": false}}}
        }))
        .unwrap();
        let created = addons.create(&PostParams::default(), &addon).await.unwrap();
        let id = created.metadata.uid.unwrap();
        let path = format!("/api/v1/addon-instances/{id}");
        let mut admin = f.admin().await;
        eventually("the addon is Ready", CONVERGE, async || {
            admin.get(&path).await.unwrap()["phase"] == "Ready"
        })
        .await;
        let sets: Api<k8s_openapi::api::apps::v1::StatefulSet> =
            Api::namespaced(f.workload("east").await, &project);
        let labelled = ListParams::default().labels(&format!("kubenest.io/addon-id={id}"));
        let set = sets.list(&labelled).await.unwrap().items.remove(0);
        let set_name = set.metadata.name.unwrap();
        hold(&sets, &set_name, true).await;

        admin.delete(&path).await.unwrap();
        let mut failed = Value::Null;
        eventually("the addon's deletion fails", CONVERGE, async || {
            f.check_running();
            failed = admin.get(&path).await.unwrap();
            failed["phase"] == "Failed"
        })
        .await;
        let text = failed.to_string();
        assert!(
            text.contains("did not finish within 15s")
                && text.contains(&format!("StatefulSet/{set_name} (finalizers: {HOLD})")),
            "{failed}"
        );
        let mut alerts = Vec::new();
        eventually(
            "the deletion's alert opens",
            Duration::from_secs(30),
            async || {
                alerts = alerts_of(&mut admin, &org, "deletion_deadline_exceeded", &id).await;
                alerts.iter().any(|a| a["state"] == "open")
            },
        )
        .await;
        assert_eq!(alerts[0]["subject_kind"], "addon", "{alerts:?}");

        hold(&sets, &set_name, false).await;
        eventually("the addon is gone", CONVERGE, async || {
            admin
                .get(&path)
                .await
                .is_err_and(|e| e.status() == Some(404))
        })
        .await;
    });
}

#[test]
fn a_failed_app_rolled_back_to_its_first_deployment_runs_it_on_the_cluster() {
    run(async {
        let mut f = fixture().await;
        let (project, namespace) = f.project("east", "back").await;
        let mut admin = f.admin().await;
        let id = create_with_deadline(&mut admin, &project, "b-web", "nginx:1.27", 15).await;
        let expect = Expect {
            app_id: &id,
            name: "b-web",
            image: "nginx:1.27",
            operations: &["create"],
        };
        converged(&mut f, "east", &namespace, &[expect]).await;
        let path = format!("/api/v1/apps/{id}");
        let first = admin.get(&path).await.unwrap()["revision"].clone();

        common::change_image(&mut admin, &id, NEVER_READY).await;
        eventually("the new revision fails", CONVERGE, async || {
            f.check_running();
            let app = admin.get(&path).await.unwrap();
            app["phase"] == "Failed" && app["revision"] != first
        })
        .await;

        let history = admin.get(&format!("{path}/deployments")).await.unwrap();
        let original = history
            .as_array()
            .unwrap()
            .iter()
            .find(|d| d["operation"] == "create")
            .unwrap()["id"]
            .clone();
        admin
            .post(
                &format!("{path}/rollback"),
                &json!({"deployment_id": original}),
            )
            .await
            .unwrap();
        // The agent applies the first spec again (hence its revision) and it runs.
        let mut app = Value::Null;
        eventually("the rolled-back App runs", CONVERGE, async || {
            f.check_running();
            app = admin.get(&path).await.unwrap();
            app["phase"] == "Running" && app["observed_revision"] == first
        })
        .await;
        assert_eq!(app["revision"], first, "{app}");
        let history = admin.get(&format!("{path}/deployments")).await.unwrap();
        assert_eq!(
            (&history[0]["operation"], &history[0]["result"]),
            (&json!("rollback"), &json!("succeeded")),
            "{history}"
        );
        let deployments: Api<Deployment> = Api::namespaced(f.workload("east").await, &namespace);
        let live = deployments.get("b-web-web").await.unwrap();
        assert_eq!(image_of(&live), "nginx:1.27");
        let status = live.status.unwrap();
        assert_eq!(
            (
                status.ready_replicas,
                status.updated_replicas,
                status.replicas
            ),
            (Some(1), Some(1), Some(1)),
            "only pods of the first spec, ready"
        );
    });
}

/// The image of `deployment`'s first container.
fn image_of(deployment: &Deployment) -> String {
    let pod = deployment
        .spec
        .as_ref()
        .and_then(|s| s.template.spec.as_ref());
    pod.and_then(|p| p.containers.first())
        .and_then(|c| c.image.clone())
        .unwrap_or_default()
}
