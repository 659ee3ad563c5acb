//! The faults of `system.rs` against everything else that has intent: standalone addons
//! (installed, changed, deleted), projects (created, deleted) and App deletions, made while an
//! agent's link is cut, or while a hub replica, the active controllers and an agent are killed.
//! After each, every change is on its cluster once: an addon's history holds one revision per
//! change, all succeeded, and its StatefulSet was given one spec per revision (its
//! `metadata.generation`); what was deleted is gone from the API and from the cluster; a project
//! made meanwhile is Ready with its namespace.

use std::time::Duration;

use k8s_openapi::api::apps::v1::StatefulSet;
use k8s_openapi::api::core::v1::Namespace;
use kube::api::{Api, ListParams};
use kubenest_cli::api::Client;
use kubenest_testkit::LinkMode;
use serde_json::{Value, json};

use crate::common::{CONVERGE, Expect, Fixture, converged, create, eventually, fixture, gone, run};

/// Redis without a volume (the kwok clusters bind none), with `memory` requested.
fn redis(memory: &str) -> Value {
    json!({"persistence": {"enabled": false}, "resources": {"requests": {"memory": memory}}})
}

/// Installs a standalone Redis named `name` in the project; returns its id.
async fn install(admin: &mut Client, project_id: &str, name: &str) -> String {
    let body = json!({"project_id": project_id, "name": name, "definition": "redis",
                      "values": redis("64Mi")});
    let addon = admin.post("/api/v1/addon-instances", &body).await.unwrap();
    addon["id"].as_str().unwrap().to_owned()
}

async fn change_memory(admin: &mut Client, id: &str, memory: &str) {
    let path = format!("/api/v1/addon-instances/{id}");
    admin
        .patch(&path, &json!({"values": redis(memory)}))
        .await
        .unwrap();
}

/// The addon's StatefulSet on the cluster, if there is one.
async fn statefulset(f: &Fixture, cluster: &str, namespace: &str, id: &str) -> Option<StatefulSet> {
    let sets: Api<StatefulSet> = Api::namespaced(f.workload(cluster).await, namespace);
    let labelled = ListParams::default().labels(&format!("kubenest.io/addon-id={id}"));
    sets.list(&labelled).await.unwrap().items.pop()
}

/// Waits until the addon is Ready at its latest revision requesting `memory` on the cluster,
/// then checks its history holds exactly `operations` (newest first), all succeeded, and that
/// its StatefulSet was given one spec per revision.
async fn addon_converged(
    f: &mut Fixture,
    cluster: &str,
    namespace: &str,
    id: &str,
    memory: &str,
    operations: &[&str],
) {
    let mut admin = f.admin().await;
    let path = format!("/api/v1/addon-instances/{id}");
    let mut last = Value::Null;
    eventually(&format!("addon {id} converged"), CONVERGE, async || {
        f.check_running();
        let addon = admin.get(&path).await.unwrap();
        let live = statefulset(f, cluster, namespace, id).await;
        let requested = live.as_ref().and_then(|s| {
            let spec = s.spec.as_ref()?.template.spec.as_ref()?;
            let requests = spec.containers[0].resources.as_ref()?.requests.as_ref()?;
            Some(requests.get("memory")?.0.clone())
        });
        let settled = addon["phase"] == "Ready"
            && addon["observed_revision"] == addon["revision"]
            && requested.as_deref() == Some(memory);
        last = json!({"addon": addon, "live_memory": requested});
        settled
    })
    .await;
    let mut revisions = Value::Null;
    eventually("every revision has a result", CONVERGE, async || {
        revisions = admin.get(&path).await.unwrap()["revisions"].clone();
        revisions
            .as_array()
            .is_some_and(|r| r.iter().all(|d| d["result"] != "pending"))
    })
    .await;
    let seen: Vec<(&str, &str)> = revisions
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            (
                r["operation"].as_str().unwrap(),
                r["result"].as_str().unwrap(),
            )
        })
        .collect();
    let want: Vec<(&str, &str)> = operations.iter().map(|o| (*o, "succeeded")).collect();
    assert_eq!(seen, want, "revisions of {id}: {revisions} (last {last})");
    let live = statefulset(f, cluster, namespace, id).await.unwrap();
    assert_eq!(
        live.metadata.generation,
        Some(operations.len() as i64),
        "addon {id}: its StatefulSet's generation counts the specs applied to it"
    );
}

/// Waits until the addon is gone from the API and its StatefulSet from the cluster.
async fn addon_gone(f: &Fixture, cluster: &str, namespace: &str, id: &str) {
    let mut admin = f.admin().await;
    eventually(
        &format!("addon {id} deleted everywhere"),
        CONVERGE,
        async || {
            admin
                .get(&format!("/api/v1/addon-instances/{id}"))
                .await
                .is_err_and(|e| e.status() == Some(404))
                && statefulset(f, cluster, namespace, id).await.is_none()
        },
    )
    .await;
}

/// Waits until the project is gone from the API and its namespace from the cluster.
async fn project_gone(f: &Fixture, cluster: &str, id: &str, namespace: &str) {
    let mut admin = f.admin().await;
    let namespaces: Api<Namespace> = Api::all(f.workload(cluster).await);
    eventually(
        &format!("project {namespace} deleted everywhere"),
        CONVERGE,
        async || {
            admin
                .get(&format!("/api/v1/projects/{id}"))
                .await
                .is_err_and(|e| e.status() == Some(404))
                && namespaces.get_opt(namespace).await.unwrap().is_none()
        },
    )
    .await;
}

/// Waits until the project is Ready and its namespace is on the cluster.
async fn project_ready(f: &Fixture, cluster: &str, id: &str, namespace: &str) {
    let mut admin = f.admin().await;
    let namespaces: Api<Namespace> = Api::all(f.workload(cluster).await);
    eventually(
        &format!("project {namespace} Ready"),
        CONVERGE,
        async || {
            admin.get(&format!("/api/v1/projects/{id}")).await.unwrap()["phase"] == "Ready"
                && namespaces.get_opt(namespace).await.unwrap().is_some()
        },
    )
    .await;
}

/// Asks for a project on `cluster` without waiting for it; returns (id, name).
async fn ask_project(
    f: &Fixture,
    admin: &mut Client,
    cluster: &str,
    prefix: &str,
) -> (String, String) {
    let name = format!(
        "{prefix}-{}",
        &uuid::Uuid::new_v4().simple().to_string()[..6]
    );
    let org = f.system.options().org.clone();
    let body = json!({"name": name, "cluster_id": f.cluster_id(cluster)});
    let project = admin
        .post(&format!("/api/v1/orgs/{org}/projects"), &body)
        .await
        .unwrap();
    (project["id"].as_str().unwrap().to_owned(), name)
}

#[test]
fn addon_project_and_deletion_changes_made_while_a_link_is_cut_arrive_once() {
    run(async {
        let mut f = fixture().await;
        let (project, namespace) = f.project("west", "cutaddons").await;
        let (emptied, emptied_ns) = f.project("west", "cutempty").await;
        let mut admin = f.admin().await;
        let kept = install(&mut admin, &project, "cut-kept").await;
        let dropped = install(&mut admin, &project, "cut-dropped").await;
        let app = create(&mut admin, &project, "cut-app", "nginx:1.27").await;
        addon_converged(&mut f, "west", &namespace, &kept, "64Mi", &["install"]).await;
        addon_converged(&mut f, "west", &namespace, &dropped, "64Mi", &["install"]).await;
        let running = Expect {
            app_id: &app,
            name: "cut-app",
            image: "nginx:1.27",
            operations: &["create"],
        };
        converged(&mut f, "west", &namespace, &[running]).await;

        f.system.set_link("west", LinkMode::Drop).unwrap();
        f.cluster_state("west", "disconnected", Duration::from_secs(60))
            .await;
        change_memory(&mut admin, &kept, "96Mi").await;
        let added = install(&mut admin, &project, "cut-added").await;
        for path in [
            format!("/api/v1/addon-instances/{dropped}"),
            format!("/api/v1/apps/{app}"),
            format!("/api/v1/projects/{emptied}"),
        ] {
            admin.delete(&path).await.unwrap();
        }
        let (made, made_ns) = ask_project(&f, &mut admin, "west", "cutmade").await;
        tokio::time::sleep(Duration::from_secs(15)).await;
        f.check_running();
        f.system.set_link("west", LinkMode::Pass).unwrap();

        addon_converged(
            &mut f,
            "west",
            &namespace,
            &kept,
            "96Mi",
            &["values", "install"],
        )
        .await;
        addon_converged(&mut f, "west", &namespace, &added, "64Mi", &["install"]).await;
        addon_gone(&f, "west", &namespace, &dropped).await;
        gone(&f, "west", &namespace, &app, "cut-app").await;
        project_gone(&f, "west", &emptied, &emptied_ns).await;
        project_ready(&f, "west", &made, &made_ns).await;
    });
}

#[test]
fn addon_and_project_changes_survive_a_hub_a_controllers_and_an_agent_killed() {
    run(async {
        let mut f = fixture().await;
        let (project, namespace) = f.project("east", "killaddons").await;
        let (emptied, emptied_ns) = f.project("east", "killempty").await;
        let mut admin = f.admin().await;
        let kept = install(&mut admin, &project, "kill-kept").await;
        let dropped = install(&mut admin, &project, "kill-dropped").await;
        addon_converged(&mut f, "east", &namespace, &kept, "64Mi", &["install"]).await;
        addon_converged(&mut f, "east", &namespace, &dropped, "64Mi", &["install"]).await;

        // The hub replica carrying east's session dies as an addon is changed and one added.
        let hub = f.hub_holding("east").await;
        change_memory(&mut admin, &kept, "96Mi").await;
        let added = install(&mut admin, &project, "kill-added").await;
        f.system.hubs[hub].service.kill();
        tokio::time::sleep(Duration::from_secs(3)).await;
        f.system.hubs[hub].service.start().unwrap();

        // The active controllers die as an addon and a project are deleted and one is asked.
        let mgmt = f.env.management().unwrap().client().await.unwrap();
        let leader = f.system.leader(&mgmt).await.unwrap().expect("a leader");
        admin
            .delete(&format!("/api/v1/addon-instances/{dropped}"))
            .await
            .unwrap();
        admin
            .delete(&format!("/api/v1/projects/{emptied}"))
            .await
            .unwrap();
        let (made, made_ns) = ask_project(&f, &mut admin, "east", "killmade").await;
        f.system.controllers[leader].kill();
        eventually("the standby leads", Duration::from_secs(30), async || {
            f.system
                .leader(&mgmt)
                .await
                .unwrap()
                .is_some_and(|l| l != leader)
        })
        .await;
        f.system.controllers[leader].start().unwrap();
        let first = ["values", "install"];
        addon_converged(&mut f, "east", &namespace, &kept, "96Mi", &first).await;

        // The agent dies while a second change of the kept addon waits.
        f.system.agent("east").unwrap().service.kill();
        change_memory(&mut admin, &kept, "128Mi").await;
        tokio::time::sleep(Duration::from_secs(3)).await;
        f.system.agent("east").unwrap().service.start().unwrap();

        let second = ["values", "values", "install"];
        addon_converged(&mut f, "east", &namespace, &kept, "128Mi", &second).await;
        addon_converged(&mut f, "east", &namespace, &added, "64Mi", &["install"]).await;
        addon_gone(&f, "east", &namespace, &dropped).await;
        project_gone(&f, "east", &emptied, &emptied_ns).await;
        project_ready(&f, "east", &made, &made_ns).await;
    });
}
