//! Ingresses: served once an ingress controller publishes their address.

use serde_json::Value;

use super::Readiness;

/// The address an ingress controller published for `live`, an Ingress (a hostname or an IP).
pub fn ingress_address(live: &Value) -> Option<String> {
    live.pointer("/status/loadBalancer/ingress")?
        .as_array()?
        .iter()
        .find_map(|i| i.get("hostname").or_else(|| i.get("ip"))?.as_str())
        .map(str::to_owned)
}

/// An Ingress is served once an ingress controller has taken it and published its address;
/// until then nothing answers for its hosts (a cluster without a controller never does).
pub fn ingress(live: &Value) -> Readiness {
    let ready = ingress_address(live).is_some();
    let message = if ready {
        String::new()
    } else {
        let name = live.pointer("/metadata/name").and_then(Value::as_str);
        let hosts: Vec<&str> = live
            .pointer("/spec/rules")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(|r| r.get("host").and_then(Value::as_str))
            .collect();
        format!(
            "Ingress {}: no ingress controller has published an address for {} yet (does the \
             cluster run one for its class?)",
            name.unwrap_or_default(),
            hosts.join(", ")
        )
    };
    Readiness {
        ready,
        ready_replicas: u32::from(ready),
        desired_replicas: 1,
        message,
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn shop(status: Value) -> Value {
        json!({"metadata": {"name": "shop-web"},
               "spec": {"rules": [{"host": "shop.example.test"}]},
               "status": status})
    }

    #[test]
    fn an_ingress_is_served_once_a_controller_publishes_an_address() {
        let waiting = ingress(&shop(json!({"loadBalancer": {}})));
        assert!(!waiting.ready);
        assert!(
            waiting.message.contains("shop-web") && waiting.message.contains("shop.example.test"),
            "{}",
            waiting.message
        );
        let by_ip = shop(json!({"loadBalancer": {"ingress": [{"ip": "10.89.0.1"}]}}));
        assert!(ingress(&by_ip).ready);
        assert_eq!(ingress_address(&by_ip).as_deref(), Some("10.89.0.1"));
        let by_name = shop(json!({"loadBalancer": {"ingress": [{"hostname": "lb.example.test"}]}}));
        assert_eq!(
            ingress_address(&by_name).as_deref(),
            Some("lb.example.test")
        );
    }
}
