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
    // Every pod and network value set: the real API server takes them all.
    let knobs = knobs_file();
    args.extend(["--values", knobs.path().to_str().unwrap()]);
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

/// Every value of the agent's pod, network and monitoring set at once, as an operator would.
const KNOBS: &str = r#"
logFormat: text
imagePullSecrets: [registry-pull]
podLabels: {team: platform, app.kubernetes.io/instance: stolen}
podAnnotations: {example.com/scraped: "yes"}
extraEnv: [{name: HTTPS_PROXY, value: "http://proxy.internal:3128"}]
nodeSelector: {kubernetes.io/os: linux}
tolerations: [{key: dedicated, operator: Exists, effect: NoSchedule}]
affinity: {nodeAffinity: {preferredDuringSchedulingIgnoredDuringExecution: [
  {weight: 1, preference: {matchExpressions: [{key: pool, operator: In, values: [system]}]}}]}}
priorityClassName: system-cluster-critical
image: {repository: registry.example.com/kubenest/agent}
networkPolicy:
  metricsFrom: [{namespaceSelector: {matchLabels: {kubernetes.io/metadata.name: monitoring}}}]
  restrictEgress: true
  kubeApiServer: {cidrs: [10.96.0.1/32], ports: [6443]}
  extraEgress: [{ports: [{port: 22, protocol: TCP}]}]
"#;

fn knobs_file() -> tempfile::NamedTempFile {
    kubenest_testkit::tools::values_file(KNOBS).unwrap()
}

/// `helm template` of the chart with VALUES, then `extra` arguments.
fn render(extra: &[&str]) -> Vec<serde_json::Value> {
    let chart = chart();
    let args: Vec<&str> = VALUES.iter().chain(extra).copied().collect();
    kubenest_testkit::tools::template("kubenest-agent", chart.to_str().unwrap(), &args).unwrap()
}

fn find<'a>(objects: &'a [serde_json::Value], kind: &str, name: &str) -> &'a serde_json::Value {
    kubenest_testkit::tools::find_object(objects, kind, name)
        .unwrap_or_else(|| panic!("no {kind} {name} rendered"))
}

#[test]
fn the_agents_pod_takes_the_pods_values_and_its_images_follow_the_charts_app_version() {
    let chart_yaml: serde_yaml::Value =
        serde_yaml::from_str(&std::fs::read_to_string(chart().join("Chart.yaml")).unwrap())
            .unwrap();
    let app_version = chart_yaml["appVersion"].as_str().unwrap();
    let knobs = knobs_file();
    let objects = render(&["--values", knobs.path().to_str().unwrap()]);
    let template = &find(&objects, "Deployment", "kubenest-agent")["spec"]["template"];
    let pod = &template["spec"];
    let container = &pod["containers"][0];
    // The builder image is the agent image's sibling, from the same registry, at its tag.
    assert_eq!(
        container["image"],
        format!("registry.example.com/kubenest/agent:{app_version}")
    );
    let env = container["env"].as_array().unwrap();
    let builder = env
        .iter()
        .find(|e| e["name"] == "KUBENEST_BUILDER_IMAGE")
        .unwrap();
    assert_eq!(
        builder["value"],
        format!("registry.example.com/kubenest/builder:{app_version}")
    );
    assert!(env.iter().any(|e| e["name"] == "HTTPS_PROXY"));
    assert!(
        container["args"]
            .as_array()
            .unwrap()
            .contains(&"--log-format=text".into())
    );
    assert_eq!(template["metadata"]["labels"]["team"], "platform");
    assert_eq!(
        template["metadata"]["labels"]["app.kubernetes.io/instance"],
        "kubenest-agent"
    );
    assert_eq!(
        template["metadata"]["annotations"]["example.com/scraped"],
        "yes"
    );
    assert_eq!(pod["imagePullSecrets"][0]["name"], "registry-pull");
    assert_eq!(pod["nodeSelector"]["kubernetes.io/os"], "linux");
    assert_eq!(pod["tolerations"][0]["key"], "dedicated");
    assert_eq!(pod["priorityClassName"], "system-cluster-critical");
    assert!(pod["affinity"]["nodeAffinity"].is_object());

    // Nothing comes in but the scrape; out, only DNS, the API server, the hub's port (443 of
    // hub.url) and extraEgress.
    let policy = &find(&objects, "NetworkPolicy", "kubenest-agent")["spec"];
    assert_eq!(policy["ingress"].as_array().unwrap().len(), 1);
    assert_eq!(policy["ingress"][0]["ports"][0]["port"], "admin");
    assert_eq!(
        policy["ingress"][0]["from"][0]["namespaceSelector"]["matchLabels"]["kubernetes.io/metadata.name"],
        "monitoring"
    );
    // `helm test`'s pod may still ask /readyz, and is none of the agent's pods.
    assert_eq!(
        policy["ingress"][0]["from"][1]["podSelector"]["matchLabels"]["app.kubernetes.io/component"],
        "test"
    );
    let test = find(&objects, "Pod", "kubenest-agent-test-health");
    assert_eq!(
        test["metadata"]["labels"]["app.kubernetes.io/name"],
        "kubenest-agent-test"
    );
    let egress: Vec<String> = policy["egress"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|r| r["ports"].as_array().unwrap().iter())
        .map(|p| p["port"].to_string())
        .collect();
    assert_eq!(egress, ["53", "53", "6443", "443", "22"]);
    // By default the agent's egress stays open (it dials what each cluster names).
    let plain = render(&[]);
    let policy = &find(&plain, "NetworkPolicy", "kubenest-agent")["spec"];
    assert_eq!(policy["policyTypes"], serde_json::json!(["Ingress"]));
    assert_eq!(
        find(&plain, "Deployment", "kubenest-agent")["spec"]["template"]["spec"]["containers"][0]["image"],
        format!("localhost/kubenest/agent:{app_version}")
    );
}

#[test]
fn helm_test_asks_the_agents_readiness_and_the_rule_alerts_on_its_metrics() {
    let objects = render(&["--set", "metrics.prometheusRule.enabled=true"]);
    let test = find(&objects, "Pod", "kubenest-agent-test-health");
    assert_eq!(test["metadata"]["annotations"]["helm.sh/hook"], "test");
    let script = test["spec"]["containers"][0]["args"][0].as_str().unwrap();
    assert!(script.contains("host=kubenest-agent-metrics"), "{script}");
    assert!(script.contains("GET /readyz"), "{script}");
    assert_eq!(
        test["spec"]["containers"][0]["securityContext"]["allowPrivilegeEscalation"],
        false
    );
    let rule = find(&objects, "PrometheusRule", "kubenest-agent");
    let rules = rule["spec"]["groups"][0]["rules"].as_array().unwrap();
    let exprs: String = rules.iter().map(|r| r["expr"].as_str().unwrap()).collect();
    for metric in [
        "kubenest_agent_hub_connected",
        "kubenest_agent_reconcile_errors_total",
        "kubenest_agent_commands_handled_total",
    ] {
        assert!(exprs.contains(metric), "no rule on {metric}");
    }
    // Off the hub for four heartbeats (15 s each by default).
    let off = rules
        .iter()
        .find(|r| r["alert"] == "KubenestAgentOffHub")
        .unwrap();
    assert_eq!(off["for"], "60s");
    let plain = render(&[]);
    assert!(!plain.iter().any(|o| o["kind"] == "PrometheusRule"));
    // The schema refuses what it does not know, naming the field.
    let chart = chart();
    for (value, field) in [
        ("logFormat=yaml", "logFormat"),
        ("networkPolicy.kubeApiServer.cidrs[0]=10.0.0.1", "cidrs"),
        ("networkPolicy.egress=true", "egress"),
        ("tolerations[0].effect=Sometimes", "effect"),
        ("image.tag=-x", "tag"),
    ] {
        let mut args = vec!["template", "agent", chart.to_str().unwrap()];
        args.extend(VALUES);
        args.extend(["--set", value]);
        let refused = helm(&args);
        let stderr = String::from_utf8_lossy(&refused.stderr);
        assert!(!refused.status.success(), "{value} accepted");
        assert!(stderr.contains(field), "{value}: {stderr}");
    }
}
