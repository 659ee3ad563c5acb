//! The objects that fence a project namespace (pure): a ResourceQuota, a LimitRange and a
//! NetworkPolicy, each named once per namespace and labelled as the agent's.

use kubenest_contracts as wire;
use kubenest_crds::names::labels;
use serde_json::{Map, Value, json};

/// The ResourceQuota of a project namespace.
pub const QUOTA: &str = "kubenest-quota";
/// The LimitRange of a project namespace.
pub const DEFAULTS: &str = "kubenest-defaults";
/// The NetworkPolicy of an isolated project namespace.
pub const ISOLATION: &str = "kubenest-isolation";
/// The NetworkPolicy that lets an isolated project's builds reach their Git server and
/// registry (its pods carry [`labels::BUILD_ID`], which no chart may put on its own).
pub const BUILDS: &str = "kubenest-builds";

/// The fences: (apiVersion, kind, name), each name once per namespace; their kinds are the
/// applier's [`crate::apply::FENCES`].
pub const KINDS: [(&str, &str, &str); 4] = [
    ("v1", "ResourceQuota", QUOTA),
    ("v1", "LimitRange", DEFAULTS),
    ("networking.k8s.io/v1", "NetworkPolicy", ISOLATION),
    ("networking.k8s.io/v1", "NetworkPolicy", BUILDS),
];

/// Where a project's fences are and who else may reach it.
#[derive(Debug, Clone)]
pub struct Place<'a> {
    pub namespace: &'a str,
    /// The organization's id, as the controllers label every project namespace
    /// ([`labels::ORGANIZATION`]); without it no other project can be allowed in.
    pub organization: Option<&'a str>,
    /// Namespaces whose pods may always connect: the agent's own, an ingress controller's.
    pub trusted: &'a [String],
}

fn metadata(place: &Place<'_>, name: &str) -> Value {
    json!({
        "name": name,
        "namespace": place.namespace,
        "labels": {labels::MANAGED_BY: labels::MANAGED_BY_AGENT},
    })
}

/// Every fence the namespace should hold, and the names of those it should not: (apiVersion,
/// kind, name, the object or `None`).
pub fn fences(
    place: &Place<'_>,
    fences: &wire::Fences,
) -> Vec<(&'static str, &'static str, &'static str, Option<Value>)> {
    vec![
        (
            "v1",
            "ResourceQuota",
            QUOTA,
            fences.quota.as_ref().and_then(|q| quota(place, q)),
        ),
        (
            "v1",
            "LimitRange",
            DEFAULTS,
            fences.defaults.as_ref().and_then(|d| defaults(place, d)),
        ),
        (
            "networking.k8s.io/v1",
            "NetworkPolicy",
            ISOLATION,
            fences
                .network
                .isolated
                .then(|| isolation(place, &fences.network)),
        ),
        (
            "networking.k8s.io/v1",
            "NetworkPolicy",
            BUILDS,
            fences.network.isolated.then(|| builds(place)),
        ),
    ]
}

/// A build clones from its Git server and pushes to its registry, wherever they are: its pods
/// may open any connection (policies add up, so this widens only theirs). They still take
/// none but from their own namespace and the trusted ones.
fn builds(place: &Place<'_>) -> Value {
    json!({
        "apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy",
        "metadata": metadata(place, BUILDS),
        "spec": {
            "podSelector": {"matchExpressions": [
                {"key": labels::BUILD_ID, "operator": "Exists"}
            ]},
            "policyTypes": ["Egress"],
            "egress": [{}],
        },
    })
}

fn quota(place: &Place<'_>, quota: &wire::Quota) -> Option<Value> {
    let mut hard = Map::new();
    let mut put = |key: &str, value: Option<String>| {
        if let Some(value) = value {
            hard.insert(key.into(), Value::String(value));
        }
    };
    put("requests.cpu", quota.cpu.clone());
    put("requests.memory", quota.memory.clone());
    put("requests.storage", quota.storage.clone());
    put("pods", quota.pods.map(|n| n.to_string()));
    put(
        "services.loadbalancers",
        quota.load_balancers.map(|n| n.to_string()),
    );
    (!hard.is_empty()).then(|| {
        json!({
            "apiVersion": "v1", "kind": "ResourceQuota",
            "metadata": metadata(place, QUOTA),
            "spec": {"hard": hard},
        })
    })
}

fn defaults(place: &Place<'_>, defaults: &wire::Resources) -> Option<Value> {
    let pair = |cpu: &Option<String>, memory: &Option<String>| {
        let mut out = Map::new();
        if let Some(cpu) = cpu {
            out.insert("cpu".into(), Value::String(cpu.clone()));
        }
        if let Some(memory) = memory {
            out.insert("memory".into(), Value::String(memory.clone()));
        }
        out
    };
    let requests = pair(&defaults.cpu_request, &defaults.memory_request);
    let limits = pair(&defaults.cpu_limit, &defaults.memory_limit);
    if requests.is_empty() && limits.is_empty() {
        return None;
    }
    let mut limit = json!({"type": "Container"});
    if !requests.is_empty() {
        limit["defaultRequest"] = Value::Object(requests);
    }
    if !limits.is_empty() {
        limit["default"] = Value::Object(limits);
    }
    Some(json!({
        "apiVersion": "v1", "kind": "LimitRange",
        "metadata": metadata(place, DEFAULTS),
        "spec": {"limits": [limit]},
    }))
}

/// Isolated: pods take connections from their own namespace, the trusted namespaces and the
/// allowed projects of the same organization; they open them to their own namespace, to any
/// project namespace (whose own fences decide whether it takes them), to DNS on port 53
/// anywhere, and to the egress rules' blocks.
fn isolation(place: &Place<'_>, network: &wire::NetworkFence) -> Value {
    let mut from = vec![json!({"podSelector": {}})];
    from.extend(place.trusted.iter().map(
        |ns| json!({"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": ns}}}),
    ));
    if let Some(org) = place.organization {
        from.extend(network.allow_from.iter().map(|project| {
            json!({"namespaceSelector": {"matchLabels": {
                labels::ORGANIZATION: org,
                labels::PROJECT: project.as_str(),
            }}})
        }));
    }
    let mut egress = vec![
        json!({"to": [{"podSelector": {}}]}),
        json!({"to": [{"namespaceSelector": {"matchExpressions": [
            {"key": labels::PROJECT_ID, "operator": "Exists"}
        ]}}]}),
        json!({"ports": [{"protocol": "UDP", "port": 53}, {"protocol": "TCP", "port": 53}]}),
    ];
    egress.extend(network.egress.iter().map(|rule| {
        let mut out = json!({"to": [{"ipBlock": {"cidr": rule.cidr}}]});
        if !rule.ports.is_empty() {
            out["ports"] = rule
                .ports
                .iter()
                .map(|p| json!({"protocol": "TCP", "port": p.0}))
                .collect();
        }
        out
    }));
    json!({
        "apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy",
        "metadata": metadata(place, ISOLATION),
        "spec": {
            "podSelector": {},
            "policyTypes": ["Ingress", "Egress"],
            "ingress": [{"from": from}],
            "egress": egress,
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn place<'a>(trusted: &'a [String]) -> Place<'a> {
        Place {
            namespace: "shop",
            organization: Some("org-1"),
            trusted,
        }
    }

    #[test]
    fn a_default_project_is_isolated_without_quota_or_defaults() {
        let trusted = ["kubenest-system".to_owned()];
        let objects = fences(&place(&trusted), &wire::Fences::default());
        let present: Vec<_> = objects
            .iter()
            .filter(|o| o.3.is_some())
            .map(|o| o.1)
            .collect();
        assert_eq!(present, ["NetworkPolicy", "NetworkPolicy"]);
        let policy = objects[2].3.clone().unwrap();
        assert_eq!(policy["metadata"]["namespace"], "shop");
        let from = &policy["spec"]["ingress"][0]["from"];
        assert_eq!(from[0], json!({"podSelector": {}}));
        assert_eq!(
            from[1]["namespaceSelector"]["matchLabels"]["kubernetes.io/metadata.name"],
            "kubenest-system"
        );
        assert_eq!(from.as_array().unwrap().len(), 2);
    }

    #[test]
    fn allowed_projects_are_matched_within_the_organization_and_egress_rules_by_block() {
        let network = wire::NetworkFence {
            isolated: true,
            allow_from: vec![wire::Name::new("web")],
            egress: vec![wire::EgressRule {
                cidr: "10.0.0.0/8".into(),
                ports: vec![wire::Port(443)],
            }],
        };
        let policy = isolation(&place(&[]), &network);
        assert_eq!(
            policy["spec"]["ingress"][0]["from"][1]["namespaceSelector"]["matchLabels"],
            json!({labels::ORGANIZATION: "org-1", labels::PROJECT: "web"})
        );
        assert_eq!(
            policy["spec"]["egress"][3],
            json!({"to": [{"ipBlock": {"cidr": "10.0.0.0/8"}}],
                   "ports": [{"protocol": "TCP", "port": 443}]})
        );
        // Without the organization's label nothing but the namespace itself is let in.
        let unlabelled = Place {
            organization: None,
            ..place(&[])
        };
        let policy = isolation(&unlabelled, &network);
        assert_eq!(
            policy["spec"]["ingress"][0]["from"]
                .as_array()
                .unwrap()
                .len(),
            1
        );
    }

    #[test]
    fn a_quota_and_defaults_become_a_resource_quota_and_a_limit_range() {
        let fenced = wire::Fences {
            quota: Some(wire::Quota {
                cpu: Some("2".into()),
                pods: Some(10),
                ..wire::Quota::default()
            }),
            defaults: Some(wire::Resources {
                cpu_request: Some("100m".into()),
                memory_limit: Some("256Mi".into()),
                ..wire::Resources::default()
            }),
            network: wire::NetworkFence {
                isolated: false,
                ..wire::NetworkFence::default()
            },
        };
        let objects = fences(&place(&[]), &fenced);
        assert_eq!(
            objects[0].3.as_ref().unwrap()["spec"]["hard"],
            json!({"requests.cpu": "2", "pods": "10"})
        );
        assert_eq!(
            objects[1].3.as_ref().unwrap()["spec"]["limits"][0],
            json!({"type": "Container", "defaultRequest": {"cpu": "100m"},
                   "default": {"memory": "256Mi"}})
        );
        assert!(objects[2].3.is_none() && objects[3].3.is_none());
    }
}
