//! The chart registers the admission webhooks the code registers in `make dev`
//! (`register::configurations`): the same webhooks, resources, operations, failure policies,
//! timeouts and trusted identities (the chart's two service accounts), reached through the
//! release's Service with the CA the chart generated for it. The trusted proxies it passes are
//! ones the server accepts.

use kubenest_apiserver::admission::register::{Endpoint, configurations};
use serde_json::Value;

fn rendered() -> Vec<Value> {
    rendered_with(&[])
}

fn rendered_with(extra: &[&str]) -> Vec<Value> {
    let out = template(extra);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_yaml::Deserializer::from_str(&String::from_utf8(out.stdout).unwrap())
        .map(|d| <Value as serde::Deserialize>::deserialize(d).unwrap())
        .filter(|v| !v.is_null())
        .collect()
}

/// `helm template` of the chart with the values it needs and `extra` arguments.
fn template(extra: &[&str]) -> std::process::Output {
    let chart = concat!(env!("CARGO_MANIFEST_DIR"), "/../charts/kubenest");
    kubenest_testkit::tools::helm(
        &[
            "template",
            "kubenest",
            chart,
            "--namespace",
            "kubenest",
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
        ]
        .into_iter()
        .chain(extra.iter().copied())
        .collect::<Vec<_>>(),
    )
    .unwrap()
}

#[test]
fn the_chart_registers_the_webhooks_the_code_does() {
    let documents = rendered();
    let find = |kind: &str| {
        documents
            .iter()
            .find(|d| d["kind"] == kind)
            .unwrap_or_else(|| panic!("the chart renders no {kind}"))
            .clone()
    };
    let secret = find("Secret");
    let secret = documents
        .iter()
        .find(|d| d["kind"] == "Secret" && d["metadata"]["name"] == "kubenest-admission-tls")
        .unwrap_or(&secret);
    let ca = secret["data"]["ca.crt"].as_str().unwrap();
    use base64::Engine as _;
    let ca_pem = String::from_utf8(
        base64::engine::general_purpose::STANDARD
            .decode(ca)
            .unwrap(),
    )
    .unwrap();
    assert!(
        ca_pem.starts_with("-----BEGIN CERTIFICATE-----"),
        "{ca_pem}"
    );
    let endpoint = Endpoint::Service {
        namespace: "kubenest".into(),
        name: "kubenest-admission".into(),
        port: 443,
    };
    let trusted = [
        "system:serviceaccount:kubenest:kubenest-apiserver".to_owned(),
        "system:serviceaccount:kubenest:kubenest-controllers".to_owned(),
    ];
    let (mutating, validating) = configurations(&endpoint, &ca_pem, &trusted);
    for (expected, kind) in [
        (mutating, "MutatingWebhookConfiguration"),
        (validating, "ValidatingWebhookConfiguration"),
    ] {
        let chart = find(kind);
        assert_eq!(chart["metadata"]["name"], expected["metadata"]["name"]);
        assert_eq!(chart["webhooks"], expected["webhooks"], "{kind}");
    }
    // The Service reaches the API server's admission port.
    let service = documents
        .iter()
        .find(|d| d["kind"] == "Service" && d["metadata"]["name"] == "kubenest-admission")
        .unwrap();
    assert_eq!(service["spec"]["ports"][0]["targetPort"], "admission");
}

fn decoded(secret: &Value, key: &str) -> String {
    use base64::Engine as _;
    let data = secret["data"][key]
        .as_str()
        .unwrap_or_else(|| panic!("no {key}"));
    String::from_utf8(
        base64::engine::general_purpose::STANDARD
            .decode(data)
            .unwrap(),
    )
    .unwrap()
}

/// The chart ships the webhooks' caller identity: a client certificate and the
/// kube-apiserver's admission configuration presenting it, and the API server trusts that
/// certificate's CA only. With `requireClientCertificate` it refuses every other caller; off
/// by default, as a chart cannot give the kube-apiserver the flag that makes it present one.
#[test]
fn the_chart_ships_the_webhook_client_identity_and_can_require_it() {
    let flag = "--admission-client-ca=/var/run/kubenest/admission/client-ca.crt";
    assert!(!api_args(&rendered()).iter().any(|a| a == flag));
    let documents = rendered_with(&["--set", "apiserver.admission.requireClientCertificate=true"]);
    assert!(api_args(&documents).iter().any(|a| a == flag));
    let secret = |name: &str| {
        documents
            .iter()
            .find(|d| d["kind"] == "Secret" && d["metadata"]["name"] == name)
            .unwrap_or_else(|| panic!("no Secret {name}"))
            .clone()
    };
    let tls = secret("kubenest-admission-tls");
    let client = secret("kubenest-admission-client");
    // The CA the server trusts is the client's, not the one that signed the server.
    assert_eq!(decoded(&tls, "client-ca.crt"), decoded(&client, "ca.crt"));
    assert_ne!(decoded(&tls, "client-ca.crt"), decoded(&tls, "ca.crt"));
    let kubeconfig: Value =
        serde_yaml::from_str(&decoded(&client, "webhook-kubeconfig.yaml")).unwrap();
    assert_eq!(kubeconfig["users"][0]["name"], "*");
    assert_eq!(
        kubeconfig["users"][0]["user"]["client-certificate-data"],
        client["data"]["tls.crt"]
    );
    let admission: Value = serde_yaml::from_str(&decoded(&client, "admission.yaml")).unwrap();
    assert_eq!(admission["kind"], "AdmissionConfiguration");
    let plugins: Vec<&str> = admission["plugins"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        plugins,
        ["ValidatingAdmissionWebhook", "MutatingAdmissionWebhook"]
    );
}

/// The API server's arguments in `documents`.
fn api_args(documents: &[Value]) -> Vec<String> {
    let deployment = documents
        .iter()
        .find(|d| d["kind"] == "Deployment" && d["metadata"]["name"] == "kubenest-apiserver")
        .unwrap();
    deployment["spec"]["template"]["spec"]["containers"][0]["args"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a.as_str().unwrap().to_owned())
        .collect()
}

/// The value of `--flag=` in `args`, if given.
fn flag<'a>(args: &'a [String], flag: &str) -> Option<&'a str> {
    args.iter()
        .find_map(|a| a.strip_prefix(flag)?.strip_prefix('='))
}

/// `apiserver.trustedProxies` reaches the API server as a `--trusted-proxies` it accepts; none
/// by default (the header is then ignored), and the schema refuses what is no network.
#[test]
fn the_chart_passes_trusted_proxies_the_server_accepts_and_none_by_default() {
    use kubenest_apiserver::client_address::TrustedProxies;
    let plain = api_args(&rendered());
    assert_eq!(flag(&plain, "--trusted-proxies"), None);
    assert_eq!(
        flag(&plain, "--client-address-header"),
        Some("X-Forwarded-For")
    );

    let behind = api_args(&rendered_with(&[
        "--set",
        "apiserver.trustedProxies={10.0.0.0/8,fd00::/8,192.0.2.7}",
        "--set",
        "apiserver.clientAddressHeader=X-Real-IP",
    ]));
    let networks = flag(&behind, "--trusted-proxies").unwrap();
    assert_eq!(networks, "10.0.0.0/8,fd00::/8,192.0.2.7");
    let networks: Vec<String> = networks.split(',').map(str::to_owned).collect();
    let header = flag(&behind, "--client-address-header").unwrap();
    let trusted = TrustedProxies::parse(&networks, header).unwrap();
    assert!(trusted.trusts("10.1.2.3".parse().unwrap()));
    assert!(trusted.trusts("192.0.2.7".parse().unwrap()));
    assert!(!trusted.trusts("192.0.2.8".parse().unwrap()));
    assert_eq!(trusted.header().as_str(), "x-real-ip");

    let refused = template(&["--set", "apiserver.trustedProxies={proxy.internal}"]);
    assert!(!refused.status.success());
    assert!(
        String::from_utf8_lossy(&refused.stderr).contains("/apiserver/trustedProxies/0"),
        "{}",
        String::from_utf8_lossy(&refused.stderr)
    );
}
