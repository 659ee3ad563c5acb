//! Secret commands: `secret.set` writes keys into a Secret of a project's namespace, keeping
//! the others; `secret.delete` removes keys, or the whole Secret.

use std::sync::Arc;

use base64::Engine;
use k8s_openapi::api::core::v1::Secret;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use kubenest_contracts::{self as wire, RejectReason};
use kubenest_crds::names::labels;
use serde_json::json;

use crate::boundary::{Refusal, check_project_namespace};
use crate::context::Context;

pub(super) async fn secret_set(ctx: &Arc<Context>, set: &wire::SecretSet) -> Result<(), Refusal> {
    let target = &set.target;
    check_project_namespace(&ctx.client, target.namespace.as_str()).await?;
    for key in set.values.keys() {
        let valid = !key.is_empty()
            && key.len() <= 253
            && key
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'));
        if !valid {
            return Err(Refusal::new(
                RejectReason::Invalid,
                "a Secret key may hold only letters, digits, '-', '_' and '.'",
                Some(&format!(
                    "/values/{}",
                    key.replace('~', "~0").replace('/', "~1")
                )),
            ));
        }
    }
    match set.kind {
        wire::SecretKind::DockerConfigJson => check_docker_config(set)?,
        wire::SecretKind::Tls => check_tls(set)?,
        wire::SecretKind::Opaque => {}
    }
    let engine = base64::engine::general_purpose::STANDARD;
    let data: serde_json::Map<String, serde_json::Value> = set
        .values
        .iter()
        .map(|(k, v)| (k.clone(), engine.encode(v.0.as_bytes()).into()))
        .collect();
    let mut labels = serde_json::Map::new();
    labels.insert(labels::MANAGED_BY.into(), labels::MANAGED_BY_AGENT.into());
    if let Some(app) = &target.app_id {
        labels.insert(labels::APP_ID.into(), app.as_str().into());
    }
    if target.credentials {
        labels.insert(labels::CREDENTIALS.into(), "true".into());
    }
    let api = Api::<Secret>::namespaced(ctx.client.clone(), target.namespace.as_str());
    let name = target.secret.as_str();
    let written = write(&api, name, &labels, set.kind.secret_type(), &data).await;
    if written.is_ok()
        && let Some(app) = &target.app_id
    {
        // New credentials are the usual fix of a failed checkout: such builds run again.
        crate::build::retry_failed(ctx, app.as_str())
            .await
            .map_err(Refusal::internal)?;
    }
    written
}

/// Creates or merges the Secret's keys.
async fn write(
    api: &Api<Secret>,
    name: &str,
    labels: &serde_json::Map<String, serde_json::Value>,
    kind: &str,
    data: &serde_json::Map<String, serde_json::Value>,
) -> Result<(), Refusal> {
    // A merge patch sets these keys and keeps the others (server-side apply would drop keys an
    // earlier `secret.set` of the same manager wrote).
    // The type too: a Secret of another type under this name is refused (types are immutable),
    // never silently kept.
    let patch = json!({"metadata": {"labels": labels}, "type": kind, "data": data});
    match api
        .patch(name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
    {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(status)) if status.code == 404 => {
            let secret: Secret = serde_json::from_value(json!({
                "apiVersion": "v1", "kind": "Secret",
                "metadata": {"name": name, "labels": labels},
                "type": kind,
                "data": data,
            }))
            .map_err(Refusal::internal)?;
            api.create(&PostParams::default(), &secret)
                .await
                .map(|_| ())
                .map_err(Refusal::internal)
        }
        Err(error) => Err(Refusal::internal(error)),
    }
}

/// A registry credential holds one key, `.dockerconfigjson`, whose value is a Docker config
/// with an `auths` object (what the kubelet reads), and nothing else.
fn check_docker_config(set: &wire::SecretSet) -> Result<(), Refusal> {
    const KEY: &str = ".dockerconfigjson";
    if let Some(other) = set.values.keys().find(|k| *k != KEY) {
        return Err(Refusal::new(
            RejectReason::Invalid,
            "a registry credential has the one key .dockerconfigjson",
            Some(&format!(
                "/values/{}",
                other.replace('~', "~0").replace('/', "~1")
            )),
        ));
    }
    let valid = set.values.get(KEY).is_some_and(|value| {
        serde_json::from_str::<serde_json::Value>(&value.0).is_ok_and(|config| {
            config
                .get("auths")
                .is_some_and(serde_json::Value::is_object)
        })
    });
    if !valid {
        return Err(Refusal::new(
            RejectReason::Invalid,
            "a registry credential is a JSON object with an `auths` object",
            Some("/values/.dockerconfigjson"),
        ));
    }
    Ok(())
}

/// A TLS Secret holds exactly `tls.crt` (PEM CERTIFICATE blocks: the certificate, then any
/// chain) and `tls.key` (one PEM private key), what ingress controllers and the CA's issuer
/// read; nothing else is written under that type.
fn check_tls(set: &wire::SecretSet) -> Result<(), Refusal> {
    const CERT: &str = "tls.crt";
    const KEY: &str = "tls.key";
    let refuse = |key: &str, why: &str| {
        let pointer = format!("/values/{}", key.replace('~', "~0").replace('/', "~1"));
        Err(Refusal::new(RejectReason::Invalid, why, Some(&pointer)))
    };
    if let Some(other) = set.values.keys().find(|k| *k != CERT && *k != KEY) {
        return refuse(other, "a TLS Secret has the two keys tls.crt and tls.key");
    }
    let labels = |key: &str| set.values.get(key).and_then(|v| pem_labels(&v.0));
    match labels(CERT) {
        Some(found) if !found.is_empty() && found.iter().all(|l| l == "CERTIFICATE") => {}
        _ => return refuse(CERT, "tls.crt is one or more PEM CERTIFICATE blocks"),
    }
    match labels(KEY).as_deref() {
        Some([one])
            if ["PRIVATE KEY", "EC PRIVATE KEY", "RSA PRIVATE KEY"].contains(&one.as_str()) =>
        {
            Ok(())
        }
        _ => refuse(
            KEY,
            "tls.key is one PEM PRIVATE KEY, EC PRIVATE KEY or RSA PRIVATE KEY block",
        ),
    }
}

/// The labels of the PEM blocks `text` is made of, or `None` when it is anything else: text
/// outside the blocks, a block without its end, headers or a body that is not base64.
fn pem_labels(text: &str) -> Option<Vec<String>> {
    let engine = base64::engine::general_purpose::STANDARD;
    let mut labels = Vec::new();
    let mut lines = text.lines().map(str::trim).filter(|l| !l.is_empty());
    while let Some(line) = lines.next() {
        let label = line.strip_prefix("-----BEGIN ")?.strip_suffix("-----")?;
        let end = format!("-----END {label}-----");
        let mut body = String::new();
        loop {
            let line = lines.next()?;
            if line == end {
                break;
            }
            body.push_str(line);
        }
        if body.is_empty() || engine.decode(body.as_bytes()).is_err() {
            return None;
        }
        labels.push(label.to_owned());
    }
    Some(labels)
}

pub(super) async fn secret_delete(
    ctx: &Arc<Context>,
    delete: &wire::SecretDelete,
) -> Result<(), Refusal> {
    let target = &delete.target;
    check_project_namespace(&ctx.client, target.namespace.as_str()).await?;
    let api = Api::<Secret>::namespaced(ctx.client.clone(), target.namespace.as_str());
    let name = target.secret.as_str();
    let result = if delete.keys.is_empty() {
        api.delete(name, &DeleteParams::default()).await.map(|_| ())
    } else {
        let data: serde_json::Map<String, serde_json::Value> = delete
            .keys
            .iter()
            .map(|k| (k.clone(), serde_json::Value::Null))
            .collect();
        api.patch(
            name,
            &PatchParams::default(),
            &Patch::Merge(&json!({"data": data})),
        )
        .await
        .map(|_| ())
    };
    match result {
        Ok(()) => Ok(()),
        Err(kube::Error::Api(status)) if status.code == 404 => Ok(()),
        Err(error) => Err(Refusal::internal(error)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const CERT: &str =
        "-----BEGIN CERTIFICATE-----\nMIIBszCCAVmgAwIBAgIU\n-----END CERTIFICATE-----\n";
    const KEY: &str =
        "-----BEGIN PRIVATE KEY-----\nMIGHAgEAMBMGByqGSM49\n-----END PRIVATE KEY-----\n";

    fn tls(values: &[(&str, &str)]) -> wire::SecretSet {
        wire::SecretSet {
            target: wire::SecretTarget {
                namespace: wire::Name::new("shop"),
                secret: wire::Name::new(wire::INGRESS_CA_SECRET),
                app_id: None,
                credentials: true,
            },
            kind: wire::SecretKind::Tls,
            values: values
                .iter()
                .map(|(k, v)| ((*k).to_owned(), wire::SecretValue((*v).to_owned())))
                .collect(),
        }
    }

    fn pointer(values: &[(&str, &str)]) -> Option<String> {
        check_tls(&tls(values))
            .err()
            .map(|r| r.field.unwrap_or_default())
    }

    #[test]
    fn a_tls_secret_is_a_certificate_and_its_key_in_pem() {
        assert_eq!(pointer(&[("tls.crt", CERT), ("tls.key", KEY)]), None);
        let chain = format!("{CERT}{CERT}");
        assert_eq!(pointer(&[("tls.crt", &chain), ("tls.key", KEY)]), None);
        let ec = KEY.replace("PRIVATE KEY", "EC PRIVATE KEY");
        assert_eq!(pointer(&[("tls.crt", CERT), ("tls.key", &ec)]), None);
    }

    #[test]
    fn anything_else_is_refused_naming_the_key() {
        let pointed = |values: &[(&str, &str)]| pointer(values).unwrap();
        let extra = [("tls.crt", CERT), ("tls.key", KEY), ("ca.crt", CERT)];
        assert_eq!(pointed(&extra), "/values/ca.crt");
        assert_eq!(pointed(&[("tls.key", KEY)]), "/values/tls.crt");
        assert_eq!(pointed(&[("tls.crt", CERT)]), "/values/tls.key");
        assert_eq!(
            pointed(&[("tls.crt", KEY), ("tls.key", KEY)]),
            "/values/tls.crt"
        );
        assert_eq!(
            pointed(&[("tls.crt", CERT), ("tls.key", CERT)]),
            "/values/tls.key"
        );
        let two_keys = format!("{KEY}{KEY}");
        assert_eq!(
            pointed(&[("tls.crt", CERT), ("tls.key", &two_keys)]),
            "/values/tls.key"
        );
        let unended = CERT.replace("-----END CERTIFICATE-----", "");
        assert_eq!(
            pointed(&[("tls.crt", &unended), ("tls.key", KEY)]),
            "/values/tls.crt"
        );
        let prose = format!("my cert:\n{CERT}");
        assert_eq!(
            pointed(&[("tls.crt", &prose), ("tls.key", KEY)]),
            "/values/tls.crt"
        );
        let garbled = KEY.replace("MIGH", "M!GH");
        assert_eq!(
            pointed(&[("tls.crt", CERT), ("tls.key", &garbled)]),
            "/values/tls.key"
        );
        let encrypted = KEY.replace("PRIVATE KEY", "ENCRYPTED PRIVATE KEY");
        assert_eq!(
            pointed(&[("tls.crt", CERT), ("tls.key", &encrypted)]),
            "/values/tls.key"
        );
        assert_eq!(
            pointed(&[("tls.crt", ""), ("tls.key", KEY)]),
            "/values/tls.crt"
        );
    }
}
