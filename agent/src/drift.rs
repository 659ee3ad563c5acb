//! Drift: what is live against what the agent applied, for the fields it owns (pure).
//!
//! The agent applies with server-side apply under one field manager. When someone else changes
//! an owned field (`kubectl scale`, `kubectl set image`, `kubectl edit service`, an autoscaler),
//! the live object differs from the desired one and the API server records the other manager as
//! the field's owner. That drift is `recoverable`: the agent reports kind, name, field, desired,
//! observed and manager, and applies again. Every kind is compared the same way ([`drift`]):
//! each field the agent sets under `spec` (a ConfigMap's or Secret's `data`), containers matched
//! by name, other lists whole; a Secret's values are never reported. A Deployment whose rollout
//! failed its progress deadline cannot be healed by applying again: that is `blocked_sync`, and
//! changes are refused until it clears.

use kubenest_contracts as wire;
use serde_json::Value;

use kubenest_crds::names::field_managers;

/// Follows a path; `name=x` selects the list item whose `name` is `x`.
fn at<'a>(object: &'a Value, path: &[String]) -> Option<&'a Value> {
    path.iter()
        .try_fold(object, |value, step| match step.split_once('=') {
            Some(("name", name)) => value
                .as_array()?
                .iter()
                .find(|item| item.get("name").and_then(Value::as_str) == Some(name)),
            _ => value.get(step),
        })
}

/// The same path in `managedFields`' `fieldsV1` notation.
fn fields_path(path: &[String]) -> Vec<String> {
    path.iter()
        .map(|step| match step.split_once('=') {
            Some((key, value)) => format!("k:{{\"{key}\":\"{value}\"}}"),
            None => format!("f:{step}"),
        })
        .collect()
}

/// The manager other than the agent that owns `path` of `live`, newest first.
pub fn manager_of(live: &Value, path: &[String]) -> Option<String> {
    let fields = fields_path(path);
    let mut owners: Vec<(&str, &str)> = live
        .pointer("/metadata/managedFields")?
        .as_array()?
        .iter()
        .filter_map(|entry| {
            let manager = entry.get("manager")?.as_str()?;
            let owned = fields
                .iter()
                .try_fold(entry.get("fieldsV1")?, |v, step| v.get(step))
                .is_some();
            let time = entry.get("time").and_then(Value::as_str).unwrap_or("");
            (owned && manager != field_managers::AGENT).then_some((manager, time))
        })
        .collect();
    owners.sort_by(|a, b| b.1.cmp(a.1));
    owners.first().map(|(manager, _)| (*manager).to_owned())
}

/// Empty env lists and absent ones are the same to Kubernetes.
fn normalized(value: Option<&Value>) -> Value {
    match value {
        None | Some(Value::Null) => Value::Array(vec![]),
        Some(value) => value.clone(),
    }
}

/// What a Secret's drift says instead of its values.
const REDACTED: &str = "(redacted)";

/// Lists whose items the API server merges by `name` (their server-side apply key), compared
/// item by item; any other list is compared whole.
fn keyed_by_name(key: Option<&String>) -> bool {
    matches!(
        key.map(String::as_str),
        Some("containers" | "initContainers")
    )
}

/// Every field `value` (at `field`, `path`) sets, for comparing: (field for people, path in the
/// object, desired value).
fn leaves<'a>(
    value: &'a Value,
    field: String,
    path: Vec<String>,
    out: &mut Vec<(String, Vec<String>, &'a Value)>,
) {
    match value {
        // An empty map sets nothing.
        Value::Object(map) if map.is_empty() => {}
        Value::Object(map) => {
            for (key, item) in map {
                let mut deeper = path.clone();
                deeper.push(key.clone());
                leaves(item, format!("{field}.{key}"), deeper, out);
            }
        }
        Value::Array(items)
            if keyed_by_name(path.last())
                && items
                    .iter()
                    .all(|i| i.get("name").and_then(Value::as_str).is_some()) =>
        {
            for item in items {
                let name = item["name"].as_str().unwrap_or_default();
                let mut deeper = path.clone();
                deeper.push(format!("name={name}"));
                leaves(item, format!("{field}[{name}]"), deeper, out);
            }
        }
        _ => out.push((field, path, value)),
    }
}

/// Where `live` differs from `desired` in what the agent sets, for an object of any kind.
pub fn drift(desired: &Value, live: &Value) -> Vec<wire::DriftDetail> {
    let kind = desired["kind"].as_str().unwrap_or_default();
    let name = desired
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let mut found = Vec::new();
    for root in ["spec", "data"] {
        if let Some(value) = desired.get(root) {
            leaves(value, root.to_owned(), vec![root.to_owned()], &mut found);
        }
    }
    found
        .into_iter()
        .filter_map(|(field, path, want)| {
            let want = normalized(Some(want));
            let have = normalized(at(live, &path));
            if same(&want, &have) {
                return None;
            }
            let (desired, observed) = if kind == "Secret" {
                (REDACTED.into(), REDACTED.into())
            } else {
                (want, have)
            };
            Some(wire::DriftDetail {
                resource: format!("{kind}/{name}"),
                field,
                manager: manager_of(live, &path),
                desired,
                observed,
            })
        })
        .collect()
}

/// Equal as Kubernetes sees it: the live side may carry defaults the desired side leaves out.
fn same(desired: &Value, live: &Value) -> bool {
    match (desired, live) {
        (Value::Object(want), Value::Object(have)) => want
            .iter()
            .all(|(key, value)| have.get(key).is_some_and(|h| same(value, h))),
        (Value::Array(want), Value::Array(have)) => {
            want.len() == have.len() && want.iter().zip(have).all(|(w, h)| same(w, h))
        }
        _ => desired == live,
    }
}

/// The failed rollout of a Deployment, if its progress deadline passed (`blocked_sync`).
pub fn blocked(live: &Value) -> Option<wire::DriftDetail> {
    let conditions = live.pointer("/status/conditions")?.as_array()?;
    let progressing = conditions
        .iter()
        .find(|c| c.get("type").and_then(Value::as_str) == Some("Progressing"))?;
    let reason = progressing.get("reason").and_then(Value::as_str)?;
    if progressing.get("status").and_then(Value::as_str) != Some("False")
        || reason != "ProgressDeadlineExceeded"
    {
        return None;
    }
    let name = live
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or_default();
    Some(wire::DriftDetail {
        resource: format!("Deployment/{name}"),
        field: "status.conditions[Progressing]".into(),
        desired: Value::String("NewReplicaSetAvailable".into()),
        observed: Value::String(reason.into()),
        manager: None,
    })
}

/// A workload object of `kind` that is still not ready when its App's progress deadline has
/// passed (`blocked_sync`): StatefulSets, DaemonSets and Jobs have no progress deadline of
/// their own, so the App's is theirs (a Deployment has one, and says so itself: [`blocked`]).
/// `waiting`: what its readiness says it waits for.
pub fn stalled(kind: &str, name: &str, waiting: &str) -> Option<wire::DriftDetail> {
    matches!(kind, "StatefulSet" | "DaemonSet" | "Job").then(|| wire::DriftDetail {
        resource: format!("{kind}/{name}"),
        field: "status".into(),
        desired: Value::String("ready".into()),
        observed: Value::String(waiting.into()),
        manager: None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn desired() -> Value {
        json!({
            "kind": "Deployment",
            "metadata": {"name": "shop-web"},
            "spec": {"replicas": 3, "template": {"metadata": {"annotations": {}}, "spec": {"containers": [
                {"name": "web", "image": "nginx:1.27", "env": [{"name": "A", "value": "1"}],
                 "ports": [{"name": "http", "containerPort": 80, "protocol": "TCP"}]}
            ]}}}
        })
    }

    fn live(replicas: u32, image: &str) -> Value {
        json!({
            "metadata": {"name": "shop-web", "managedFields": [
                {"manager": "kubenest-agent", "operation": "Apply", "time": "2026-12-01T10:00:00Z",
                 "fieldsV1": {"f:spec": {"f:template": {"f:spec": {"f:containers": {
                     "k:{\"name\":\"web\"}": {"f:image": {}, "f:env": {}}}}}}}},
                {"manager": "kubectl", "operation": "Update", "time": "2026-12-01T10:05:00Z",
                 "subresource": "scale", "fieldsV1": {"f:spec": {"f:replicas": {}}}}
            ]},
            "spec": {"replicas": replicas, "template": {"spec": {"containers": [
                {"name": "web", "image": image, "imagePullPolicy": "IfNotPresent",
                 "env": [{"name": "A", "value": "1"}],
                 "ports": [{"name": "http", "containerPort": 80, "protocol": "TCP"}]}
            ]}}}
        })
    }

    #[test]
    fn a_live_object_with_only_defaults_added_has_no_drift() {
        assert_eq!(drift(&desired(), &live(3, "nginx:1.27")), vec![]);
    }

    #[test]
    fn scaling_behind_the_agents_back_is_reported_with_the_manager() {
        let drift = drift(&desired(), &live(7, "nginx:1.27"));
        assert_eq!(drift.len(), 1);
        assert_eq!(drift[0].resource, "Deployment/shop-web");
        assert_eq!(drift[0].field, "spec.replicas");
        assert_eq!(
            (drift[0].desired.clone(), drift[0].observed.clone()),
            (json!(3), json!(7))
        );
        assert_eq!(drift[0].manager.as_deref(), Some("kubectl"));
    }

    #[test]
    fn a_changed_image_names_the_container_and_no_other_manager_when_the_agent_owns_it() {
        let drift = drift(&desired(), &live(3, "nginx:9"));
        assert_eq!(drift.len(), 1);
        assert_eq!(drift[0].field, "spec.template.spec.containers[web].image");
        assert_eq!(drift[0].manager, None);
    }

    #[test]
    fn a_missed_progress_deadline_blocks_sync() {
        let mut stuck = live(3, "nginx:1.27");
        stuck["status"] = json!({"conditions": [
            {"type": "Progressing", "status": "False", "reason": "ProgressDeadlineExceeded"}
        ]});
        let detail = blocked(&stuck).unwrap();
        assert_eq!(detail.observed, json!("ProgressDeadlineExceeded"));
        stuck["status"]["conditions"][0]["status"] = json!("True");
        assert_eq!(blocked(&stuck), None);
    }

    #[test]
    fn a_variable_added_by_hand_is_drift_of_the_whole_list() {
        let mut added = live(3, "nginx:1.27");
        added["spec"]["template"]["spec"]["containers"][0]["env"] =
            json!([{"name": "A", "value": "1"}, {"name": "DEBUG", "value": "1"}]);
        let drift = drift(&desired(), &added);
        assert_eq!(drift.len(), 1);
        assert_eq!(drift[0].field, "spec.template.spec.containers[web].env");
    }

    #[test]
    fn a_service_port_changed_by_hand_is_drift_named_by_kind_and_field() {
        let service = json!({"kind": "Service", "metadata": {"name": "shop-web"},
            "spec": {"selector": {"app": "web"},
                     "ports": [{"name": "http", "port": 8080, "targetPort": 8080, "protocol": "TCP"}]}});
        let mut live = service.clone();
        live["spec"]["ports"][0]["port"] = json!(9090);
        live["spec"]["clusterIP"] = json!("10.0.0.7");
        live["metadata"]["managedFields"] = json!([
            {"manager": "kubectl-edit", "operation": "Update", "time": "2026-12-01T10:05:00Z",
             "fieldsV1": {"f:spec": {"f:ports": {"k:{\"port\":9090,\"protocol\":\"TCP\"}": {}}}}}
        ]);
        let drift = drift(&service, &live);
        assert_eq!(drift.len(), 1, "{drift:?}");
        assert_eq!(
            (drift[0].resource.as_str(), drift[0].field.as_str()),
            ("Service/shop-web", "spec.ports")
        );
        assert_eq!(drift[0].manager.as_deref(), Some("kubectl-edit"));
        assert_eq!(drift[0].observed[0]["port"], 9090);
    }

    #[test]
    fn a_secrets_drift_names_the_key_and_never_its_values() {
        let secret = json!({"kind": "Secret", "metadata": {"name": "web-env"},
                            "data": {"TOKEN": "czNjcmV0"}});
        let mut live = secret.clone();
        live["data"]["TOKEN"] = json!("b3RoZXI=");
        let drift = drift(&secret, &live);
        assert_eq!(drift[0].field, "data.TOKEN");
        assert_eq!(
            (drift[0].desired.clone(), drift[0].observed.clone()),
            (json!(REDACTED), json!(REDACTED))
        );
    }
}
