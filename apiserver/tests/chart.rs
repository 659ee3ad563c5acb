//! The chart registers the admission webhooks the code registers in `make dev`
//! (`register::configurations`): the same webhooks, resources, operations, failure policies,
//! timeouts and trusted identities (the chart's two service accounts), reached through the
//! release's Service with the CA the chart generated for it.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use kubenest_apiserver::admission::register::{Endpoint, configurations};
use serde_json::Value;

fn rendered() -> Vec<Value> {
    rendered_with(&[])
}

fn rendered_with(extra: &[&str]) -> Vec<Value> {
    let chart = concat!(env!("CARGO_MANIFEST_DIR"), "/../charts/kubenest");
    let out = kubenest_testkit::tools::helm(
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
    .unwrap();
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
    let api_args = |documents: &[Value]| -> Vec<String> {
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
    };
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
