//! The control plane's Helm chart (`charts/kubenest`): lint-clean, shipping the CRDs and the
//! kubenest-role ClusterRoles the code generates, refusing to render without what it needs (and
//! values its schema does not allow), and what it renders, with every value of
//! `chart_values.rs` set, accepted by a real API server (server-side dry run).
//!
//! After changing the CRDs or the roles: `KUBENEST_UPDATE_CHART=1 cargo test -p
//! kubenest-controllers --test it chart::` rewrites the generated files.

use std::path::PathBuf;
use std::process::Output;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..")
}

pub(crate) fn chart() -> PathBuf {
    root().join("charts").join("kubenest")
}

pub(crate) fn helm(args: &[&str]) -> Output {
    kubenest_testkit::tools::helm(args).unwrap()
}

pub(crate) const VALUES: [&str; 12] = [
    "--set",
    "postgres.existingSecret=kubenest-postgres",
    "--set",
    "keys.existingSecret=kubenest-keys",
    "--set",
    "hub.tls.secretName=kubenest-hub-tls",
    "--set",
    "hub.publicUrl=wss://hub.kubenest.test/v1/connect",
    "--set",
    "apiserver.admin.existingSecret=kubenest-admin",
    "--set",
    "hub.replicas=3",
];

/// The generated files the chart ships, and what they must contain.
fn generated() -> Vec<(PathBuf, String)> {
    let mut files = Vec::new();
    let crds = root().join("crds").join("yaml");
    for entry in std::fs::read_dir(&crds).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_name().unwrap().to_owned();
        files.push((
            chart().join("crds").join(name),
            std::fs::read_to_string(&path).unwrap(),
        ));
    }
    let mut roles = String::from(
        "# Generated from kubenest_controllers::rbac::cluster_roles(); see controllers/tests/it/chart.rs.\n",
    );
    for role in kubenest_controllers::rbac::cluster_roles() {
        roles.push_str("---\n");
        roles.push_str(&serde_yaml::to_string(&role).unwrap());
    }
    files.push((chart().join("templates").join("kubenest-roles.yaml"), roles));
    files
}

#[test]
fn the_chart_ships_the_crds_and_roles_the_code_generates() {
    let update = std::env::var_os("KUBENEST_UPDATE_CHART").is_some();
    for (path, contents) in generated() {
        if update {
            std::fs::write(&path, &contents).unwrap();
        }
        let shipped = std::fs::read_to_string(&path).unwrap_or_default();
        assert!(
            shipped == contents,
            "{} is out of date: run `KUBENEST_UPDATE_CHART=1 cargo test -p kubenest-controllers --test it chart::`",
            path.display()
        );
    }
}

#[test]
fn the_chart_lints_clean_and_refuses_to_render_without_what_it_needs() {
    let chart = chart();
    let mut args = vec!["lint", chart.to_str().unwrap(), "--strict"];
    args.extend(VALUES);
    let lint = helm(&args);
    assert!(
        lint.status.success(),
        "{}{}",
        String::from_utf8_lossy(&lint.stdout),
        String::from_utf8_lossy(&lint.stderr)
    );
    for (missing, says) in [
        (
            "postgres.existingSecret",
            "postgres.url or postgres.existingSecret",
        ),
        ("keys.existingSecret", "keys.existingSecret"),
        ("hub.tls.secretName", "hub.tls.secretName is required"),
        ("hub.publicUrl", "hub.publicUrl is required"),
        (
            "apiserver.admin.existingSecret",
            "apiserver.admin.existingSecret or",
        ),
    ] {
        let mut args = vec!["template", "kubenest", chart.to_str().unwrap()];
        let kept: Vec<&str> = VALUES
            .chunks(2)
            .filter(|pair| !pair[1].starts_with(&format!("{missing}=")))
            .flatten()
            .copied()
            .collect();
        args.extend(kept);
        let refused = helm(&args);
        let stderr = String::from_utf8_lossy(&refused.stderr);
        assert!(!refused.status.success(), "rendered without {missing}");
        assert!(stderr.contains(says), "without {missing}: {stderr}");
    }
}

#[tokio::test]
async fn what_the_chart_renders_is_accepted_by_a_real_api_server() {
    // A management cluster of its own: the shared one runs the plane's controllers, whose
    // admission policies the chart's would meet as another field manager's.
    let env = kubenest_testkit::Environment::builder()
        .management("chart")
        .start()
        .await
        .unwrap();
    let mgmt = env.management().unwrap();
    let client = mgmt.client().await.unwrap();
    // The CRDs for real (a dry run cannot create the kinds the catalog's objects need).
    kubenest_controllers::ensure_crds(&client).await.unwrap();
    tokio::time::sleep(std::time::Duration::from_secs(2)).await;
    let namespace = mgmt.test_namespace("kubenest-chart").await.unwrap();
    let chart = chart();
    let mut args = vec![
        "template",
        "kubenest",
        chart.to_str().unwrap(),
        "--namespace",
        namespace.name(),
    ];
    args.extend(VALUES);
    // Every pod, network and Ingress value set: the real API server takes them all.
    let knobs = crate::chart_values::knobs_file();
    args.extend(["--values", knobs.path().to_str().unwrap()]);
    let rendered = helm(&args);
    assert!(
        rendered.status.success(),
        "{}",
        String::from_utf8_lossy(&rendered.stderr)
    );
    let manifest = String::from_utf8(rendered.stdout).unwrap();
    for kind in [
        "ServiceAccount",
        "ClusterRole",
        "ClusterRoleBinding",
        "Role",
        "RoleBinding",
        "Service",
        "StatefulSet",
        "Deployment",
        "AddonDefinition",
    ] {
        assert!(
            manifest.contains(&format!("kind: {kind}\n")),
            "no {kind} rendered"
        );
    }
    // Each hub replica is dialled at its own address.
    assert!(
        manifest.contains(&format!(
            "wss://kubenest-hub-2.kubenest-hub-headless.{}.svc:8443/v1/connect",
            namespace.name()
        )),
        "the controllers are not given every hub replica"
    );
    let out = kubenest_testkit::tools::server_dry_run(mgmt, namespace.name(), &manifest).unwrap();
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    assert!(out.status.success(), "{stdout}{stderr}");
    for object in [
        "statefulset.apps/kubenest-hub",
        "deployment.apps/kubenest-controllers",
        "deployment.apps/kubenest-apiserver",
        "addondefinition.kubenest.io/postgres",
        "clusterrole.rbac.authorization.k8s.io/kubenest-admin",
        "poddisruptionbudget.policy/kubenest-hub",
        "networkpolicy.networking.k8s.io/kubenest-apiserver",
        "ingress.networking.k8s.io/kubenest-api",
        "pod/kubenest-test-health",
    ] {
        assert!(
            stdout.contains(&format!("{object} serverside-applied (server dry run)")),
            "{object} not accepted: {stdout}"
        );
    }
}

#[test]
fn the_chart_exposes_every_programs_metrics_and_a_service_monitor_only_when_asked() {
    let chart = chart();
    let render = |extra: &[&str]| {
        let mut args = vec!["template", "kubenest", chart.to_str().unwrap()];
        args.extend(VALUES);
        args.extend(extra);
        let out = helm(&args);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap()
    };
    let plain = render(&[]);
    for program in ["hub", "controllers", "apiserver"] {
        assert!(
            plain.contains(&format!("name: kubenest-{program}-metrics\n")),
            "no metrics Service for {program}"
        );
    }
    assert!(!plain.contains("kind: ServiceMonitor"), "rendered unasked");
    let monitored = render(&[
        "--set",
        "metrics.serviceMonitor.enabled=true",
        "--set",
        "metrics.serviceMonitor.labels.release=prometheus",
    ]);
    assert!(monitored.contains("kind: ServiceMonitor\n"), "{monitored}");
    assert!(monitored.contains("release: prometheus"), "{monitored}");
    let mut args = vec!["lint", chart.to_str().unwrap(), "--strict"];
    args.extend(VALUES);
    args.extend(["--set", "metrics.serviceMonitor.enabled=true"]);
    let lint = helm(&args);
    assert!(
        lint.status.success(),
        "{}",
        String::from_utf8_lossy(&lint.stdout)
    );
}
