//! Machines that outlive the command that made them (`kubenest-dev machines up | list | down`).
//!
//! `up` takes the machines' lock and leaves it to the machines: their first processes inherit
//! its file descriptor ([`Lock::bequeath`]), so the lock stays held, naming `up` as its holder,
//! for as long as any of them runs — a test's machines (the test kit's guard takes the same
//! lock) are refused meanwhile, and `up` is refused while a test's run. When every machine has
//! ended (killed, or a reboot) the lock is free again and what they left is stale: the next
//! `up`, `down` or test guard removes it first. `down` kills the machines by their cgroups,
//! which frees the lock, then takes it and removes everything else.

use std::path::PathBuf;
use std::time::{Duration, SystemTime};

use crate::host::{Lock, bridge_up, cleanup, route_pods};
use crate::{Error, Machine, PERSISTENT_HOLDER, STATE_DIR, require_root};
use kubenest_domain::machines::{Machine as Entry, MachinesFile, Role};

/// The lock's holder while `down` works.
const DOWN_HOLDER: &str = "kubenest-dev machines down";
/// How long `down` waits for the lock once the machines are killed.
const DOWN_LOCK_TIMEOUT: Duration = Duration::from_secs(30);

/// The SSH key made for the machines of one `up` (the private key; `.pub` beside it).
pub fn key_path() -> PathBuf {
    PathBuf::from(STATE_DIR).join("ssh").join("id_ed25519")
}

/// The machines' host keys, one `known_hosts` line each.
pub fn known_hosts_path() -> PathBuf {
    PathBuf::from(STATE_DIR).join("ssh").join("known_hosts")
}

/// What `up` made.
#[derive(Debug)]
pub struct Up {
    pub machines: Vec<Machine>,
}

impl Up {
    /// The machines file for them: root with the key of this `up`, the first machine the
    /// control plane, the others workers.
    pub fn machines_file(&self) -> MachinesFile {
        let machines = self
            .machines
            .iter()
            .enumerate()
            .map(|(i, m)| Entry {
                name: m.name.clone(),
                address: m.address.to_string(),
                port: crate::sshd::PORT,
                user: "root".into(),
                key_file: key_path(),
                roles: vec![if i == 0 {
                    Role::ControlPlane
                } else {
                    Role::Worker
                }],
            })
            .collect();
        MachinesFile {
            machines,
            known_hosts: Some(known_hosts_path()),
        }
    }
}

/// Makes `count` machines (see [`crate::count`]) that run until [`down`], each with its sshd
/// letting root in with a key made for them ([`key_path`]).
pub async fn up(count: u8) -> Result<Up, Error> {
    require_root()?;
    let count = crate::count(count.into())?;
    let since = SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let holder = format!(
        "{PERSISTENT_HOLDER}: {count} machines, made by process {} at unix time {since}",
        std::process::id()
    );
    let lock = match Lock::take(&holder) {
        Ok(lock) => lock,
        Err(Error::Busy { holder }) if holder.starts_with(PERSISTENT_HOLDER) => {
            return Err(Error::AlreadyUp { holder });
        }
        Err(e) => return Err(e),
    };
    // What machines left that a crash or a reboot ended.
    cleanup().await?;
    match make(count, &lock).await {
        Ok(up) => {
            lock.hand_over();
            Ok(up)
        }
        Err(error) => {
            if let Err(e) = cleanup().await {
                tracing::warn!("cleaning up after a failed `up`: {e}");
            }
            lock.release();
            Err(error)
        }
    }
}

async fn make(count: u8, lock: &Lock) -> Result<Up, Error> {
    let public = crate::sshd::keygen(&key_path()).await?;
    bridge_up().await?;
    lock.bequeath()?;
    let mut machines = Vec::new();
    for index in 1..=count {
        machines.push(Machine::make(index).await?);
    }
    route_pods(&machines).await?;
    let mut known_hosts = String::new();
    for machine in &machines {
        machine.start_sshd(&public).await?;
        known_hosts.push_str(&machine.known_host()?);
        known_hosts.push('\n');
    }
    let path = known_hosts_path();
    std::fs::write(&path, known_hosts)
        .map_err(|e| Error::io(format!("write {}", path.display()), e))?;
    Ok(Up { machines })
}

/// One recorded machine and how it is.
#[derive(Debug)]
pub struct Status {
    pub machine: Machine,
    /// Its first process still runs.
    pub alive: bool,
    /// Its sshd answers on its address.
    pub sshd: bool,
}

/// Every recorded machine, alive or not (`up`'s and a running test's).
pub fn list() -> Result<Vec<Status>, Error> {
    Ok(Machine::recorded()?
        .into_iter()
        .map(|machine| {
            let alive = machine.alive();
            let sshd = alive && machine.sshd_answers();
            Status {
                machine,
                alive,
                sshd,
            }
        })
        .collect())
}

/// Removes `up`'s machines and everything they made (processes by cgroup, mounts, veths, routes,
/// bridge, cgroups, files), also what a crash or a reboot left. Idempotent. Refused while a
/// test's machines hold the lock (they end with the test). Returns how many were recorded.
pub async fn down() -> Result<usize, Error> {
    require_root()?;
    let recorded = Machine::recorded().map_or(0, |m| m.len());
    let lock = match Lock::take(DOWN_HOLDER) {
        Ok(lock) => lock,
        Err(Error::Busy { holder }) if holder.starts_with(PERSISTENT_HOLDER) => {
            // Their first processes hold the lock: killing them frees it.
            cleanup().await?;
            Lock::wait(DOWN_HOLDER, DOWN_LOCK_TIMEOUT).await?
        }
        Err(e) => return Err(e),
    };
    let cleaned = cleanup().await;
    lock.release();
    cleaned.map(|()| recorded)
}
