//! How a [`System`](super::System) is laid out and tuned.

use std::path::PathBuf;

/// How the system is laid out and tuned.
#[derive(Debug, Clone)]
pub struct Options {
    pub hubs: usize,
    pub controllers: usize,
    pub admin_user: String,
    pub admin_password: String,
    /// The organization the workload clusters are registered in.
    pub org: String,
    /// Seconds between agent heartbeats.
    pub heartbeat_seconds: u64,
    /// Upper bound of an agent's reconnect backoff.
    pub backoff_max_seconds: u64,
    /// The window over which an agent spreads its return after losing its hub session.
    pub reconnect_spread_seconds: u64,
    /// Seconds without a heartbeat before a cluster's checks turn `Unknown`.
    pub heartbeat_window_seconds: u64,
    /// The API server's per-user request budgets (reads and writes per second).
    pub api_reads_per_second: u32,
    pub api_writes_per_second: u32,
    /// The web console's built assets, served by the API server at `/` (none when absent).
    pub console_dir: Option<PathBuf>,
    /// Where the public hub address (the one registration responses name) listens: loopback
    /// when `None`; a real node's pod-reachable host address for agents installed in pods.
    pub public_hub_host: Option<std::net::IpAddr>,
    /// Serve the API over HTTPS with a certificate made for it (see [`System::api_ca`]).
    pub api_tls: bool,
    /// An OTLP/HTTP endpoint every program exports its traces to (none: no traces).
    pub traces_endpoint: Option<String>,
    /// The agent chart the install command names (`--agent-chart`, `--agent-chart-version`):
    /// this repository's `charts/kubenest-agent` when `None`, a published chart otherwise
    /// (`oci://host:port/kubenest/charts/kubenest-agent` and its version).
    pub agent_chart: Option<(String, String)>,
}

impl Default for Options {
    fn default() -> Self {
        Self {
            hubs: 2,
            controllers: 2,
            admin_user: "admin".into(),
            admin_password: random_password(),
            org: "dev".into(),
            heartbeat_seconds: 15,
            backoff_max_seconds: 30,
            reconnect_spread_seconds: 10,
            heartbeat_window_seconds: 90,
            api_reads_per_second: 200,
            api_writes_per_second: 50,
            console_dir: None,
            public_hub_host: None,
            api_tls: false,
            traces_endpoint: None,
            agent_chart: None,
        }
    }
}

/// A password of 24 characters from the OS's random source.
pub fn random_password() -> String {
    uuid::Uuid::new_v4().simple().to_string()[..24].to_owned()
}
