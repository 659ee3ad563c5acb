//! The chart registers the admission webhooks the code registers in `make dev`
//! (`register::configurations`): the same webhooks, resources, operations, failure policies,
//! timeouts and trusted identities (the chart's two service accounts), reached through the
//! release's Service with the CA the chart generated for it.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use kubenest_apiserver::admission::register::{Endpoint, configurations};
use serde_json::Value;

fn rendered() -> Vec<Value> {
    let chart = concat!(env!("CARGO_MANIFEST_DIR"), "/../charts/kubenest");
    let out = kubenest_testkit::tools::helm(&[
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
    ])
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
