//! The cluster's capacity for heartbeats: nodes, CPU and memory allocatable against what pods
//! request.

use k8s_openapi::api::core::v1::{Node, Pod};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use kube::api::{Api, ListParams};
use kubenest_contracts as wire;

/// A Kubernetes quantity in thousandths of its unit (CPU millicores, memory milli-bytes are not
/// used: see [`bytes`]); `None` when it does not parse.
pub fn millis(quantity: &str) -> Option<u64> {
    let q = quantity.trim();
    if let Some(m) = q.strip_suffix('m') {
        return m.parse::<f64>().ok().map(|v| v.round() as u64);
    }
    scaled(q).map(|v| (v * 1000.0).round() as u64)
}

/// A memory quantity in bytes.
pub fn bytes(quantity: &str) -> Option<u64> {
    let q = quantity.trim();
    if let Some(m) = q.strip_suffix('m') {
        return m.parse::<f64>().ok().map(|v| (v / 1000.0).round() as u64);
    }
    scaled(q).map(|v| v.round() as u64)
}

fn scaled(q: &str) -> Option<f64> {
    const SUFFIXES: &[(&str, f64)] = &[
        ("Ki", 1024.0),
        ("Mi", 1_048_576.0),
        ("Gi", 1_073_741_824.0),
        ("Ti", 1_099_511_627_776.0),
        ("Pi", 1_125_899_906_842_624.0),
        ("Ei", 1_152_921_504_606_846_976.0),
        ("k", 1e3),
        ("M", 1e6),
        ("G", 1e9),
        ("T", 1e12),
        ("P", 1e15),
        ("E", 1e18),
    ];
    for (suffix, factor) in SUFFIXES {
        if let Some(number) = q.strip_suffix(suffix) {
            return number.parse::<f64>().ok().map(|n| n * factor);
        }
    }
    q.parse::<f64>().ok().filter(|n| n.is_finite() && *n >= 0.0)
}

fn sum<'a>(quantities: impl Iterator<Item = &'a Quantity>, unit: fn(&str) -> Option<u64>) -> u64 {
    quantities.filter_map(|q| unit(&q.0)).sum()
}

/// Reads the capacity from the local API server.
pub async fn heartbeat(client: &kube::Client) -> Result<wire::Heartbeat, kube::Error> {
    let nodes = Api::<Node>::all(client.clone())
        .list(&ListParams::default())
        .await?;
    let pods = Api::<Pod>::all(client.clone())
        .list(&ListParams::default().fields("status.phase!=Succeeded,status.phase!=Failed"))
        .await?;
    let allocatable = |name: &str, unit: fn(&str) -> Option<u64>| {
        sum(
            nodes.items.iter().filter_map(|n| {
                n.status
                    .as_ref()
                    .and_then(|s| s.allocatable.as_ref())
                    .and_then(|a| a.get(name))
            }),
            unit,
        )
    };
    let requested = |name: &str, unit: fn(&str) -> Option<u64>| {
        sum(
            pods.items
                .iter()
                .filter(|p| p.spec.as_ref().is_some_and(|s| s.node_name.is_some()))
                .flat_map(|p| p.spec.iter().flat_map(|s| s.containers.iter()))
                .filter_map(|c| {
                    c.resources
                        .as_ref()
                        .and_then(|r| r.requests.as_ref())
                        .and_then(|r| r.get(name))
                }),
            unit,
        )
    };
    Ok(wire::Heartbeat {
        node_count: u32::try_from(nodes.items.len()).unwrap_or(u32::MAX),
        cpu_allocatable_millis: allocatable("cpu", millis),
        cpu_requested_millis: requested("cpu", millis),
        memory_allocatable_bytes: allocatable("memory", bytes),
        memory_requested_bytes: requested("memory", bytes),
        observed_at: chrono::Utc::now(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_quantities_become_millicores() {
        assert_eq!(millis("250m"), Some(250));
        assert_eq!(millis("2"), Some(2000));
        assert_eq!(millis("0.5"), Some(500));
        assert_eq!(millis("lots"), None);
    }

    #[test]
    fn memory_quantities_become_bytes() {
        assert_eq!(bytes("128Mi"), Some(134_217_728));
        assert_eq!(bytes("1Gi"), Some(1_073_741_824));
        assert_eq!(bytes("1k"), Some(1000));
        assert_eq!(bytes("1e3"), Some(1000));
        assert_eq!(bytes("32"), Some(32));
    }
}
