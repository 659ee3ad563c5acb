//! The control plane chart's values for its pods, network and monitoring, rendered
//! (`helm template`) and checked object by object: the pods' metadata, environment, scheduling
//! and images at the chart's appVersion; PodDisruptionBudgets, NetworkPolicies and the Ingress;
//! `helm test` and the PrometheusRule on the metrics the programs export; and the schema
//! refusing bad values by name. `chart.rs` has the dry run of all of it.

use crate::chart::{VALUES, chart, helm};

/// Every value of the chart's pods, network and monitoring set at once, as an operator would.
const KNOBS: &str = r#"
logFormat: text
imagePullSecrets: [registry-pull]
podLabels: {team: platform, app.kubernetes.io/name: stolen}
podAnnotations: {example.com/scraped: "yes"}
extraEnv:
  - {name: HTTPS_PROXY, value: "http://proxy.internal:3128"}
  - name: FROM_SECRET
    valueFrom: {secretKeyRef: {name: proxy, key: url}}
nodeSelector: {kubernetes.io/os: linux}
tolerations: [{key: dedicated, operator: Equal, value: kubenest, effect: NoSchedule}]
affinity:
  nodeAffinity:
    requiredDuringSchedulingIgnoredDuringExecution:
      nodeSelectorTerms: [{matchExpressions: [{key: pool, operator: In, values: [system]}]}]
topologySpreadConstraints:
  - {maxSkew: 1, topologyKey: topology.kubernetes.io/zone, whenUnsatisfiable: ScheduleAnyway}
priorityClassName: system-cluster-critical
controllers: {replicas: 1}
networkPolicy:
  metricsFrom: [{namespaceSelector: {matchLabels: {kubernetes.io/metadata.name: monitoring}}}]
  apiFrom: [{namespaceSelector: {matchLabels: {kubernetes.io/metadata.name: ingress}}}]
  kubeApiServer: {cidrs: [10.96.0.1/32], ports: [6443]}
  postgres: {cidrs: [10.20.0.0/16], port: 5433}
  extraEgress: [{ports: [{port: 3128, protocol: TCP}]}]
apiserver:
  agentChart: oci://registry.example.com/kubenest/charts/kubenest-agent
  ingress:
    enabled: true
    className: nginx
    annotations: {nginx.ingress.kubernetes.io/proxy-read-timeout: "3600"}
    host: kubenest.example.com
    tls: {secretName: kubenest-api-tls}
"#;

/// `helm template` of the chart with VALUES, then `extra` arguments.
fn render(extra: &[&str]) -> Vec<serde_json::Value> {
    let chart = chart();
    let args: Vec<&str> = VALUES.iter().chain(extra).copied().collect();
    kubenest_testkit::tools::template("kubenest", chart.to_str().unwrap(), &args).unwrap()
}

pub(crate) fn knobs_file() -> tempfile::NamedTempFile {
    kubenest_testkit::tools::values_file(KNOBS).unwrap()
}

fn find<'a>(objects: &'a [serde_json::Value], kind: &str, name: &str) -> &'a serde_json::Value {
    kubenest_testkit::tools::find_object(objects, kind, name)
        .unwrap_or_else(|| panic!("no {kind} {name} rendered"))
}

#[test]
fn every_program_gets_the_pods_values_and_its_image_at_the_charts_app_version() {
    let chart_yaml: serde_yaml::Value =
        serde_yaml::from_str(&std::fs::read_to_string(chart().join("Chart.yaml")).unwrap())
            .unwrap();
    let app_version = chart_yaml["appVersion"].as_str().unwrap();
    let knobs = knobs_file();
    let objects = render(&["--values", knobs.path().to_str().unwrap()]);
    for (kind, program) in [
        ("StatefulSet", "hub"),
        ("Deployment", "controllers"),
        ("Deployment", "apiserver"),
    ] {
        let workload = find(&objects, kind, &format!("kubenest-{program}"));
        let template = &workload["spec"]["template"];
        let pod = &template["spec"];
        let container = &pod["containers"][0];
        assert_eq!(
            container["image"],
            format!("localhost/kubenest/{program}:{app_version}")
        );
        assert!(
            container["args"]
                .as_array()
                .unwrap()
                .contains(&"--log-format=text".into()),
            "{program}: {}",
            container["args"]
        );
        // podLabels cannot take the pod out of its own selector.
        assert_eq!(template["metadata"]["labels"]["team"], "platform");
        assert_eq!(
            template["metadata"]["labels"]["app.kubernetes.io/name"],
            program
        );
        assert_eq!(
            template["metadata"]["annotations"]["example.com/scraped"],
            "yes"
        );
        let env = container["env"].as_array().unwrap();
        assert!(env.iter().any(|e| e["name"] == "HTTPS_PROXY"), "{program}");
        assert!(
            env.iter()
                .any(|e| e["name"] == "FROM_SECRET"
                    && e["valueFrom"]["secretKeyRef"]["key"] == "url")
        );
        assert_eq!(pod["imagePullSecrets"][0]["name"], "registry-pull");
        assert_eq!(pod["nodeSelector"]["kubernetes.io/os"], "linux");
        assert_eq!(pod["tolerations"][0]["value"], "kubenest");
        assert_eq!(pod["priorityClassName"], "system-cluster-critical");
        assert!(pod["affinity"]["nodeAffinity"].is_object(), "{program}");
        // A spread constraint without a selector spreads the program's own pods.
        let spread = &pod["topologySpreadConstraints"][0];
        assert_eq!(spread["topologyKey"], "topology.kubernetes.io/zone");
        assert_eq!(
            spread["labelSelector"]["matchLabels"]["app.kubernetes.io/name"],
            program
        );
    }
    // The published agent chart, at this chart's version, in the command the API prints.
    let args = &find(&objects, "Deployment", "kubenest-apiserver")["spec"]["template"]["spec"]["containers"]
        [0]["args"];
    assert!(
        args.as_array()
            .unwrap()
            .contains(&format!("--agent-chart-version={app_version}").into()),
        "{args}"
    );
    // Unset, no chart of a repository that nobody published, nor a version: the API server's
    // own default (`charts/kubenest-agent`, a path in a checkout) until one is named.
    let plain = render(&[]);
    let args = &find(&plain, "Deployment", "kubenest-apiserver")["spec"]["template"]["spec"]["containers"]
        [0]["args"];
    assert!(!args.to_string().contains("--agent-chart"), "{args}");
}

#[test]
fn replicated_programs_keep_one_pod_through_a_drain_and_each_program_is_fenced_to_its_ports() {
    let knobs = knobs_file();
    let objects = render(&["--values", knobs.path().to_str().unwrap()]);
    // Three hub and two API replicas keep one each; the single controllers replica gets none
    // (it would block every drain).
    for program in ["hub", "apiserver"] {
        let pdb = find(
            &objects,
            "PodDisruptionBudget",
            &format!("kubenest-{program}"),
        );
        assert_eq!(pdb["spec"]["minAvailable"], 1);
        assert_eq!(
            pdb["spec"]["selector"]["matchLabels"]["app.kubernetes.io/name"],
            program
        );
    }
    assert!(
        kubenest_testkit::tools::find_object(
            &objects,
            "PodDisruptionBudget",
            "kubenest-controllers"
        )
        .is_none()
    );
    let ports = |rules: &serde_json::Value| -> Vec<String> {
        rules
            .as_array()
            .unwrap()
            .iter()
            .flat_map(|r| r["ports"].as_array().unwrap().iter())
            .map(|p| p["port"].to_string().trim_matches('"').to_owned())
            .collect()
    };
    let hub = &find(&objects, "NetworkPolicy", "kubenest-hub")["spec"];
    assert_eq!(ports(&hub["ingress"]), ["admin", "websocket"]);
    // The hub talks to nothing but DNS and the API server (its Leases), plus extraEgress.
    assert_eq!(ports(&hub["egress"]), ["53", "53", "6443", "3128"]);
    let api = &find(&objects, "NetworkPolicy", "kubenest-apiserver")["spec"];
    assert_eq!(ports(&api["ingress"]), ["admin", "http", "admission"]);
    assert_eq!(
        api["ingress"][0]["from"][0]["namespaceSelector"]["matchLabels"]["kubernetes.io/metadata.name"],
        "monitoring"
    );
    // `helm test`'s pod may still ask /readyz.
    assert_eq!(
        api["ingress"][0]["from"][1]["podSelector"]["matchLabels"]["app.kubernetes.io/component"],
        "test"
    );
    assert_eq!(
        api["ingress"][1]["from"][0]["namespaceSelector"]["matchLabels"]["kubernetes.io/metadata.name"],
        "ingress"
    );
    assert_eq!(
        ports(&api["egress"]),
        ["53", "53", "6443", "5433", "8443", "443", "3128"]
    );
    assert_eq!(api["egress"][1]["to"][0]["ipBlock"]["cidr"], "10.96.0.1/32");
    assert_eq!(api["egress"][2]["to"][0]["ipBlock"]["cidr"], "10.20.0.0/16");
    assert_eq!(
        api["egress"][3]["to"][0]["podSelector"]["matchLabels"]["app.kubernetes.io/name"],
        "hub"
    );
    let ingress = &find(&objects, "Ingress", "kubenest-api")["spec"];
    assert_eq!(ingress["ingressClassName"], "nginx");
    assert_eq!(ingress["tls"][0]["hosts"][0], "kubenest.example.com");
    assert_eq!(
        ingress["rules"][0]["http"]["paths"][0]["backend"]["service"]["name"],
        "kubenest-api"
    );
    // Turned off, none of them.
    let bare = render(&[
        "--set",
        "networkPolicy.enabled=false",
        "--set",
        "podDisruptionBudget.enabled=false",
    ]);
    for kind in [
        "NetworkPolicy",
        "PodDisruptionBudget",
        "Ingress",
        "PrometheusRule",
    ] {
        assert!(!bare.iter().any(|o| o["kind"] == kind), "{kind} rendered");
    }
}

#[test]
fn helm_test_asks_every_programs_readiness_and_the_rule_alerts_on_the_exported_metrics() {
    let objects = render(&["--set", "metrics.prometheusRule.enabled=true"]);
    let test = find(&objects, "Pod", "kubenest-test-health");
    assert_eq!(test["metadata"]["annotations"]["helm.sh/hook"], "test");
    let script = test["spec"]["containers"][0]["args"][0].as_str().unwrap();
    assert!(
        script.contains("for program in hub controllers apiserver"),
        "{script}"
    );
    assert!(script.contains("kubenest-$program-metrics"), "{script}");
    assert!(script.contains("GET /readyz"), "{script}");
    // Pod Security `restricted`, like the programs.
    assert_eq!(test["spec"]["securityContext"]["runAsNonRoot"], true);
    let security = &test["spec"]["containers"][0]["securityContext"];
    assert_eq!(security["allowPrivilegeEscalation"], false);
    assert_eq!(security["capabilities"]["drop"][0], "ALL");
    let rule = find(&objects, "PrometheusRule", "kubenest");
    let rules = rule["spec"]["groups"][0]["rules"].as_array().unwrap();
    let exprs: String = rules.iter().map(|r| r["expr"].as_str().unwrap()).collect();
    // Every metric named is one a program exports (the names in the programs' metrics.rs).
    for metric in [
        "kubenest_controllers_hub_replicas_connected",
        "kubenest_hub_floors_fresh",
        "kubenest_controllers_revision_confirmation_seconds_count",
        "kubenest_controllers_verification_verdicts_total",
        "kubenest_controllers_reconcile_errors_total",
        "kubenest_controllers_commands_unrouted_total",
        "kubenest_apiserver_http_requests_total",
        "kubenest_apiserver_db_connections",
    ] {
        assert!(exprs.contains(metric), "no rule on {metric}");
    }
    for rule in rules {
        assert!(
            ["critical", "warning"].contains(&rule["labels"]["severity"].as_str().unwrap()),
            "{rule}"
        );
        assert!(rule["annotations"]["summary"].is_string(), "{rule}");
    }
}

#[test]
fn the_schema_refuses_bad_pod_network_and_ingress_values_naming_the_field() {
    let chart = chart();
    for (value, field) in [
        ("logFormat=yaml", "logFormat"),
        ("imagePullSecrets[0]=Bad_Name", "imagePullSecrets"),
        ("extraEnv[0].value=x", "name"),
        ("tolerations[0].operator=Maybe", "operator"),
        ("topologySpreadConstraints[0].maxSkew=0", "maxSkew"),
        ("networkPolicy.kubeApiServer.cidrs[0]=10.0.0.1", "cidrs"),
        ("networkPolicy.postgres.port=0", "port"),
        ("apiserver.ingress.host=not a host", "host"),
        (
            "apiserver.agentChartVersion=1.0 --devel",
            "agentChartVersion",
        ),
        ("apiserver.agentChart=charts/agent;id", "agentChart"),
        ("apiserver.agentChart=--post-renderer=x", "agentChart"),
        ("images.hub.tag=-x", "tag"),
        ("podDisruptionBudget.minAvailable=2", "minAvailable"),
    ] {
        let mut args = vec!["template", "kubenest", chart.to_str().unwrap()];
        args.extend(VALUES);
        args.extend(["--set", value]);
        let refused = helm(&args);
        let stderr = String::from_utf8_lossy(&refused.stderr);
        assert!(!refused.status.success(), "{value} accepted");
        assert!(stderr.contains(field), "{value}: {stderr}");
    }
}
