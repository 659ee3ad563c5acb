//! What GitOps tools and platform engineers see on a real kube-apiserver: `kubectl explain`
//! describes the fields, `kubectl get` shows the Ready condition, and a server-side apply of one
//! component leaves the components another field manager wrote (the map list at work).

use std::process::Command;
use std::time::Duration;

use kube::api::{Patch, PatchParams};
use serde_json::{Value, json};

use super::{api, app_spec, install, object};

/// Runs kubectl against the shared management cluster; its stdout, or why it failed.
fn kubectl(kubeconfig: &std::path::Path, args: &[&str]) -> Result<String, String> {
    let binary = kubenest_testkit::Binaries::locate().unwrap().kubectl;
    let output = Command::new(binary)
        .arg(format!("--kubeconfig={}", kubeconfig.display()))
        .args(args)
        .output()
        .unwrap();
    if output.status.success() {
        Ok(String::from_utf8_lossy(&output.stdout).into_owned())
    } else {
        Err(String::from_utf8_lossy(&output.stderr).into_owned())
    }
}

/// `kubectl explain` of `field`, words joined by single spaces (it wraps descriptions), once
/// the API server publishes the CRD's schema (a few seconds after it is established).
async fn explain(kubeconfig: &std::path::Path, field: &str, expected: &str) -> String {
    let args = ["explain", field, "--api-version=kubenest.io/v1alpha1"];
    let mut last = String::new();
    for _ in 0..60 {
        last = match kubectl(kubeconfig, &args) {
            Ok(text) => text.split_whitespace().collect::<Vec<_>>().join(" "),
            Err(why) => why,
        };
        if last.contains(expected) {
            return last;
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    panic!("kubectl explain {field} never said {expected:?}: {last}");
}

#[tokio::test]
async fn kubectl_explain_describes_the_kinds_and_their_fields() {
    let mgmt = kubenest_testkit::shared_management().await.unwrap();
    let ns = mgmt.test_namespace("crd-explain").await.unwrap();
    install(&ns.client()).await;
    let kubeconfig = mgmt.kubeconfig_path();

    let kind = explain(kubeconfig, "apps", "An App: workload and addon components").await;
    assert!(!kind.contains("Auto-generated"), "{kind}");
    explain(
        kubeconfig,
        "apps.spec.components",
        "The components, keyed by name",
    )
    .await;
    explain(kubeconfig, "apps.spec.components.name", "unique in the App").await;
    explain(
        kubeconfig,
        "apps.status.observedGeneration",
        "last wrote this status",
    )
    .await;
}

/// The cell of `column` in the first row of `table`: kubectl aligns each cell under its
/// header, up to the next header.
fn cell(table: &str, column: &str) -> String {
    let mut lines = table.lines();
    let header = lines.next().unwrap();
    let row = lines.next().unwrap();
    let start = header.find(column).unwrap();
    let after = start + column.len();
    let end = header[after..]
        .find(|c: char| !c.is_whitespace())
        .map_or(row.len(), |gap| (after + gap).min(row.len()));
    row.get(start..end).unwrap_or_default().trim().to_owned()
}

#[tokio::test]
async fn kubectl_get_shows_the_ready_condition() {
    let mgmt = kubenest_testkit::shared_management().await.unwrap();
    let ns = mgmt.test_namespace("crd-ready").await.unwrap();
    let client = ns.client();
    install(&client).await;
    let apps = api(&client, "App", Some(ns.name()));
    apps.create(&Default::default(), &object("App", "shop", app_spec()))
        .await
        .unwrap();
    let status = json!({ "status": {
        "phase": "Running", "observedGeneration": 1,
        "conditions": [{
            "type": "Ready", "status": "True", "reason": "Running",
            "message": "every component is ready", "lastTransitionTime": "2026-01-01T00:00:00Z"
        }]
    }});
    apps.patch_status("shop", &PatchParams::default(), &Patch::Merge(&status))
        .await
        .unwrap();

    let table = kubectl(mgmt.kubeconfig_path(), &["get", "apps", "-n", ns.name()]).unwrap();
    let header: Vec<&str> = table.lines().next().unwrap().split_whitespace().collect();
    assert_eq!(
        header,
        [
            "NAME", "PROJECT", "PHASE", "REVISION", "DRIFT", "READY", "STATUS", "AGE"
        ]
    );
    assert_eq!(cell(&table, "READY"), "True", "{table}");
    assert_eq!(
        cell(&table, "STATUS"),
        "every component is ready",
        "{table}"
    );
}

fn components(app: &kube::api::DynamicObject) -> Vec<Value> {
    app.data["spec"]["components"].as_array().unwrap().clone()
}

fn named<'a>(components: &'a [Value], name: &str) -> &'a Value {
    components.iter().find(|c| c["name"] == name).unwrap()
}

/// The App as a Git repository holds it: the replicas left to whoever scales it.
fn in_git(image: &str) -> Value {
    let mut spec = app_spec();
    let web = &mut spec["components"][1]["workload"];
    web["image"] = json!(image);
    web.as_object_mut().unwrap().remove("replicas");
    spec
}

#[tokio::test]
async fn a_server_side_apply_of_one_component_leaves_the_others() {
    let mgmt = kubenest_testkit::shared_management().await.unwrap();
    let ns = mgmt.test_namespace("crd-gitops").await.unwrap();
    let client = ns.client();
    install(&client).await;
    let apps = api(&client, "App", Some(ns.name()));

    // Git owns the App: both components.
    let git = PatchParams::apply("gitops-repository");
    let spec = in_git("ghcr.example/shop/web:1.2.3");
    apps.patch("shop", &git, &Patch::Apply(object("App", "shop", spec)))
        .await
        .unwrap();

    // The console scales one component. With an atomic list this apply would own (or, on a
    // conflict, replace) the whole list; as a map it owns only `web`'s replicas.
    let console = PatchParams::apply("kubenest-console");
    let scaled = json!({ "components": [{ "name": "web", "workload": { "replicas": 3 } }] });
    let app = apps
        .patch(
            "shop",
            &console,
            &Patch::Apply(object("App", "shop", scaled)),
        )
        .await
        .unwrap();
    let list = components(&app);
    let names: Vec<&str> = list.iter().map(|c| c["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["db", "web"], "the other component stays");
    assert_eq!(named(&list, "db")["addon"]["definition"], "postgres");
    let web = &named(&list, "web")["workload"];
    assert_eq!(web["replicas"], 3);
    assert_eq!(
        web["image"], "ghcr.example/shop/web:1.2.3",
        "git's fields stay"
    );
    assert_eq!(web["env"].as_array().unwrap().len(), 2);

    // Git moves the image on without naming replicas: the console's change stays too.
    let moved = in_git("ghcr.example/shop/web:1.2.4");
    let app = apps
        .patch("shop", &git, &Patch::Apply(object("App", "shop", moved)))
        .await
        .unwrap();
    let list = components(&app);
    let web = &named(&list, "web")["workload"];
    assert_eq!(
        (web["image"].clone(), web["replicas"].clone()),
        (json!("ghcr.example/shop/web:1.2.4"), json!(3))
    );
    assert_eq!(list.len(), 2);

    // A name appears once: the API server refuses a duplicate without any CEL rule.
    let mut twice = in_git("ghcr.example/shop/web:1.2.4");
    twice["components"][1]["name"] = json!("db");
    let refused = apps
        .patch("shop", &git, &Patch::Apply(object("App", "shop", twice)))
        .await;
    assert!(
        matches!(&refused, Err(kube::Error::Api(e)) if e.message.to_lowercase().contains("duplicate")),
        "{refused:?}"
    );
}
