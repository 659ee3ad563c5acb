//! The agent's Helm chart (`charts/kubenest-agent`): lint-clean, its CRDs the ones the code
//! generates, and what it renders accepted by a real API server (server-side dry run).

use std::path::PathBuf;
use std::process::Output;

fn chart() -> PathBuf {
    let manifest = std::env::var_os("CARGO_MANIFEST_DIR")
        .map(PathBuf::from)
        .unwrap();
    manifest.join("..").join("charts").join("kubenest-agent")
}

fn helm(args: &[&str]) -> Output {
    kubenest_testkit::tools::helm(args).unwrap()
}

const VALUES: [&str; 6] = [
    "--set",
    "hub.url=wss://hub.kubenest.test:443/v1/connect",
    "--set",
    "token=eyJhbGciOiJFZERTQSJ9.e30.c2ln",
    "--set",
    "gitops.repo=https://git.kubenest.test/clusters.git",
];

#[test]
fn the_chart_lints_clean_and_ships_the_agents_crds() {
    let chart = chart();
    let mut args = vec!["lint", chart.to_str().unwrap(), "--strict"];
    args.extend(VALUES);
    let lint = helm(&args);
    assert!(
        lint.status.success(),
        "{}",
        String::from_utf8_lossy(&lint.stdout)
    );
    for (name, generated) in kubenest_agent::crd::yaml_files().unwrap() {
        let shipped = std::fs::read_to_string(chart.join("crds").join(&name)).unwrap_or_default();
        assert!(
            shipped == generated,
            "charts/kubenest-agent/crds/{name} is out of date: run `cargo run -p kubenest-agent --bin agent-crdgen`"
        );
    }
    // Without the registration's token it refuses to render, saying why.
    let refused = helm(&[
        "template",
        "agent",
        chart.to_str().unwrap(),
        "--set",
        "hub.url=wss://h/v1/connect",
    ]);
    assert!(!refused.status.success());
    assert!(String::from_utf8_lossy(&refused.stderr).contains("connection token"));
    // Values the agent would refuse later are refused at install, naming the field
    // (values.schema.json).
    for (value, field) in [
        ("hub.url=https://h/v1/connect", "/hub/url"),
        ("heartbeatSeconds=0", "/heartbeatSeconds"),
        ("image.pullPolicy=Sometimes", "/image/pullPolicy"),
        ("tokn=oops", "tokn"),
    ] {
        let refused = helm(&[
            "template",
            "agent",
            chart.to_str().unwrap(),
            "--set",
            "hub.url=wss://h/v1/connect",
            "--set",
            "token=a.b.c",
            "--set",
            value,
        ]);
        let stderr = String::from_utf8_lossy(&refused.stderr);
        assert!(!refused.status.success(), "{value} accepted");
        assert!(stderr.contains(field), "{value}: {stderr}");
    }
}

#[tokio::test]
async fn what_the_chart_renders_is_accepted_by_a_real_api_server() {
    let env = kubenest_testkit::shared().await.unwrap();
    let east = env.cluster("east").unwrap();
    let namespace = east.test_namespace("agent-chart").await.unwrap();
    let chart = chart();
    let mut args = vec![
        "template",
        "kubenest-agent",
        chart.to_str().unwrap(),
        "--include-crds",
        "--namespace",
        namespace.name(),
        "--set",
        "hub.caBundle=-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----",
    ];
    args.extend(VALUES);
    let rendered = helm(&args);
    assert!(
        rendered.status.success(),
        "{}",
        String::from_utf8_lossy(&rendered.stderr)
    );
    let manifest = String::from_utf8(rendered.stdout).unwrap();
    for kind in [
        "CustomResourceDefinition",
        "Secret",
        "ConfigMap",
        "ServiceAccount",
        "ClusterRole",
        "ClusterRoleBinding",
        "Deployment",
    ] {
        assert!(
            manifest.contains(&format!("kind: {kind}\n")),
            "no {kind} rendered"
        );
    }
    let out = kubenest_testkit::tools::server_dry_run(east, namespace.name(), &manifest).unwrap();
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    assert!(out.status.success(), "{stdout}{stderr}");
    assert!(
        stdout.contains("deployment.apps/kubenest-agent serverside-applied (server dry run)"),
        "{stdout}"
    );
}

#[test]
fn the_chart_exposes_the_agents_metrics_and_a_service_monitor_only_when_asked() {
    let chart = chart();
    let render = |extra: &[&str]| {
        let mut args = vec!["template", "kubenest-agent", chart.to_str().unwrap()];
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
    assert!(plain.contains("name: kubenest-agent-metrics\n"), "{plain}");
    assert!(!plain.contains("kind: ServiceMonitor"), "rendered unasked");
    let monitored = render(&["--set", "metrics.serviceMonitor.enabled=true"]);
    assert!(monitored.contains("kind: ServiceMonitor\n"), "{monitored}");
    assert!(monitored.contains("port: metrics"), "{monitored}");
}
