//! Every failure has a way out through the API: an App that does not converge takes a rollback,
//! a change of its failing components, a pause and a delete, and refuses changes that pile onto
//! it with a 409 listing those ways out; a failed standalone addon likewise. Against a real
//! management cluster, real PostgreSQL and the real controllers (the status the agent would
//! report is written the way the status router writes it).

use crate::common;

use crate::common::{Client, agent_took_namespace, cluster, org, plane, project};
use kube::api::{Api, Patch, PatchParams};
use kubenest_crds::App;
use kubenest_crds::addon::{AddonDefinition, AddonInstance};
use reqwest::Method;
use serde_json::{Value, json};

/// What the status router writes for a drift report of `blocked_sync` on component `web`.
async fn report_blocked(kube: &kube::Client, org: &str, app: &str) {
    let api: Api<App> = Api::namespaced(kube.clone(), &format!("org-{org}"));
    let patch = json!({"status": {"sync": {"driftDetected": true, "driftClass": "blocked_sync",
        "driftDetails": [{"resource": format!("Deployment/{app}-web"),
                          "field": "status.conditions[Progressing]",
                          "desired": "NewReplicaSetAvailable",
                          "observed": "ProgressDeadlineExceeded"}]}}});
    api.patch_status(app, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .unwrap();
}

fn components(web: &str, worker: &str) -> Value {
    json!([
        {"name": "web", "type": "workload",
         "workload_spec": {"image": web, "replicas": 1, "port": 8080}},
        {"name": "worker", "type": "workload", "workload_spec": {"image": worker, "replicas": 1}},
    ])
}

/// The actions of a 409's `ways_out`, with the components of `patch`.
fn ways(answer: &Value) -> Vec<(String, String, String, Value)> {
    answer["ways_out"]
        .as_array()
        .unwrap_or_else(|| panic!("no ways_out in {answer}"))
        .iter()
        .map(|w| {
            (
                w["action"].as_str().unwrap().to_owned(),
                w["method"].as_str().unwrap().to_owned(),
                w["path"].as_str().unwrap().to_owned(),
                w["components"].clone(),
            )
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_blocked_app_takes_its_ways_out_and_refuses_what_piles_on_naming_them() {
    let admin = Client::admin().await;
    let org = org(&admin, "exits", json!([])).await;
    let registration = cluster(&admin, &org).await;
    let project = project(&admin, &org, registration["cluster_id"].as_str().unwrap()).await;
    let kube = plane().kube().await;
    agent_took_namespace(&admin, &kube, &org, &project).await;
    let created = admin
        .expect(
            Method::POST,
            "/api/v1/apps",
            Some(json!({"project_id": project["id"], "name": "shop",
                        "components": components("shop:1", "jobs:1")})),
            202,
        )
        .await;
    let id = created["id"].as_str().unwrap().to_owned();
    let path = format!("/api/v1/apps/{id}");
    let mut first = String::new();
    common::eventually("the first deployment is recorded", 30, async || {
        let history = admin.get(&format!("{path}/deployments")).await.1;
        match history.as_array().and_then(|h| h.last()) {
            Some(row) => {
                first = row["id"].as_str().unwrap().to_owned();
                true
            }
            None => false,
        }
    })
    .await;
    report_blocked(&kube, &org, "shop").await;

    // Changes that do not touch the failing component `web` pile on: refused, ways listed.
    for (method, target, body) in [
        (
            Method::PATCH,
            path.clone(),
            Some(json!({"progress_deadline_seconds": 60})),
        ),
        (
            Method::PATCH,
            path.clone(),
            Some(json!({"components": components("shop:1", "jobs:2")})),
        ),
        (Method::POST, format!("{path}/redeploy"), None),
        (
            Method::PUT,
            format!("{path}/components/worker/secret"),
            Some(json!({"values": {"TOKEN": "x"}})),
        ),
    ] {
        let (status, answer) = admin.call(method.clone(), &target, body).await;
        assert_eq!(status, 409, "{method} {target}: {answer}");
        assert_eq!(answer["code"], "blocked_sync", "{answer}");
        let message = answer["detail"].as_str().unwrap();
        assert!(message.contains("ProgressDeadlineExceeded"), "{message}");
        assert_eq!(
            ways(&answer),
            [
                (
                    "rollback".into(),
                    "POST".into(),
                    format!("{path}/rollback"),
                    Value::Null
                ),
                ("patch".into(), "PATCH".into(), path.clone(), json!(["web"])),
                (
                    "pause".into(),
                    "POST".into(),
                    format!("{path}/pause"),
                    Value::Null
                ),
                ("delete".into(), "DELETE".into(), path.clone(), Value::Null),
            ],
            "{method} {target}"
        );
    }

    // The ways out pass, each while the App is still blocked.
    admin
        .expect(
            Method::POST,
            &format!("{path}/rollback"),
            Some(json!({"deployment_id": first})),
            202,
        )
        .await;
    report_blocked(&kube, &org, "shop").await;
    let fixed = admin
        .expect(
            Method::PATCH,
            &path,
            Some(json!({"components": components("shop:2", "jobs:1")})),
            202,
        )
        .await;
    assert_eq!(fixed["components"][0]["workload_spec"]["image"], "shop:2");
    report_blocked(&kube, &org, "shop").await;
    let paused = admin
        .expect(Method::POST, &format!("{path}/pause"), None, 202)
        .await;
    assert_eq!(paused["paused"], true);
    report_blocked(&kube, &org, "shop").await;
    // Paused and still blocked: resuming piles on again, and pause is no longer a way out.
    let (status, answer) = admin
        .call(Method::POST, &format!("{path}/resume"), None)
        .await;
    assert_eq!(status, 409, "{answer}");
    let actions: Vec<String> = ways(&answer).into_iter().map(|w| w.0).collect();
    assert_eq!(actions, ["rollback", "patch", "delete"]);
    let deleted = admin.expect(Method::DELETE, &path, None, 202).await;
    assert_eq!(deleted["state"], "deleting", "{deleted}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_standalone_addon_takes_a_rollback_or_a_real_change_and_refuses_an_empty_one() {
    let kube = plane().kube().await;
    Api::<AddonDefinition>::namespaced(kube.clone(), common::SYSTEM)
        .patch(
            "memcached",
            &PatchParams::apply("tests").force(),
            &Patch::Apply(json!({
                "apiVersion": "kubenest.io/v1alpha1", "kind": "AddonDefinition",
                "metadata": {"name": "memcached"},
                "spec": {"displayName": "Memcached",
                    "chart": {"repository": "charts/addons", "name": "memcached",
                              "version": "1.0.0"},
                    "exports": {"host": "{release}.{namespace}.svc"}}
            })),
        )
        .await
        .unwrap();
    let admin = Client::admin().await;
    let org = org(&admin, "addon-exits", json!([])).await;
    let registration = cluster(&admin, &org).await;
    let project = project(&admin, &org, registration["cluster_id"].as_str().unwrap()).await;
    agent_took_namespace(&admin, &kube, &org, &project).await;
    let created = admin
        .expect(
            Method::POST,
            "/api/v1/addon-instances",
            Some(json!({"project_id": project["id"], "name": "cache",
                        "definition": "memcached", "values": {"memory": "64"}})),
            202,
        )
        .await;
    let id = created["id"].as_str().unwrap().to_owned();
    let path = format!("/api/v1/addon-instances/{id}");
    let api: Api<AddonInstance> = Api::namespaced(kube, &format!("org-{org}"));
    let mut revision = 0;
    common::eventually("revision 1 is recorded", 90, async || {
        let addon = api.get("cache").await.unwrap();
        revision = addon.status.and_then(|s| s.revision).unwrap_or(0);
        revision >= 1
    })
    .await;
    // What the status router writes when the agent reports the install failed.
    let failed = json!({"status": {"observedRevision": revision, "clusterPhase": "Failed",
                                   "message": "the chart's pods never became ready"}});
    api.patch_status("cache", &PatchParams::default(), &Patch::Merge(&failed))
        .await
        .unwrap();
    common::eventually("the addon is Failed", 30, async || {
        admin.get(&path).await.1["phase"] == "Failed"
    })
    .await;

    let (status, answer) = admin
        .call(
            Method::PATCH,
            &path,
            Some(json!({"values": {"memory": "64"}})),
        )
        .await;
    assert_eq!(status, 409, "{answer}");
    assert_eq!(answer["code"], "addon_failed");
    let actions: Vec<(String, String)> = ways(&answer).into_iter().map(|w| (w.0, w.2)).collect();
    assert_eq!(
        actions,
        [
            ("rollback".into(), format!("{path}/rollback")),
            ("patch".into(), path.clone()),
            ("delete".into(), path.clone()),
        ]
    );
    admin
        .expect(
            Method::POST,
            &format!("{path}/rollback"),
            Some(json!({"revision": revision})),
            202,
        )
        .await;
    admin
        .expect(
            Method::PATCH,
            &path,
            Some(json!({"values": {"memory": "128"}})),
            202,
        )
        .await;
    let deleted = admin.expect(Method::DELETE, &path, None, 202).await;
    assert_eq!(deleted["state"], "deleting", "{deleted}");
}

/// Makes cluster `id` (named `name`, in `org`) connected the way the hub and the status router
/// do (a live session Lease and a fresh heartbeat), or disconnected again.
async fn set_connected(kube: &kube::Client, org: &str, name: &str, id: &str, connected: bool) {
    use k8s_openapi::api::coordination::v1::Lease;
    let leases: Api<Lease> = Api::namespaced(kube.clone(), common::SYSTEM);
    let lease = kubenest_contracts::names::lease::name(id);
    if connected {
        let renewed = chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Micros, true);
        let body = json!({"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
            "metadata": {"name": lease},
            "spec": {"renewTime": renewed, "leaseDurationSeconds": 3600,
                     "holderIdentity": "tests"}});
        leases
            .patch(
                &lease,
                &PatchParams::apply("tests").force(),
                &Patch::Apply(&body),
            )
            .await
            .unwrap();
    } else {
        let _ = leases.delete(&lease, &Default::default()).await;
    }
    let clusters: Api<kubenest_crds::cluster::Cluster> =
        Api::namespaced(kube.clone(), &format!("org-{org}"));
    let state = if connected {
        "connected"
    } else {
        "disconnected"
    };
    let heartbeat = chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
    let patch = json!({"status": {"state": state, "lastHeartbeat": heartbeat}});
    clusters
        .patch_status(name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn forced_removal_is_refused_while_the_agent_answers_or_git_keeps_the_object() {
    let admin = Client::admin().await;
    let member = common::user(&admin, "fmember").await;
    let viewer = common::user(&admin, "fviewer").await;
    let org = org(
        &admin,
        "force",
        json!([{"user": member, "role": "member"}, {"user": viewer, "role": "viewer"}]),
    )
    .await;
    let registration = cluster(&admin, &org).await;
    let cluster_id = registration["cluster_id"].as_str().unwrap().to_owned();
    let cluster_name = admin
        .expect(
            Method::GET,
            &format!("/api/v1/clusters/{cluster_id}"),
            None,
            200,
        )
        .await["name"]
        .as_str()
        .unwrap()
        .to_owned();
    let project = project(&admin, &org, &cluster_id).await;
    let project_id = project["id"].as_str().unwrap().to_owned();
    let kube = plane().kube().await;
    agent_took_namespace(&admin, &kube, &org, &project).await;
    let app = admin
        .expect(
            Method::POST,
            "/api/v1/apps",
            Some(common::web_app(&project_id, "kept", "shop:1")),
            202,
        )
        .await;
    let app_id = app["id"].as_str().unwrap().to_owned();
    let app_path = format!("/api/v1/apps/{app_id}");
    let force = |path: &str| format!("{path}?force=true");
    let project_path = format!("/api/v1/projects/{project_id}");
    let cluster_path = format!("/api/v1/clusters/{cluster_id}");

    // Only admins force, whatever the cluster's state.
    for who in [&member, &viewer] {
        let client = Client::login(0, who, common::PASSWORD).await;
        let (status, body) = client.call(Method::DELETE, &force(&app_path), None).await;
        assert_eq!(status, 403, "{who}: {body}");
    }

    // While the agent is connected nothing is forced: the ordinary deletion will be confirmed.
    set_connected(&kube, &org, &cluster_name, &cluster_id, true).await;
    common::eventually("the cluster is connected", 30, async || {
        admin.get(&cluster_path).await.1["state"] == "connected"
    })
    .await;
    for path in [&app_path, &project_path, &cluster_path] {
        let refused = admin.expect(Method::DELETE, &force(path), None, 409).await;
        assert_eq!(refused["code"], "agent_connected", "{path}: {refused}");
        let message = refused["detail"].as_str().unwrap();
        assert!(
            message.contains(&cluster_name) && message.contains("without ?force=true"),
            "{message}"
        );
    }
    let still = admin.expect(Method::GET, &app_path, None, 200).await;
    assert_ne!(still["phase"], "Deleting", "{still}");

    // The agent is gone, but the App is kept in Git: its engine would bring it back.
    set_connected(&kube, &org, &cluster_name, &cluster_id, false).await;
    common::eventually("the cluster is disconnected", 30, async || {
        admin.get(&cluster_path).await.1["state"] == "disconnected"
    })
    .await;
    let apps: Api<App> = Api::namespaced(kube.clone(), &format!("org-{org}"));
    let label = |value: Value| json!({"metadata": {"labels": {"kubenest.io/managed-by": value}}});
    apps.patch(
        "kept",
        &PatchParams::default(),
        &Patch::Merge(&label(json!("gitops"))),
    )
    .await
    .unwrap();
    for path in [&app_path, &project_path, &cluster_path] {
        let refused = admin.expect(Method::DELETE, &force(path), None, 409).await;
        assert_eq!(refused["code"], "gitops_owned", "{path}: {refused}");
        assert!(
            refused["detail"].as_str().unwrap().contains("kept in Git"),
            "{refused}"
        );
    }
    admin.expect(Method::GET, &app_path, None, 200).await;
    admin.expect(Method::GET, &project_path, None, 200).await;

    // Out of Git and with its agent gone, the App is removed by force, then audited.
    apps.patch(
        "kept",
        &PatchParams::default(),
        &Patch::Merge(&label(Value::Null)),
    )
    .await
    .unwrap();
    // Its dry run judges the removal whole and answers what it would remove, keeping all.
    let tried = admin
        .expect(
            Method::DELETE,
            &format!("{}&dryRun=true", force(&cluster_path)),
            None,
            200,
        )
        .await;
    assert_eq!(
        tried["removed"],
        json!([
            "app/kept",
            format!("project/{}", project["name"].as_str().unwrap()),
            format!("cluster/{cluster_name}")
        ]),
        "{tried}"
    );
    admin.expect(Method::GET, &app_path, None, 200).await;
    admin.expect(Method::GET, &cluster_path, None, 200).await;
    let removed = admin
        .expect(Method::DELETE, &force(&app_path), None, 200)
        .await;
    assert_eq!(removed["removed"], json!(["app/kept"]), "{removed}");
    common::eventually("the App is gone", 30, async || {
        apps.get_opt("kept").await.unwrap().is_none()
    })
    .await;
    let audit = admin
        .expect(Method::GET, &format!("/api/v1/orgs/{org}/audit"), None, 200)
        .await;
    let forced: Vec<&Value> = audit["items"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["action"] == "app.force_delete")
        .collect();
    assert_eq!(forced.len(), 1, "{audit}");
    assert_eq!(forced[0]["resource_name"], "kept", "{audit}");
    assert_eq!(forced[0]["actor"], common::ADMIN, "{audit}");
}
