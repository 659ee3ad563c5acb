//! What a round cost: CPU by program from `/proc`, and the requests each API server served.

use super::*;

/// CPU seconds every process on the machine has used so far, by program name (this benchmark
/// is the machine's only load, so the difference over a round is what the round cost).
pub(super) fn cpu_by_program() -> HashMap<String, f64> {
    let mut used = HashMap::new();
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return used;
    };
    for entry in entries.flatten() {
        let Ok(stat) = std::fs::read_to_string(entry.path().join("stat")) else {
            continue;
        };
        // `pid (comm) state ppid ...`: the name may hold spaces, the fields after it do not.
        let (Some(open), Some(close)) = (stat.find('('), stat.rfind(')')) else {
            continue;
        };
        let mut name = stat[open + 1..close].to_owned();
        let fields: Vec<&str> = stat[close + 1..].split_whitespace().collect();
        // Kernel threads (children of kthreadd) rename themselves as they work: not ours.
        if fields.get(1) == Some(&"2") || name == "kthreadd" {
            continue;
        }
        // One API server per cluster: named by the cluster its etcd prefix holds.
        if name == "kube-apiserver"
            && let Ok(cmdline) = std::fs::read(entry.path().join("cmdline"))
            && let Some(cluster) = String::from_utf8_lossy(&cmdline)
                .split('\0')
                .find_map(|a| a.strip_prefix("--etcd-prefix=/clusters/"))
        {
            name = format!("kube-apiserver {cluster}");
        }
        // utime and stime are the 14th and 15th fields, the 12th and 13th after the name.
        let ticks: f64 = fields
            .get(11..13)
            .map(|t| t.iter().filter_map(|v| v.parse::<f64>().ok()).sum())
            .unwrap_or(0.0);
        *used.entry(name).or_default() += ticks / 100.0;
    }
    used
}

/// Adds how much each counter grew between two readings to `total` (CPU seconds by program,
/// requests by kind).
pub(super) fn add_growth(
    total: &mut HashMap<String, f64>,
    before: &HashMap<String, f64>,
    after: &HashMap<String, f64>,
) {
    for (name, now) in after {
        let spent = now - before.get(name).copied().unwrap_or(0.0);
        if spent > 0.0 {
            *total.entry(name.clone()).or_default() += spent;
        }
    }
}

/// CPU milliseconds per sample by program, the busiest first, leaving out the idle ones.
pub(super) fn per_sample(
    total: &HashMap<String, f64>,
    samples: usize,
) -> serde_json::Map<String, Value> {
    largest_per_sample(total, samples, 1000.0, 0.5)
}

/// Each counter's growth × `scale` per sample, the largest first, leaving out those under
/// `floor` (rounded to a tenth).
pub(super) fn largest_per_sample(
    total: &HashMap<String, f64>,
    samples: usize,
    scale: f64,
    floor: f64,
) -> serde_json::Map<String, Value> {
    let mut all: Vec<(&String, f64)> = total
        .iter()
        .map(|(name, v)| (name, v * scale / samples as f64))
        .filter(|(_, v)| *v >= floor)
        .collect();
    all.sort_by(|a, b| b.1.total_cmp(&a.1));
    all.into_iter()
        .map(|(name, v)| (name.clone(), json!((v * 10.0).round() / 10.0)))
        .collect()
}

/// The sum of a map of figures per sample (requests: the watch events sent are not requests).
pub(super) fn total(figures: &serde_json::Map<String, Value>) -> f64 {
    figures
        .iter()
        .filter(|(name, _)| !name.starts_with("WATCH-EVENT"))
        .filter_map(|(_, v)| v.as_f64())
        .sum()
}

/// Requests a kube-apiserver has served so far, by verb and resource (`PATCH apps/status`),
/// from its `apiserver_request_total` metric, and the watch events it has sent by kind
/// (`WATCH-EVENT App`), from `apiserver_watch_events_total`.
pub(super) async fn requests_served(client: &kube::Client) -> HashMap<String, f64> {
    let mut served = HashMap::new();
    let request = http::Request::get("/metrics").body(Vec::new()).unwrap();
    let Ok(text) = client.request_text(request).await else {
        return served;
    };
    for line in text.lines() {
        // Watch events sent, by kind: what each write costs in fan-out to the watchers.
        let (rest, watched) = match line.strip_prefix("apiserver_request_total{") {
            Some(rest) => (rest, false),
            None => match line.strip_prefix("apiserver_watch_events_total{") {
                Some(rest) => (rest, true),
                None => continue,
            },
        };
        let Some((labels, value)) = rest.rsplit_once("} ") else {
            continue;
        };
        let label = |name: &str| {
            labels
                .split("\",")
                .find_map(|pair| pair.strip_prefix(name)?.strip_prefix("=\""))
                .map(|v| v.trim_end_matches('"').to_owned())
                .unwrap_or_default()
        };
        let count: f64 = value.trim().parse().unwrap_or(0.0);
        if watched {
            let kind = [label("resource"), label("kind")].concat();
            *served.entry(format!("WATCH-EVENT {kind}")).or_default() += count;
            continue;
        }
        let (resource, subresource) = (label("resource"), label("subresource"));
        let what = if subresource.is_empty() {
            resource
        } else {
            format!("{resource}/{subresource}")
        };
        *served
            .entry(format!("{} {what}", label("verb")))
            .or_default() += count;
    }
    served
}

/// [`requests_served`] by the management and the workload API server, then a pause of 100 ms.
pub(super) async fn counts(
    management: &kube::Client,
    workload: &kube::Client,
) -> (HashMap<String, f64>, HashMap<String, f64>) {
    let served = (
        requests_served(management).await,
        requests_served(workload).await,
    );
    tokio::time::sleep(Duration::from_millis(100)).await;
    served
}
