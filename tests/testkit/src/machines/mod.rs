//! Local machines: Linux "machines" made on this host for laptops and tests, each its own
//! network, mount, UTS and PID namespace — a veth on the host bridge [`BRIDGE`] with an address of
//! its own, its own `/etc` (an overlay over the host's), `/var`, `/run`, `/tmp`, `/proc` and
//! `/sys`, and its own cgroup `/kubenest-machine-N` in every hierarchy — in which a node's
//! programs (containerd, a kubelet, sshd) run as they would on a VM ([`node`]).
//!
//! This is the probe of issue 39: whether several kubelets can share this host as machines of
//! a `local` provider. The machines hold their own lock ([`LOCK_FILE`]), bridge, subnet, cgroup
//! names and state folder, none of which the real node ([`crate::node`]) uses, so both can run at
//! once. A guard process (the real node's guard.sh with the machines' cleanup.sh) removes, when
//! the machines end however they end, their processes (by cgroup), cgroups, bridge and files.

mod control_plane;
mod machine;
pub mod node;

use std::net::Ipv4Addr;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

pub use control_plane::ControlPlane;
pub use machine::Machine;

use crate::Error;
use crate::node::host::{Guard, Refusal, run};

/// The host bridge the machines' veths are on.
pub const BRIDGE: &str = "knmach0";
/// The bridge's address: the host as the machines see it (the API server serves there).
pub const GATEWAY: Ipv4Addr = Ipv4Addr::new(10, 250, 0, 1);
pub const SUBNET: &str = "10.250.0.0/24";
/// Every machine's pods: machine N's are 10.251.N.0/24.
pub const POD_NETWORK: &str = "10.251.0.0/16";
/// The machines' lock: one set of local machines per host (their bridge is the host's).
pub const LOCK_FILE: &str = "/run/kubenest-machines.lock";
/// Each machine's files on the host: `STATE_DIR/NAME/{var,etc.upper,etc.work}`.
pub const STATE_DIR: &str = "/var/lib/kubenest-machines";
/// Machine `N`'s cgroup is `/kubenest-machine-N` in every hierarchy.
pub const CGROUP_PREFIX: &str = "kubenest-machine-";

const CLEANUP_SCRIPT: &str = include_str!("cleanup.sh");

/// A set of local machines, numbered from 1.
#[derive(Debug)]
pub struct Machines {
    // Dropped before the guard, which then cleans what is left.
    machines: Vec<Machine>,
    guard: Arc<Mutex<Guard>>,
}

impl Machines {
    /// Takes the machines' lock (cleaning what an earlier run left), creates the bridge and makes
    /// `count` machines on it; logs and the guard's files go under `logs`.
    pub async fn make(count: u8, logs: &Path) -> Result<Self, Error> {
        if !nix::unistd::geteuid().is_root() {
            return Err(Error::Machines(
                "they need root (namespaces, cgroups, the bridge)".into(),
            ));
        }
        if !(1..=200).contains(&count) {
            return Err(Error::Machines(format!("{count} asked for: from 1 to 200")));
        }
        std::fs::create_dir_all(logs).map_err(|e| Error::io("the machines' log folder", e))?;
        let guard = acquire(logs).await?;
        let mut made = Self {
            machines: Vec::new(),
            guard: Arc::new(Mutex::new(guard)),
        };
        bridge_up()?;
        for index in 1..=count {
            let machine = Machine::make(index, logs, &made.guard).await?;
            made.machines.push(machine);
        }
        made.route_pods()?;
        Ok(made)
    }

    /// The machines, in order.
    pub fn machines(&self) -> &[Machine] {
        &self.machines
    }

    /// Each machine reaches every other machine's pods over the bridge, straight to that machine
    /// (no NAT, no hop through the host); the host reaches them the same way.
    fn route_pods(&self) -> Result<(), Error> {
        let ip = Path::new("ip");
        for to in &self.machines {
            let via = to.ip().to_string();
            let cidr = to.pod_cidr();
            run(ip, &["route", "replace", &cidr, "via", &via, "dev", BRIDGE])?;
            for from in self.machines.iter().filter(|m| m.index() != to.index()) {
                from.run(
                    "ip",
                    &["route", "replace", &cidr, "via", &via, "dev", "eth0"],
                )?;
            }
        }
        Ok(())
    }

    /// Ends every machine, then the guard removes what is left (processes by cgroup, cgroups,
    /// bridge, files) and releases the lock. Idempotent.
    pub fn stop(&self) {
        for machine in &self.machines {
            machine.stop();
        }
        self.guard
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .release();
    }
}

impl Drop for Machines {
    fn drop(&mut self) {
        self.stop();
    }
}

/// How long [`Machines::make`] waits for another process's machines to end.
const LOCK_TIMEOUT: Duration = Duration::from_secs(300);

/// Takes the machines' lock; while another process holds it (another test binary's machines,
/// which live for seconds), tries again for up to [`LOCK_TIMEOUT`], then fails naming it.
async fn acquire(logs: &Path) -> Result<Guard, Error> {
    let deadline = Instant::now() + LOCK_TIMEOUT;
    loop {
        let (dir, log) = (logs.to_owned(), logs.join("machines-guard.log"));
        let taken = tokio::task::spawn_blocking(move || {
            Guard::take(
                LOCK_FILE,
                CLEANUP_SCRIPT,
                &[STATE_DIR, BRIDGE, CGROUP_PREFIX],
                &dir,
                &log,
            )
        })
        .await
        .map_err(|e| Error::Process(format!("the machines' guard task: {e}")))?;
        match taken {
            Ok(guard) => return Ok(guard),
            Err(Refusal::Busy(_)) if Instant::now() < deadline => {
                tokio::time::sleep(Duration::from_millis(500)).await;
            }
            Err(Refusal::Busy(holder)) => {
                return Err(Error::Machines(format!(
                    "others still run on this host (lock {LOCK_FILE}) after {} s: {holder}",
                    LOCK_TIMEOUT.as_secs()
                )));
            }
            Err(Refusal::Failed(e)) => return Err(e),
        }
    }
}

/// The host bridge, with the gateway address; forwarding on (the host routes to the pods).
fn bridge_up() -> Result<(), Error> {
    let ip = Path::new("ip");
    run(ip, &["link", "add", BRIDGE, "type", "bridge"])?;
    run(
        ip,
        &["addr", "add", &format!("{GATEWAY}/24"), "dev", BRIDGE],
    )?;
    run(ip, &["link", "set", BRIDGE, "up"])?;
    std::fs::write("/proc/sys/net/ipv4/ip_forward", "1")
        .map_err(|e| Error::io("enable net.ipv4.ip_forward", e))
}

/// The host folder of machine `name`.
fn state_dir(name: &str) -> PathBuf {
    Path::new(STATE_DIR).join(name)
}
