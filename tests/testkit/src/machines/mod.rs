//! Local machines for tests: [`kubenest_machines`]' machines (each its own network, mount, UTS
//! and PID namespace on the host bridge [`BRIDGE`], its own `/etc`, `/var`, `/run`, `/tmp`,
//! `/proc`, `/sys` and cgroup `/kubenest-machine-N`), living as long as the test process, in
//! which a node's programs (containerd, a kubelet, kube-proxy, sshd) run as they would on a VM
//! ([`node`]).
//!
//! This is the probe of issue 39. The machines hold their own lock ([`LOCK_FILE`]), bridge,
//! subnet, cgroup names and state folder, none of which the real node ([`crate::node`]) uses, so
//! both can run at once. A guard process (the real node's guard.sh with the machines'
//! cleanup.sh) holds the lock and removes, when the machines end however they end, their
//! processes (by cgroup), cgroups, bridge and files. Machines that `kubenest-dev machines up`
//! left running hold the same lock: a test waits a minute for them (a test's live seconds), then
//! fails naming them, and never removes them.

mod control_plane;
mod machine;
pub mod node;

use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

pub use control_plane::ControlPlane;
pub use kubenest_machines::{
    BRIDGE, CGROUP_PREFIX, GATEWAY, LOCK_FILE, POD_NETWORK, STATE_DIR, SUBNET,
};
pub use machine::Machine;

use kubenest_machines::{CLEANUP_SCRIPT, PERSISTENT_HOLDER};

use crate::Error;
use crate::node::host::{Guard, Refusal};

impl From<kubenest_machines::Error> for Error {
    fn from(error: kubenest_machines::Error) -> Self {
        Self::Machines(error.to_string())
    }
}

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
        kubenest_machines::require_root()?;
        let count = kubenest_machines::count(count.into())?;
        std::fs::create_dir_all(logs).map_err(|e| Error::io("the machines' log folder", e))?;
        let guard = acquire(logs).await?;
        let mut made = Self {
            machines: Vec::new(),
            guard: Arc::new(Mutex::new(guard)),
        };
        kubenest_machines::host::bridge_up().await?;
        for index in 1..=count {
            let machine = Machine::make(index, logs, &made.guard).await?;
            made.machines.push(machine);
        }
        let records: Vec<_> = made.machines.iter().map(|m| m.machine().clone()).collect();
        kubenest_machines::host::route_pods(&records).await?;
        Ok(made)
    }

    /// The machines, in order.
    pub fn machines(&self) -> &[Machine] {
        &self.machines
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

/// How long [`Machines::make`] waits for another test's machines to end.
const LOCK_TIMEOUT: Duration = Duration::from_secs(300);
/// How long it waits for machines of `kubenest-dev machines up`: a test's (devenv's machines
/// test) live seconds, a developer's until `down`.
const PERSISTENT_TIMEOUT: Duration = Duration::from_secs(60);

/// Takes the machines' lock; while another process holds it (another test binary's machines,
/// which live for seconds), tries again for up to [`LOCK_TIMEOUT`] ([`PERSISTENT_TIMEOUT`] for
/// `up`'s), then fails naming it.
async fn acquire(logs: &Path) -> Result<Guard, Error> {
    let started = Instant::now();
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
        let holder = match taken {
            Ok(guard) => return Ok(guard),
            Err(Refusal::Failed(e)) => return Err(e),
            Err(Refusal::Busy(holder)) => holder,
        };
        let persistent = holder.starts_with(PERSISTENT_HOLDER);
        let limit = if persistent {
            PERSISTENT_TIMEOUT
        } else {
            LOCK_TIMEOUT
        };
        if started.elapsed() < limit {
            tokio::time::sleep(Duration::from_millis(500)).await;
        } else if persistent {
            return Err(Error::Machines(format!(
                "machines made by `kubenest-dev machines up` run on this host ({holder}); \
                 `kubenest-dev machines down` removes them"
            )));
        } else {
            return Err(Error::Machines(format!(
                "others still run on this host (lock {LOCK_FILE}) after {} s: {holder}",
                limit.as_secs()
            )));
        }
    }
}
