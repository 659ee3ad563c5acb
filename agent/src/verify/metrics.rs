//! An App's own metrics (pure): its HTTP series read from a Prometheus scrape, and what two
//! scrapes of the same pods say of the time between them (request and error counts, p95
//! latency). Parsing is the `prometheus-parse` crate's; only the arithmetic is here.

use std::collections::BTreeMap;

/// The labels a request counter's status code may go by, in the order looked for: `code`
/// (Prometheus' Go client), `status` and `status_code` (as other clients and middlewares
/// spell it).
pub const STATUS_LABELS: [&str; 3] = ["code", "status", "status_code"];

/// The `+Inf` bucket's bound, as kept.
const INF: f64 = f64::MAX;

/// One scrape of one pod, reduced to what is judged.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Scrape {
    /// Requests by status class: all, and those answered 5xx.
    pub requests: f64,
    pub errors: f64,
    /// Cumulative latency buckets: upper bound → count (`+Inf` as `f64::MAX`).
    pub buckets: Vec<(f64, f64)>,
}

/// The series a scrape is read by: the App's names, or the defaults (`http_requests_total`,
/// `http_request_duration_seconds`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Series<'a> {
    /// The request counter; a sample is an error when its status code (any label of
    /// [`STATUS_LABELS`]) is 5xx.
    pub requests: &'a str,
    /// The latency histogram's base name (its `_bucket` series).
    pub latency: &'a str,
}

/// Reads `series` from a scrape (Prometheus text or OpenMetrics).
pub fn read(text: &str, series: Series<'_>) -> Result<Scrape, String> {
    let lines = text.lines().map(|l| Ok(l.to_owned()));
    let parsed = prometheus_parse::Scrape::parse(lines).map_err(|e| e.to_string())?;
    let mut scrape = Scrape::default();
    let mut buckets: BTreeMap<u64, (f64, f64)> = BTreeMap::new();
    for sample in &parsed.samples {
        match (&sample.metric, &sample.value) {
            (metric, value) if metric == series.requests => {
                let n = scalar(value);
                scrape.requests += n;
                let status = STATUS_LABELS.iter().find_map(|l| sample.labels.get(l));
                if status.is_some_and(|c| c.starts_with('5')) {
                    scrape.errors += n;
                }
            }
            (metric, prometheus_parse::Value::Histogram(counts)) if metric == series.latency => {
                for count in counts {
                    // `+Inf` as the largest finite number: the scrape is kept as JSON, which
                    // has no infinity.
                    let bound = if count.less_than.is_finite() {
                        count.less_than
                    } else {
                        INF
                    };
                    let entry = buckets.entry(bound.to_bits()).or_insert((bound, 0.0));
                    entry.1 += count.count;
                }
            }
            _ => {}
        }
    }
    let mut sorted: Vec<(f64, f64)> = buckets.into_values().collect();
    sorted.sort_by(|a, b| a.0.total_cmp(&b.0));
    scrape.buckets = sorted;
    Ok(scrape)
}

fn scalar(value: &prometheus_parse::Value) -> f64 {
    match value {
        prometheus_parse::Value::Counter(n)
        | prometheus_parse::Value::Gauge(n)
        | prometheus_parse::Value::Untyped(n) => *n,
        _ => 0.0,
    }
}

/// What happened between two scrapes of the same pods.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Window {
    pub requests: f64,
    pub errors: f64,
    /// The 95th percentile latency (seconds), if any request was timed.
    pub p95_seconds: Option<f64>,
}

impl Window {
    /// The share of requests answered 5xx (`None` without requests).
    pub fn error_ratio(&self) -> Option<f64> {
        (self.requests > 0.0).then(|| self.errors / self.requests)
    }
}

/// The window from `before` to `after`, each the sum over the same pods. A counter that went
/// down (a pod restarted) counts from zero.
pub fn between(before: &Scrape, after: &Scrape) -> Window {
    let grew = |a: f64, b: f64| if b >= a { b - a } else { b };
    let buckets: Vec<(f64, f64)> = after
        .buckets
        .iter()
        .map(|(le, count)| {
            let earlier = before
                .buckets
                .iter()
                .find(|(l, _)| l == le)
                .map_or(0.0, |(_, c)| *c);
            (*le, grew(earlier, *count))
        })
        .collect();
    Window {
        requests: grew(before.requests, after.requests),
        errors: grew(before.errors, after.errors),
        p95_seconds: quantile(&buckets, 0.95),
    }
}

/// The `q` quantile of cumulative `buckets` (upper bound → count), interpolated inside its
/// bucket as Prometheus' `histogram_quantile` does; the largest finite bound if it falls in
/// `+Inf`.
fn quantile(buckets: &[(f64, f64)], q: f64) -> Option<f64> {
    let total = buckets.last()?.1;
    if total <= 0.0 {
        return None;
    }
    let rank = q * total;
    let mut lower = (0.0, 0.0);
    for &(le, count) in buckets {
        if count >= rank {
            if le >= INF {
                return Some(lower.0);
            }
            let width = count - lower.1;
            let within = if width > 0.0 {
                (rank - lower.1) / width
            } else {
                1.0
            };
            return Some(lower.0 + (le - lower.0) * within);
        }
        lower = (le, count);
    }
    Some(lower.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    const OPENMETRICS: &str = "# HELP http_requests Requests.
# TYPE http_requests counter
http_requests_total{code=\"200\",method=\"GET\"} 70
http_requests_total{code=\"500\",method=\"GET\"} 30
# HELP http_request_duration_seconds Latency.
# TYPE http_request_duration_seconds histogram
http_request_duration_seconds_sum{method=\"GET\"} 4.0
http_request_duration_seconds_count{method=\"GET\"} 100
http_request_duration_seconds_bucket{le=\"0.01\",method=\"GET\"} 50
http_request_duration_seconds_bucket{le=\"0.1\",method=\"GET\"} 90
http_request_duration_seconds_bucket{le=\"1.0\",method=\"GET\"} 100
http_request_duration_seconds_bucket{le=\"+Inf\",method=\"GET\"} 100
# EOF
";

    const DEFAULTS: Series<'static> = Series {
        requests: kubenest_contracts::DEFAULT_REQUESTS_METRIC,
        latency: kubenest_contracts::DEFAULT_LATENCY_METRIC,
    };

    #[test]
    fn the_standard_series_are_read_from_openmetrics() {
        let scrape = read(OPENMETRICS, DEFAULTS).unwrap();
        assert_eq!((scrape.requests, scrape.errors), (100.0, 30.0));
        assert_eq!(scrape.buckets.len(), 4);
        assert_eq!(scrape.buckets[1], (0.1, 90.0));
        // Kept as JSON between the window's start and end, whole.
        let kept: Scrape = serde_json::from_value(serde_json::to_value(&scrape).unwrap()).unwrap();
        assert_eq!(kept, scrape);
    }

    #[test]
    fn a_window_counts_what_grew_and_interpolates_the_p95() {
        let before = Scrape::default();
        let after = read(OPENMETRICS, DEFAULTS).unwrap();
        let window = between(&before, &after);
        assert_eq!(window.error_ratio(), Some(0.3));
        // Rank 95 of 100 lies halfway through the (0.1, 1.0] bucket.
        let p95 = window.p95_seconds.unwrap();
        assert!((p95 - 0.55).abs() < 1e-9, "{p95}");
        let idle = between(&after, &after);
        assert_eq!(idle.error_ratio(), None, "no requests: nothing to judge");
        assert_eq!(idle.p95_seconds, None);
    }

    /// Spring Boot's Micrometer names, with the status in a `status` label.
    const CUSTOM: &str = "# TYPE http_server_requests_seconds histogram
http_server_requests_seconds_bucket{status=\"200\",le=\"0.1\"} 8
http_server_requests_seconds_bucket{status=\"200\",le=\"+Inf\"} 9
http_server_requests_seconds_bucket{status=\"503\",le=\"0.1\"} 0
http_server_requests_seconds_bucket{status=\"503\",le=\"+Inf\"} 1
http_server_requests_seconds_count{status=\"200\"} 9
http_server_requests_seconds_count{status=\"503\"} 1
# TYPE shop_requests_total counter
shop_requests_total{status=\"200\"} 9
shop_requests_total{status=\"503\"} 1
# TYPE http_requests_total counter
http_requests_total{code=\"500\"} 1000
";

    #[test]
    fn the_apps_own_names_are_read_and_not_the_defaults() {
        let named = Series {
            requests: "shop_requests_total",
            latency: "http_server_requests_seconds",
        };
        let scrape = read(CUSTOM, named).unwrap();
        assert_eq!((scrape.requests, scrape.errors), (10.0, 1.0));
        assert_eq!(scrape.buckets, vec![(0.1, 8.0), (f64::MAX, 10.0)]);
        // The defaults read the other counter, and no histogram.
        let standard = read(CUSTOM, DEFAULTS).unwrap();
        assert_eq!((standard.requests, standard.errors), (1000.0, 1000.0));
        assert!(standard.buckets.is_empty());
    }

    #[test]
    fn the_status_code_goes_by_any_of_its_three_labels() {
        for label in STATUS_LABELS {
            let text = format!(
                "http_requests_total{{{label}=\"200\"}} 3\nhttp_requests_total{{{label}=\"502\"}} 1\n"
            );
            let scrape = read(&text, DEFAULTS).unwrap();
            assert_eq!((scrape.requests, scrape.errors), (4.0, 1.0), "{label}");
        }
    }

    #[test]
    fn a_counter_reset_counts_from_zero() {
        let before = Scrape {
            requests: 500.0,
            errors: 10.0,
            buckets: vec![],
        };
        let after = Scrape {
            requests: 20.0,
            errors: 5.0,
            buckets: vec![],
        };
        let window = between(&before, &after);
        assert_eq!((window.requests, window.errors), (20.0, 5.0));
    }
}
