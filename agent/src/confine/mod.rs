//! Charts stay in their project: which objects of a chart's render the agent may apply (pure).
//!
//! A chart is code its author wrote, so what it renders is checked before any of it is applied:
//! every object must be of a kind on [`ALLOWED`], the cluster's discovery must say that kind is
//! namespaced, and the object may name no namespace but the project's. The first object that
//! fails refuses the whole render, so a chart never lands half-applied.
//!
//! Nor may a chart reach the project's credentials (the registry Secret, Git workloads'
//! repository Secrets: [`credentials`]): no object of it may be such a Secret, and nothing in
//! it may name one as a Secret to read (a volume, an env reference, a TLS secret). Naming one
//! in `imagePullSecrets` is a pull, which the kubelet makes; the pod never sees it.
//!
//! Nor may a chart's claims pick the volume they bind ([`claims`]): a claim — a
//! PersistentVolumeClaim, a StatefulSet's claim template, a pod's ephemeral volume — that names
//! a volume (`volumeName`), selects volumes by label (`selector`) or asks for no storage class
//! (`storageClassName: ""`, which binds only volumes that already exist) could take a volume
//! provisioned for someone else, with whatever another tenant left on it. A chart's claims ask
//! for a new volume of a storage class, which the cluster's provisioner makes for them.
//!
//! The list is the kinds the agent also prunes ([`crate::apply::PRUNABLE`]) and that its
//! project role lets it write: anything applied must be removable when the App drops it, and a
//! kind outside the project role would fail at the API server anyway (with a less clear
//! message, and after its siblings were applied). RBAC objects are left out on purpose: a Role
//! or RoleBinding in a chart could grant a project's pods powers the project's members do not
//! hold. Scope is decided by discovery rather than by the kind's name, so a kind that is
//! namespaced on one cluster and not on another (an aggregated API, a CRD) is judged by the
//! cluster it would land on.

use std::collections::BTreeSet;

use serde_json::Value;

mod claims;
mod labels;

use claims::claims;
use labels::reserved_label;

/// The kinds a chart may render, as (API group, kind): `""` is the core group. Any version of
/// the group is accepted; discovery still has to know it.
pub const ALLOWED: &[(&str, &str)] = &[
    ("apps", "Deployment"),
    ("apps", "StatefulSet"),
    ("apps", "DaemonSet"),
    ("", "Service"),
    ("networking.k8s.io", "Ingress"),
    ("", "ConfigMap"),
    ("", "Secret"),
    ("batch", "Job"),
    ("batch", "CronJob"),
    ("", "PersistentVolumeClaim"),
];

/// What the cluster's discovery says of a kind.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scope {
    /// Objects of the kind live in a namespace.
    Namespaced,
    /// Objects of the kind are cluster-wide.
    Cluster,
    /// The cluster does not serve the kind.
    Unknown,
}

/// Why an object of a render is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Refused {
    /// No apiVersion, kind or name.
    #[error("the chart renders an object without apiVersion, kind or name")]
    Malformed,
    /// A cluster-scoped kind: it would reach beyond the project.
    #[error(
        "the chart renders {object}, which is cluster-scoped; nothing of the chart was applied"
    )]
    ClusterScoped { object: String },
    /// A kind the cluster does not serve.
    #[error(
        "the chart renders {object}, a kind this cluster does not serve; nothing of the chart was applied"
    )]
    UnknownKind { object: String },
    /// A namespaced kind that is not on [`ALLOWED`].
    #[error(
        "the chart renders {object}, a kind a chart may not create here; nothing of the chart was applied"
    )]
    NotAllowed { object: String },
    /// An object that names another namespace.
    #[error(
        "the chart renders {object} in namespace {namespace}, outside the project's; nothing of the chart was applied"
    )]
    OtherNamespace { object: String, namespace: String },
    /// A claim that picks an existing volume instead of asking for a new one.
    #[error(
        "the chart renders {object}, whose claim at {field} {how}; a chart's claims may only ask for a new volume of a storage class; nothing of the chart was applied"
    )]
    PicksVolume {
        object: String,
        field: String,
        how: &'static str,
    },
    /// An object that carries a label kubenest's own pods are told apart by.
    #[error(
        "the chart renders {object} with the label {label}, which only kubenest's own pods carry; nothing of the chart was applied"
    )]
    ReservedLabel { object: String, label: &'static str },
    /// An object that is, or whose pods would read, a Secret of credentials.
    #[error(
        "the chart renders {object}, which {how} Secret {secret}, credentials only kubenest's builds and pulls may use; nothing of the chart was applied"
    )]
    Credentials {
        object: String,
        secret: String,
        how: &'static str,
    },
}

/// (apiVersion, kind) of an object, if it has both.
pub fn kind_of(object: &Value) -> Option<(&str, &str)> {
    Some((
        object.get("apiVersion")?.as_str()?,
        object.get("kind")?.as_str()?,
    ))
}

/// Ok when every object of `objects` may be applied in `namespace`, given `scope` (what
/// discovery says of an (apiVersion, kind)); else why the first one that may not is refused.
pub fn admit(
    objects: &[Value],
    namespace: &str,
    scope: impl Fn(&str, &str) -> Scope,
) -> Result<(), Refused> {
    objects
        .iter()
        .try_for_each(|object| admit_one(object, namespace, &scope))
}

fn admit_one(
    object: &Value,
    namespace: &str,
    scope: &impl Fn(&str, &str) -> Scope,
) -> Result<(), Refused> {
    let (api_version, kind) = kind_of(object).ok_or(Refused::Malformed)?;
    let name = object
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .filter(|name| !name.is_empty())
        .ok_or(Refused::Malformed)?;
    let named = || format!("{kind}/{name}");
    match scope(api_version, kind) {
        Scope::Cluster => return Err(Refused::ClusterScoped { object: named() }),
        Scope::Unknown => return Err(Refused::UnknownKind { object: named() }),
        Scope::Namespaced => {}
    }
    // A core kind's apiVersion has no group ("v1").
    let group = api_version.rsplit_once('/').map_or("", |(group, _)| group);
    if !ALLOWED.contains(&(group, kind)) {
        return Err(Refused::NotAllowed { object: named() });
    }
    match object.pointer("/metadata/namespace") {
        None | Some(Value::Null) => {}
        Some(Value::String(ns)) if ns == namespace || ns.is_empty() => {}
        Some(other) => {
            return Err(Refused::OtherNamespace {
                object: named(),
                namespace: other.as_str().unwrap_or("?").to_owned(),
            });
        }
    }
    if let Some(label) = reserved_label(object) {
        return Err(Refused::ReservedLabel {
            object: named(),
            label,
        });
    }
    claims(object, kind).map_err(|(field, how)| Refused::PicksVolume {
        object: named(),
        field,
        how,
    })
}

/// Ok when no object of `objects` is, or makes a pod read, one of the Secrets named in
/// `reserved` (the namespace's credentials); else the first that does.
pub fn credentials(objects: &[Value], reserved: &BTreeSet<String>) -> Result<(), Refused> {
    for object in objects {
        let (_, kind) = kind_of(object).ok_or(Refused::Malformed)?;
        let name = object
            .pointer("/metadata/name")
            .and_then(Value::as_str)
            .unwrap_or_default();
        let refused = |secret: &str, how| Refused::Credentials {
            object: format!("{kind}/{name}"),
            secret: secret.to_owned(),
            how,
        };
        if kind == "Secret" && reserved.contains(name) {
            return Err(refused(name, "overwrites"));
        }
        if let Some(secret) = object.get("spec").and_then(|v| secret_named(v, reserved)) {
            return Err(refused(&secret, "reads"));
        }
    }
    Ok(())
}

/// The first of `reserved` that `value` names as a Secret: under a key about secrets (`secret`,
/// `secretRef`, `secretKeyRef`, `nodePublishSecretRef`, …) as its `name` or `secretName`, or as
/// a `secretName`. `imagePullSecrets` is a pull, not a read, and is skipped.
fn secret_named(value: &Value, reserved: &BTreeSet<String>) -> Option<String> {
    match value {
        Value::Array(items) => items.iter().find_map(|item| secret_named(item, reserved)),
        Value::Object(fields) => fields.iter().find_map(|(key, field)| {
            if key == "imagePullSecrets" {
                return None;
            }
            let named = |text: Option<&Value>| {
                text.and_then(Value::as_str)
                    .filter(|name| reserved.contains(*name))
                    .map(str::to_owned)
            };
            let about_secrets = key.to_ascii_lowercase().contains("secret");
            let direct = if key == "secretName" {
                named(Some(field))
            } else if about_secrets {
                named(field.get("name")).or_else(|| named(field.get("secretName")))
            } else {
                None
            };
            direct.or_else(|| secret_named(field, reserved))
        }),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn object(api_version: &str, kind: &str, name: &str) -> Value {
        json!({"apiVersion": api_version, "kind": kind, "metadata": {"name": name}})
    }

    /// Discovery as a stock cluster answers it for the kinds these tests use.
    fn cluster(api_version: &str, kind: &str) -> Scope {
        match (api_version, kind) {
            ("networking.k8s.io/v1", "IngressClass")
            | ("rbac.authorization.k8s.io/v1", "ClusterRole")
            | ("v1", "PersistentVolume")
            | ("v1", "Namespace") => Scope::Cluster,
            ("example.test/v1", _) => Scope::Unknown,
            _ => Scope::Namespaced,
        }
    }

    #[test]
    fn a_chart_of_workloads_services_and_configuration_is_admitted() {
        let objects = [
            object("apps/v1", "Deployment", "web"),
            object("apps/v1", "StatefulSet", "db"),
            object("v1", "Service", "web"),
            object("networking.k8s.io/v1", "Ingress", "web"),
            object("v1", "ConfigMap", "web"),
            object("v1", "Secret", "web"),
            object("batch/v1", "Job", "migrate"),
        ];
        assert_eq!(admit(&objects, "shop", cluster), Ok(()));
    }

    #[test]
    fn a_cluster_scoped_object_refuses_the_render_naming_it_wherever_it_is() {
        let objects = [
            object("apps/v1", "Deployment", "web"),
            object("networking.k8s.io/v1", "IngressClass", "mine"),
            object("v1", "Service", "web"),
        ];
        assert_eq!(
            admit(&objects, "shop", cluster),
            Err(Refused::ClusterScoped {
                object: "IngressClass/mine".into()
            })
        );
    }

    #[test]
    fn scope_comes_from_discovery_not_from_the_kinds_name() {
        // A cluster where discovery says ConfigMap is cluster-wide: refused, though listed.
        let odd = |_: &str, kind: &str| {
            if kind == "ConfigMap" {
                Scope::Cluster
            } else {
                Scope::Namespaced
            }
        };
        let objects = [object("v1", "ConfigMap", "c")];
        assert!(matches!(
            admit(&objects, "shop", odd),
            Err(Refused::ClusterScoped { .. })
        ));
        // A kind the cluster does not serve is refused as unknown.
        let objects = [object("example.test/v1", "Widget", "w")];
        assert_eq!(
            admit(&objects, "shop", cluster),
            Err(Refused::UnknownKind {
                object: "Widget/w".into()
            })
        );
    }

    #[test]
    fn rbac_objects_and_other_namespaced_kinds_off_the_list_are_refused() {
        for (api_version, kind) in [
            ("rbac.authorization.k8s.io/v1", "RoleBinding"),
            ("rbac.authorization.k8s.io/v1", "Role"),
            ("v1", "Pod"),
            ("v1", "ReplicationController"),
            // Same kind name as an allowed one, another group: not the same kind.
            ("example.io/v1", "Deployment"),
        ] {
            let objects = [object(api_version, kind, "x")];
            assert_eq!(
                admit(&objects, "shop", cluster),
                Err(Refused::NotAllowed {
                    object: format!("{kind}/x")
                }),
                "{api_version} {kind}"
            );
        }
    }

    #[test]
    fn an_object_in_another_namespace_is_refused_and_the_projects_own_is_not() {
        let mut own = object("v1", "ConfigMap", "c");
        own["metadata"]["namespace"] = "shop".into();
        assert_eq!(admit(&[own], "shop", cluster), Ok(()));
        let mut other = object("v1", "Secret", "s");
        other["metadata"]["namespace"] = "kube-system".into();
        assert_eq!(
            admit(&[other], "shop", cluster),
            Err(Refused::OtherNamespace {
                object: "Secret/s".into(),
                namespace: "kube-system".into()
            })
        );
    }

    #[test]
    fn an_object_without_kind_or_name_is_refused() {
        assert_eq!(
            admit(
                &[json!({"apiVersion": "v1", "kind": "ConfigMap"})],
                "shop",
                cluster
            ),
            Err(Refused::Malformed)
        );
        assert_eq!(
            admit(&[json!({"metadata": {"name": "x"}})], "shop", cluster),
            Err(Refused::Malformed)
        );
    }

    #[test]
    fn every_allowed_kind_is_one_the_agent_prunes() {
        for (group, kind) in ALLOWED {
            assert!(
                crate::apply::PRUNABLE.iter().any(|(api_version, k)| {
                    k == kind && api_version.rsplit_once('/').map_or("", |(g, _)| g) == *group
                }),
                "{group} {kind} is applied but never pruned"
            );
        }
    }

    fn reserved() -> BTreeSet<String> {
        ["kubenest-registry", "shop-web-git"]
            .into_iter()
            .map(str::to_owned)
            .collect()
    }

    fn deployment(pod: Value) -> Value {
        json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web"},
               "spec": {"template": {"spec": pod}}})
    }

    #[test]
    fn a_pod_that_would_read_credentials_refuses_the_render_naming_them() {
        let c = |extra: Value| {
            let mut container = json!({"name": "c", "image": "x"});
            container
                .as_object_mut()
                .unwrap()
                .extend(extra.as_object().unwrap().clone());
            json!({"containers": [container]})
        };
        for (pod, secret) in [
            (
                json!({"containers": [{"name": "c", "image": "x"}],
                       "volumes": [{"name": "v", "secret": {"secretName": "kubenest-registry"}}]}),
                "kubenest-registry",
            ),
            (
                json!({"containers": [{"name": "c", "image": "x"}], "volumes": [{"name": "v",
                       "projected": {"sources": [{"secret": {"name": "shop-web-git"}}]}}]}),
                "shop-web-git",
            ),
            (
                c(json!({"env": [{"name": "P", "valueFrom": {"secretKeyRef": {
                    "name": "shop-web-git", "key": "password"}}}]})),
                "shop-web-git",
            ),
            (
                c(json!({"envFrom": [{"secretRef": {"name": "kubenest-registry"}}]})),
                "kubenest-registry",
            ),
            (
                json!({"initContainers": [{"name": "i", "image": "x", "envFrom": [
                    {"secretRef": {"name": "shop-web-git"}}]}], "containers": []}),
                "shop-web-git",
            ),
            (
                json!({"containers": [], "volumes": [{"name": "v", "csi": {"driver": "d",
                       "nodePublishSecretRef": {"name": "kubenest-registry"}}}]}),
                "kubenest-registry",
            ),
        ] {
            assert_eq!(
                credentials(&[deployment(pod.clone())], &reserved()),
                Err(Refused::Credentials {
                    object: "Deployment/web".into(),
                    secret: secret.into(),
                    how: "reads"
                }),
                "{pod}"
            );
        }
    }

    #[test]
    fn a_chart_may_not_overwrite_credentials_nor_serve_them_as_tls() {
        let secret = object("v1", "Secret", "kubenest-registry");
        assert!(matches!(
            credentials(&[secret], &reserved()),
            Err(Refused::Credentials {
                how: "overwrites",
                ..
            })
        ));
        let ingress = json!({"apiVersion": "networking.k8s.io/v1", "kind": "Ingress",
            "metadata": {"name": "web"},
            "spec": {"tls": [{"hosts": ["a.example"], "secretName": "shop-web-git"}]}});
        assert!(matches!(
            credentials(&[ingress], &reserved()),
            Err(Refused::Credentials { how: "reads", .. })
        ));
    }

    #[test]
    fn pulling_with_the_registry_secret_and_reading_other_secrets_is_admitted() {
        let pod = json!({
            "imagePullSecrets": [{"name": "kubenest-registry"}],
            "containers": [{"name": "c", "image": "x",
                "envFrom": [{"secretRef": {"name": "shop-web-env"}}],
                "env": [{"name": "A", "valueFrom": {"secretKeyRef": {"name": "db-exports", "key": "password"}}}]}],
            "volumes": [{"name": "v", "secret": {"secretName": "web-tls"}}],
        });
        let objects = [deployment(pod), object("v1", "Secret", "web-tls")];
        assert_eq!(credentials(&objects, &reserved()), Ok(()));
    }
}
