//! Every failure has a way out through the API: an App that does not converge takes a rollback,
//! a change of its failing components, a pause and a delete, and refuses changes that pile onto
//! it with a 409 listing those ways out; a failed standalone addon likewise. Against a real
//! management cluster, real PostgreSQL and the real controllers (the status the agent would
//! report is written the way the status router writes it).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use common::{Client, agent_took_namespace, cluster, org, plane, project};
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
    answer["error"]["ways_out"]
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
        assert_eq!(answer["error"]["code"], "blocked_sync", "{answer}");
        let message = answer["error"]["message"].as_str().unwrap();
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
    assert_eq!(answer["error"]["code"], "addon_failed");
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
