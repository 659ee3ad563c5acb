//! Drift: what is live against what the agent applied, for the fields it owns (pure).
//!
//! The agent applies with server-side apply under one field manager. When someone else changes
//! an owned field (`kubectl scale`, `kubectl set image`, an autoscaler), the live object differs
//! from the desired one and the API server records the other manager as the field's owner. That
//! drift is `recoverable`: the agent reports field, desired, observed and manager, and applies
//! again. A Deployment whose rollout failed its progress deadline cannot be healed by applying
//! again: that is `blocked_sync`, and changes are refused until it clears.

use kubenest_contracts as wire;
use serde_json::Value;

use kubenest_crds::names::field_managers;

/// The fields of a Deployment the agent compares: (path for people, path in the object).
fn owned_paths(container: &str) -> Vec<(String, Vec<String>)> {
    let c = |field: &str| {
        vec![
            "spec".to_owned(),
            "template".into(),
            "spec".into(),
            "containers".into(),
            format!("name={container}"),
            field.into(),
        ]
    };
    vec![
        (
            "spec.replicas".into(),
            vec!["spec".into(), "replicas".into()],
        ),
        (
            format!("spec.template.spec.containers[{container}].image"),
            c("image"),
        ),
        (
            format!("spec.template.spec.containers[{container}].env"),
            c("env"),
        ),
        (
            format!("spec.template.spec.containers[{container}].ports"),
            c("ports"),
        ),
    ]
}

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

/// Where `live` differs from `desired` in the fields the agent owns.
pub fn deployment_drift(desired: &Value, live: &Value) -> Vec<wire::DriftDetail> {
    let name = desired
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let container = desired
        .pointer("/spec/template/spec/containers/0/name")
        .and_then(Value::as_str)
        .unwrap_or_default();
    owned_paths(container)
        .into_iter()
        .filter_map(|(field, path)| {
            let want = normalized(at(desired, &path));
            let have = normalized(at(live, &path));
            (!same(&want, &have)).then(|| wire::DriftDetail {
                resource: format!("Deployment/{name}"),
                field,
                manager: manager_of(live, &path),
                desired: want,
                observed: have,
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

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn desired() -> Value {
        json!({
            "metadata": {"name": "shop-web"},
            "spec": {"replicas": 3, "template": {"spec": {"containers": [
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
        assert_eq!(deployment_drift(&desired(), &live(3, "nginx:1.27")), vec![]);
    }

    #[test]
    fn scaling_behind_the_agents_back_is_reported_with_the_manager() {
        let drift = deployment_drift(&desired(), &live(7, "nginx:1.27"));
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
        let drift = deployment_drift(&desired(), &live(3, "nginx:9"));
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
}
