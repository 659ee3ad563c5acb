//! Registers the webhooks with the management cluster's API server: which resources, which
//! writers (everyone but the trusted identities, by `matchConditions`), where to call, and the
//! CA to trust. Applied at start by every replica (server-side apply, so replicas agree).

use k8s_openapi::api::admissionregistration::v1::{
    MutatingWebhookConfiguration, ValidatingWebhookConfiguration,
};
use k8s_openapi::api::authentication::v1::SelfSubjectReview;
use kube::api::{Api, Patch, PatchParams, PostParams};
use serde_json::{Value, json};

/// The name of both webhook configurations.
pub const NAME: &str = "kubenest-admission";

/// Where the kube-apiserver reaches the webhooks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Endpoint {
    /// A base URL, `https://127.0.0.1:8443` (the API server on the same machine).
    Url(String),
    /// A Service in the cluster: `namespace/name:port`.
    Service {
        namespace: String,
        name: String,
        port: u16,
    },
}

impl std::str::FromStr for Endpoint {
    type Err = String;

    /// `https://...` is a URL; `namespace/name:port` a Service.
    fn from_str(text: &str) -> Result<Self, Self::Err> {
        if text.starts_with("https://") {
            return Ok(Self::Url(text.trim_end_matches('/').to_owned()));
        }
        let parse = || {
            let (namespace, rest) = text.split_once('/')?;
            let (name, port) = rest.split_once(':')?;
            let label = kubenest_domain::names::is_dns_label;
            if !label(namespace) || !label(name) {
                return None;
            }
            Some(Self::Service {
                namespace: namespace.to_owned(),
                name: name.to_owned(),
                port: port.parse().ok()?,
            })
        };
        parse()
            .ok_or_else(|| format!("{text:?} is neither https://host:port nor namespace/name:port"))
    }
}

impl Endpoint {
    fn client_config(&self, path: &str, ca_bundle: &str) -> Value {
        use base64::Engine;
        let ca = base64::engine::general_purpose::STANDARD.encode(ca_bundle);
        match self {
            Self::Url(base) => json!({"url": format!("{base}{path}"), "caBundle": ca}),
            Self::Service {
                namespace,
                name,
                port,
            } => json!({
                "service": {"namespace": namespace, "name": name, "port": port, "path": path},
                "caBundle": ca,
            }),
        }
    }
}

/// The Kubernetes user this client acts as (a SelfSubjectReview).
pub async fn own_username(client: &kube::Client) -> Result<String, kube::Error> {
    let api: Api<SelfSubjectReview> = Api::all(client.clone());
    let review = api
        .create(&PostParams::default(), &SelfSubjectReview::default())
        .await?;
    Ok(review
        .status
        .and_then(|s| s.user_info)
        .and_then(|u| u.username)
        .unwrap_or_default())
}

/// The CEL list of the trusted user names.
fn trusted_list(trusted: &[String]) -> String {
    let quoted: Vec<String> = trusted
        .iter()
        .map(|u| format!("'{}'", u.replace('\\', "\\\\").replace('\'', "\\'")))
        .collect();
    format!("[{}]", quoted.join(", "))
}

/// The kubenest resources the webhooks see.
const RESOURCES: &[&str] = &[
    "organizations",
    "clusters",
    "projects",
    "apps",
    "addoninstances",
    "stacktemplates",
];

/// The two configurations (mutating, validating) for `endpoint`, trusting `trusted`. Creates
/// and updates are refused while the webhook cannot be reached (`Fail`: nothing unchecked is
/// stored); deletes are audited when it can be (`Ignore`: a namespace's deletion never waits on
/// it). The chart renders the same (`charts/kubenest/templates/admission.yaml`; a test compares).
pub fn configurations(endpoint: &Endpoint, ca_bundle: &str, trusted: &[String]) -> (Value, Value) {
    configurations_with(endpoint, ca_bundle, trusted, 10)
}

fn configurations_with(
    endpoint: &Endpoint,
    ca_bundle: &str,
    trusted: &[String],
    timeout: u32,
) -> (Value, Value) {
    let conditions = json!([{
        "name": "not-kubenest-itself",
        "expression": format!("!(request.userInfo.username in {})", trusted_list(trusted)),
    }]);
    let rules = |operations: &[&str]| {
        json!([{
            "apiGroups": ["kubenest.io"],
            "apiVersions": ["*"],
            "operations": operations,
            "resources": RESOURCES,
            "scope": "*",
        }])
    };
    let labels = json!({"app.kubernetes.io/managed-by": "kubenest-apiserver"});
    let mutating = json!({
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "MutatingWebhookConfiguration",
        "metadata": {"name": NAME, "labels": labels},
        "webhooks": [{
            "name": "actor.kubenest.io",
            "clientConfig": endpoint.client_config("/admission/mutate", ca_bundle),
            "rules": rules(&["CREATE", "UPDATE"]),
            "matchConditions": conditions,
            "failurePolicy": "Fail",
            "sideEffects": "None",
            "admissionReviewVersions": ["v1"],
            "timeoutSeconds": timeout,
            "reinvocationPolicy": "IfNeeded",
        }],
    });
    let validating = json!({
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingWebhookConfiguration",
        "metadata": {"name": NAME, "labels": labels},
        "webhooks": [
            {
                "name": "rules.kubenest.io",
                "clientConfig": endpoint.client_config("/admission/validate", ca_bundle),
                "rules": rules(&["CREATE", "UPDATE"]),
                "matchConditions": conditions,
                "failurePolicy": "Fail",
                "sideEffects": "NoneOnDryRun",
                "admissionReviewVersions": ["v1"],
                "timeoutSeconds": timeout,
            },
            {
                "name": "deletes.kubenest.io",
                "clientConfig": endpoint.client_config("/admission/validate", ca_bundle),
                "rules": rules(&["DELETE"]),
                "matchConditions": conditions,
                "failurePolicy": "Ignore",
                "sideEffects": "NoneOnDryRun",
                "admissionReviewVersions": ["v1"],
                "timeoutSeconds": timeout,
            },
        ],
    });
    (mutating, validating)
}

/// Applies both [`configurations`].
pub async fn register(
    client: &kube::Client,
    endpoint: &Endpoint,
    ca_bundle: &str,
    trusted: &[String],
) -> Result<(), kube::Error> {
    let (mutating, validating) = configurations(endpoint, ca_bundle, trusted);
    let params = PatchParams::apply("kubenest-apiserver").force();
    let api: Api<MutatingWebhookConfiguration> = Api::all(client.clone());
    api.patch(NAME, &params, &Patch::Apply(&mutating)).await?;
    let api: Api<ValidatingWebhookConfiguration> = Api::all(client.clone());
    api.patch(NAME, &params, &Patch::Apply(&validating)).await?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn endpoints_parse_as_urls_or_services() {
        assert_eq!(
            "https://127.0.0.1:8443/".parse::<Endpoint>().unwrap(),
            Endpoint::Url("https://127.0.0.1:8443".into())
        );
        assert_eq!(
            "kubenest/kubenest-apiserver:8443"
                .parse::<Endpoint>()
                .unwrap(),
            Endpoint::Service {
                namespace: "kubenest".into(),
                name: "kubenest-apiserver".into(),
                port: 8443
            }
        );
        assert!("http://x:1".parse::<Endpoint>().is_err());
        assert!("kubenest/api".parse::<Endpoint>().is_err());
    }

    #[test]
    fn trusted_names_are_quoted_for_cel() {
        assert_eq!(
            trusted_list(&["a".into(), "it's".into()]),
            r"['a', 'it\'s']"
        );
    }
}
