//! The CRDs: committed YAML matches the code, and a real kube-apiserver serves them with the
//! validation, status subresource and printer columns they declare.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // a test fails by panicking

use std::path::PathBuf;
use std::time::Duration;

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, DynamicObject, Patch, PatchParams, PostParams};
use kube::core::{ApiResource, GroupVersionKind};
use kube::runtime::wait::{await_condition, conditions};
use kube::{Client, ResourceExt};
use serde_json::{Value, json};

// Under `tests/crds/` so cargo does not build each as a test binary of its own.
#[path = "crds/gitops.rs"]
mod gitops;
#[path = "crds/shape.rs"]
mod shape;

#[test]
fn committed_yaml_matches_the_code() {
    // At run time: cargo reuses built tests across clone locations, so a compile-time path can
    // point at a clone that is gone.
    let dir = std::env::var_os("CARGO_MANIFEST_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")))
        .join("yaml");
    let regenerate = "regenerate with `cargo run -p kubenest-crds --bin crdgen`";
    let files = kubenest_crds::yaml_files().unwrap();
    for (name, text) in &files {
        let committed = std::fs::read_to_string(dir.join(name))
            .unwrap_or_else(|_| panic!("crds/yaml/{name} is missing; {regenerate}"));
        assert!(
            committed == *text,
            "crds/yaml/{name} differs from the code; {regenerate}"
        );
    }
    assert_eq!(
        std::fs::read_dir(&dir).unwrap().count(),
        files.len(),
        "stale files; {regenerate}"
    );
}

async fn install(client: &Client) {
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    let apply = PatchParams::apply("kubenest-crds-test").force();
    for crd in kubenest_crds::all() {
        let name = crd.name_any();
        crds.patch(&name, &apply, &Patch::Apply(&crd))
            .await
            .unwrap();
        tokio::time::timeout(
            Duration::from_secs(30),
            await_condition(crds.clone(), &name, conditions::is_crd_established()),
        )
        .await
        .unwrap()
        .unwrap();
    }
}

fn api(client: &Client, kind: &str, namespace: Option<&str>) -> Api<DynamicObject> {
    let resource = ApiResource::from_gvk(&GroupVersionKind::gvk("kubenest.io", "v1alpha1", kind));
    match namespace {
        Some(ns) => Api::namespaced_with(client.clone(), ns, &resource),
        None => Api::all_with(client.clone(), &resource),
    }
}

fn object(kind: &str, name: &str, spec: Value) -> DynamicObject {
    serde_json::from_value(json!({
        "apiVersion": "kubenest.io/v1alpha1", "kind": kind, "metadata": { "name": name }, "spec": spec
    }))
    .unwrap()
}

/// Creating `spec` must fail validation with a message containing `expected`.
async fn refused(api: &Api<DynamicObject>, kind: &str, spec: Value, expected: &str) {
    let name = format!("bad-{}", &uuid::Uuid::new_v4().simple().to_string()[..8]);
    match api
        .create(&PostParams::default(), &object(kind, &name, spec))
        .await
    {
        Err(kube::Error::Api(e)) => {
            assert_eq!(e.code, 422, "{e:?}");
            assert!(
                e.message.contains(expected),
                "expected {expected:?} in {:?}",
                e.message
            );
        }
        other => panic!("{kind} was not refused ({expected}): {other:?}"),
    }
}

fn app_spec() -> Value {
    json!({
        "project": "storefront",
        "components": [
            { "name": "db", "addon": { "definition": "postgres", "values": { "persistence": { "size": "1Gi" } } } },
            { "name": "web", "workload": {
                "image": "ghcr.example/shop/web:1.2.3", "replicas": 2, "port": 8080,
                "env": [
                    { "name": "LOG_LEVEL", "value": "info" },
                    { "name": "DATABASE_URL", "exportRef": { "component": "db", "export": "dsn" } }
                ],
                "ingress": { "host": "shop.example.com" }
            } }
        ]
    })
}

#[tokio::test]
async fn every_kind_is_served_and_keeps_what_it_was_given() {
    let mgmt = kubenest_testkit::shared_management().await.unwrap();
    let ns = mgmt.test_namespace("crds").await.unwrap();
    let client = ns.client();
    install(&client).await;

    let org = format!("acme-{}", &uuid::Uuid::new_v4().simple().to_string()[..6]);
    api(&client, "Organization", None)
        .create(
            &PostParams::default(),
            &object(
                "Organization",
                &org,
                json!({
                    "displayName": "ACME", "members": [{ "user": "alice", "role": "admin" }]
                }),
            ),
        )
        .await
        .unwrap();
    let namespaced = [
        ("Cluster", json!({ "displayName": "east" })),
        (
            "Project",
            json!({ "cluster": "east", "namespace": "storefront" }),
        ),
        ("App", app_spec()),
        (
            "AddonDefinition",
            json!({
                "displayName": "PostgreSQL",
                "chart": { "repository": "charts/addons/postgres", "name": "postgres", "version": "1.4.0" },
                "exports": { "dsn": "postgres://{user}:{password}@{host}:{port}/{database}" },
                "defaultValues": { "persistence": { "size": "1Gi" } }
            }),
        ),
        (
            "AddonInstance",
            json!({ "project": "storefront", "definition": "redis", "values": { "maxmemory": "64mb" } }),
        ),
        (
            "StackTemplate",
            json!({
                "scope": "global",
                "parameters": [{ "name": "image", "type": "string", "required": true }],
                "components": [{ "name": "web", "workload": { "image": "{{ image }}" } }]
            }),
        ),
    ];
    for (kind, spec) in namespaced {
        let created = api(&client, kind, Some(ns.name()))
            .create(&PostParams::default(), &object(kind, "one", spec))
            .await
            .unwrap_or_else(|e| panic!("{kind} refused: {e}"));
        assert!(created.data["spec"].is_object(), "{kind}");
    }

    // Defaults applied, free-form values kept.
    let cluster = api(&client, "Cluster", Some(ns.name()))
        .get("one")
        .await
        .unwrap();
    assert_eq!(cluster.data["spec"]["tokenVersion"], 1);
    assert_eq!(cluster.data["spec"]["provider"], "existing");
    let app = api(&client, "App", Some(ns.name()))
        .get("one")
        .await
        .unwrap();
    assert_eq!(
        app.data["spec"]["components"][0]["addon"]["values"]["persistence"]["size"],
        "1Gi"
    );
    assert_eq!(app.data["spec"]["progressDeadlineSeconds"], 600);
    let template = api(&client, "StackTemplate", Some(ns.name()))
        .get("one")
        .await
        .unwrap();
    assert_eq!(
        template.data["spec"]["components"][0]["workload"]["image"],
        "{{ image }}"
    );
}

#[tokio::test]
async fn static_rules_are_enforced_by_the_api_server() {
    let mgmt = kubenest_testkit::shared_management().await.unwrap();
    let ns = mgmt.test_namespace("crd-rules").await.unwrap();
    let client = ns.client();
    install(&client).await;
    let apps = api(&client, "App", Some(ns.name()));

    let mut both = app_spec();
    both["components"][1]["addon"] = json!({ "definition": "redis" });
    refused(&apps, "App", both, "set exactly one of workload or addon").await;

    let mut duplicate = app_spec();
    duplicate["components"][1]["name"] = json!("db");
    // The map list refuses it (`Duplicate value`): no CEL rule is needed.
    refused(&apps, "App", duplicate, "Duplicate value").await;

    let mut env = app_spec();
    env["components"][1]["workload"]["env"][0]["exportRef"] =
        json!({ "component": "db", "export": "dsn" });
    refused(&apps, "App", env, "set exactly one of value or exportRef").await;

    let mut sources = app_spec();
    sources["components"][1]["workload"]["git"] = json!({ "repository": "https://git.example.com/x.git", "ref": "main", "mode": "dockerfile" });
    refused(
        &apps,
        "App",
        sources,
        "set exactly one of image, git or helm",
    )
    .await;

    let mut replicas = app_spec();
    replicas["components"][1]["workload"]["replicas"] = json!(5000);
    refused(&apps, "App", replicas, "replicas").await;

    let projects = api(&client, "Project", Some(ns.name()));
    refused(
        &projects,
        "Project",
        json!({ "cluster": "east", "namespace": "Not_A_Label" }),
        "namespace",
    )
    .await;

    refused(
        &projects,
        "Project",
        json!({ "cluster": "east", "namespace": "p", "progressDeadlineSeconds": 5 }),
        "progressDeadlineSeconds",
    )
    .await;
    let addons = api(&client, "AddonInstance", Some(ns.name()));
    refused(
        &addons,
        "AddonInstance",
        json!({ "project": "p", "definition": "redis", "progressDeadlineSeconds": 100000 }),
        "progressDeadlineSeconds",
    )
    .await;

    // Transition rules: immutable references, token versions only rise.
    let created = projects
        .create(
            &PostParams::default(),
            &object(
                "Project",
                "p",
                json!({ "cluster": "east", "namespace": "p" }),
            ),
        )
        .await
        .unwrap();
    assert_eq!(
        created.data["spec"]["progressDeadlineSeconds"], 600,
        "the deadline defaults like an App's"
    );
    let moved = projects
        .patch(
            "p",
            &PatchParams::default(),
            &Patch::Merge(json!({ "spec": { "namespace": "q" } })),
        )
        .await;
    assert!(
        matches!(moved, Err(kube::Error::Api(e)) if e.message.contains("namespace is immutable"))
    );

    let clusters = api(&client, "Cluster", Some(ns.name()));
    clusters
        .create(
            &PostParams::default(),
            &object("Cluster", "c", json!({ "tokenVersion": 3 })),
        )
        .await
        .unwrap();
    let rotate = Patch::Merge(json!({ "spec": { "tokenVersion": 4 } }));
    clusters
        .patch("c", &PatchParams::default(), &rotate)
        .await
        .unwrap();
    let lower = Patch::Merge(json!({ "spec": { "tokenVersion": 2 } }));
    let lowered = clusters.patch("c", &PatchParams::default(), &lower).await;
    assert!(
        matches!(lowered, Err(kube::Error::Api(e)) if e.message.contains("tokenVersion can only be raised"))
    );
}

#[tokio::test]
async fn status_is_a_subresource_and_kubectl_shows_the_columns() {
    let mgmt = kubenest_testkit::shared_management().await.unwrap();
    let ns = mgmt.test_namespace("crd-status").await.unwrap();
    let client = ns.client();
    install(&client).await;
    let apps = api(&client, "App", Some(ns.name()));
    apps.create(&PostParams::default(), &object("App", "shop", app_spec()))
        .await
        .unwrap();

    let status = json!({ "status": {
        "phase": "Running", "observedRevision": "9f2c41d0",
        "sync": { "driftDetected": true, "driftClass": "recoverable", "driftDetails": [] }
    }});
    apps.patch_status("shop", &PatchParams::default(), &Patch::Merge(&status))
        .await
        .unwrap();
    // A spec write cannot touch status.
    let sneaky = json!({ "spec": { "paused": true }, "status": { "phase": "Failed" } });
    apps.patch("shop", &PatchParams::default(), &Patch::Merge(&sneaky))
        .await
        .unwrap();
    let app = apps.get("shop").await.unwrap();
    assert_eq!(
        (
            app.data["spec"]["paused"].clone(),
            app.data["status"]["phase"].clone()
        ),
        (json!(true), json!("Running"))
    );

    let kubectl = kubenest_testkit::Binaries::locate().unwrap().kubectl;
    let output = std::process::Command::new(kubectl)
        .arg(format!("--kubeconfig={}", mgmt.kubeconfig_path().display()))
        .args(["get", "kapp", "-n", ns.name()])
        .output()
        .unwrap();
    let table = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let header: Vec<&str> = table.lines().next().unwrap().split_whitespace().collect();
    assert_eq!(
        header,
        [
            "NAME", "PROJECT", "PHASE", "REVISION", "DRIFT", "READY", "STATUS", "AGE"
        ]
    );
    let row: Vec<&str> = table.lines().nth(1).unwrap().split_whitespace().collect();
    assert_eq!(
        &row[..5],
        ["shop", "storefront", "Running", "9f2c41d0", "recoverable"]
    );
}
