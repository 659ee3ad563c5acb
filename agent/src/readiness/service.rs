//! Whether a Service serves (pure): see the parent module.

use serde_json::Value;

use super::{Readiness, judged};

/// The readiness of Service `live` given its EndpointSlices (`slices`); `idle`: nothing is
/// meant to serve behind it now (see [`idle`]).
pub fn service(live: &Value, slices: &[Value], idle: bool) -> Readiness {
    let Some(selector) = selector(live) else {
        return judged(true, String::new());
    };
    if live.pointer("/spec/type").and_then(Value::as_str) == Some("ExternalName") || idle {
        return judged(true, String::new());
    }
    // An endpoint's `ready` left unset means ready (the EndpointSlice API's own rule).
    let ready = slices
        .iter()
        .filter_map(|slice| slice["endpoints"].as_array())
        .flatten()
        .any(|endpoint| endpoint.pointer("/conditions/ready") != Some(&Value::Bool(false)));
    let labels: Vec<String> = selector.iter().map(|(k, v)| format!("{k}={v}")).collect();
    judged(
        ready,
        format!(
            "no ready endpoint: no ready pod matches its selector {}",
            labels.join(",")
        ),
    )
}

/// A Service's selector, if it has a non-empty one.
fn selector(live: &Value) -> Option<Vec<(&str, &str)>> {
    let pairs: Vec<(&str, &str)> = live
        .pointer("/spec/selector")?
        .as_object()?
        .iter()
        .filter_map(|(k, v)| Some((k.as_str(), v.as_str()?)))
        .collect();
    (!pairs.is_empty()).then_some(pairs)
}

/// Whether nothing of `rendered` is meant to serve behind Service `service` (pure): at least
/// one workload's pod template matches its selector, and every one that does asks for no
/// replicas.
pub fn idle(service: &Value, rendered: &[Value]) -> bool {
    let Some(selector) = selector(service) else {
        return false;
    };
    let mut backing = rendered.iter().filter(|object| {
        let kind = object["kind"].as_str().unwrap_or_default();
        let labels = &object["spec"]["template"]["metadata"]["labels"];
        matches!(kind, "Deployment" | "StatefulSet")
            && selector
                .iter()
                .all(|(k, v)| labels[*k].as_str() == Some(*v))
    });
    let mut any = false;
    let all_zero = backing.all(|workload| {
        any = true;
        workload.pointer("/spec/replicas").and_then(Value::as_u64) == Some(0)
    });
    any && all_zero
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn web_service(selector: Value) -> Value {
        json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "web"},
               "spec": {"selector": selector, "ports": [{"port": 80}]}})
    }

    fn slice(ready: &[Option<bool>]) -> Value {
        let endpoints: Vec<Value> = ready
            .iter()
            .map(|r| match r {
                Some(r) => json!({"addresses": ["10.0.0.1"], "conditions": {"ready": r}}),
                None => json!({"addresses": ["10.0.0.1"]}),
            })
            .collect();
        json!({"endpoints": endpoints})
    }

    #[test]
    fn a_service_is_ready_with_a_ready_endpoint_and_says_its_selector_without_one() {
        let svc = web_service(json!({"app": "web"}));
        assert!(service(&svc, &[slice(&[Some(false), Some(true)])], false).ready);
        assert!(
            service(&svc, &[slice(&[None])], false).ready,
            "unset means ready"
        );
        let none = service(&svc, &[slice(&[Some(false)])], false);
        assert!(!none.ready);
        assert_eq!(
            none.message,
            "no ready endpoint: no ready pod matches its selector app=web"
        );
        assert!(!service(&svc, &[], false).ready, "no slice at all");
        assert!(service(&svc, &[], true).ready, "nothing is meant to serve");
        // No selector (endpoints by hand) and ExternalName are what they are.
        assert!(service(&web_service(json!({})), &[], false).ready);
        let mut external = web_service(json!({"app": "web"}));
        external["spec"]["type"] = json!("ExternalName");
        assert!(service(&external, &[], false).ready);
    }

    #[test]
    fn a_service_is_idle_only_when_every_workload_it_selects_asks_for_no_replicas() {
        let workload = |kind: &str, app: &str, replicas: u64| {
            json!({"kind": kind, "spec": {"replicas": replicas,
                   "template": {"metadata": {"labels": {"app": app, "tier": "x"}}}}})
        };
        let svc = web_service(json!({"app": "web"}));
        assert!(idle(&svc, &[workload("Deployment", "web", 0)]));
        assert!(!idle(
            &svc,
            &[
                workload("Deployment", "web", 0),
                workload("StatefulSet", "web", 1)
            ]
        ));
        assert!(
            !idle(&svc, &[workload("Deployment", "db", 0)]),
            "selects none"
        );
        assert!(!idle(&svc, &[]));
    }
}
