//! The `local` provider's machines: Linux "machines" made on this host for laptops and tests,
//! reached only over SSH like a VM. Each is its own network, mount, UTS and PID namespace — a
//! veth on the host bridge [`BRIDGE`] with an address of its own, its own `/etc` (an overlay over
//! the host's), `/var`, `/run`, `/tmp`, `/proc` and `/sys`, its own cgroup
//! `/kubenest-machine-N` in every hierarchy, its own iptables, and its own sshd with host keys
//! of its own ([`sshd`]).
//!
//! - [`machine::Machine`] makes one machine and runs programs inside it; its record
//!   (`STATE_DIR/NAME/machine.json`) says where it is after the maker has exited.
//! - [`host`]: what the machines share on the host — the bridge, the routes between their pod
//!   networks, the lock ([`LOCK_FILE`]) and the cleanup (cleanup.sh), which removes every trace.
//! - [`persistent`]: `kubenest-dev machines up | list | down` — machines that outlive the
//!   command that made them.
//! - the machines file `up` writes is the domain's (`kubenest_domain::machines`), the one
//!   `kubenest install --machines FILE` reads.
//!
//! One set of local machines per host: the lock is held either by the test kit's guard (machines
//! that live as long as a test process) or by the persistent machines' own first processes, and
//! its file names the holder, so neither can remove the other's machines.
//!
//! Every program is started through [`kubenest_runtime::exec::Program`].

pub mod host;
pub mod machine;
pub mod persistent;
pub mod sshd;

use std::net::Ipv4Addr;

pub use kubenest_runtime::exec::ExecError;
pub use machine::Machine;

/// The host bridge the machines' veths are on.
pub const BRIDGE: &str = "knmach0";
/// The bridge's address: the host as the machines see it.
pub const GATEWAY: Ipv4Addr = Ipv4Addr::new(10, 250, 0, 1);
/// The machines' network; machine N is 10.250.0.(10+N).
pub const SUBNET: &str = "10.250.0.0/24";
/// Every machine's pods: machine N's are 10.251.N.0/24.
pub const POD_NETWORK: &str = "10.251.0.0/16";
/// The machines' lock: one set of local machines per host (their bridge is the host's).
pub const LOCK_FILE: &str = "/run/kubenest-machines.lock";
/// Each machine's files on the host: `STATE_DIR/NAME/{machine.json,var,etc.upper,etc.work}`;
/// the persistent machines' SSH key under `STATE_DIR/ssh`.
pub const STATE_DIR: &str = "/var/lib/kubenest-machines";
/// Machine `N`'s cgroup is `/kubenest-machine-N` in every hierarchy.
pub const CGROUP_PREFIX: &str = "kubenest-machine-";
/// The most machines one host holds (their addresses and pod networks are numbered by index).
pub const MAX_MACHINES: u8 = 50;
/// Removes everything the machines made (run as `sh cleanup.sh STATE_DIR BRIDGE CGROUP_PREFIX`).
pub const CLEANUP_SCRIPT: &str = include_str!("cleanup.sh");
/// How the lock's holder text starts when persistent machines ([`persistent::up`]) hold it.
pub const PERSISTENT_HOLDER: &str = "kubenest-dev machines up";

/// What failed while making, reading or removing local machines.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("local machines need root (namespaces, cgroups, the bridge)")]
    NotRoot,
    #[error("count: {given} machines asked for; from 1 to {MAX_MACHINES}")]
    Count { given: u64 },
    #[error("the local machines' lock {LOCK_FILE} is held by {holder}")]
    Busy { holder: String },
    #[error("local machines are already up ({holder}); `kubenest-dev machines down` removes them")]
    AlreadyUp { holder: String },
    #[error("{what}: {detail}")]
    Failed { what: String, detail: String },
    #[error("{what}: {source}")]
    Io {
        what: String,
        source: std::io::Error,
    },
    #[error(transparent)]
    Exec(#[from] ExecError),
    #[error(transparent)]
    File(#[from] kubenest_domain::machines::FileError),
}

impl Error {
    pub(crate) fn io(what: impl Into<String>, source: std::io::Error) -> Self {
        Self::Io {
            what: what.into(),
            source,
        }
    }

    pub(crate) fn failed(what: impl Into<String>, detail: impl Into<String>) -> Self {
        Self::Failed {
            what: what.into(),
            detail: detail.into(),
        }
    }
}

/// The number of machines asked for, checked: from 1 to [`MAX_MACHINES`].
pub fn count(given: u64) -> Result<u8, Error> {
    u8::try_from(given)
        .ok()
        .filter(|n| (1..=MAX_MACHINES).contains(n))
        .ok_or(Error::Count { given })
}

/// `Err(NotRoot)` unless this process is root.
pub fn require_root() -> Result<(), Error> {
    if nix::unistd::geteuid().is_root() {
        Ok(())
    } else {
        Err(Error::NotRoot)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_count_is_from_one_to_fifty() {
        assert_eq!(count(1).unwrap(), 1);
        assert_eq!(count(50).unwrap(), 50);
        for given in [0, 51, 256, u64::MAX] {
            let error = count(given).unwrap_err().to_string();
            assert_eq!(
                error,
                format!("count: {given} machines asked for; from 1 to 50")
            );
        }
    }
}
