//! What the machines share on the host: the bridge, the routes between their pod networks, the
//! lock and the cleanup.

use std::fs::File;
use std::io::{Read, Seek, SeekFrom, Write};
use std::os::fd::AsFd;
use std::time::{Duration, Instant};

use kubenest_runtime::exec::Program;
use nix::fcntl::{FcntlArg, FdFlag, Flock, FlockArg, fcntl};

use crate::machine::checked;
use crate::{BRIDGE, CGROUP_PREFIX, CLEANUP_SCRIPT, Error, GATEWAY, LOCK_FILE, Machine, STATE_DIR};

/// How long the cleanup may take (it waits up to 5 s for killed processes to go).
const CLEANUP_TIMEOUT: Duration = Duration::from_secs(60);

/// The host bridge, with the gateway address; forwarding on (the host routes to the pods).
pub async fn bridge_up() -> Result<(), Error> {
    let gateway = format!("{GATEWAY}/24");
    let steps = [
        Program::new("/usr/sbin/ip")
            .arg("link")
            .arg("add")
            .arg(BRIDGE)
            .arg("type")
            .arg("bridge"),
        Program::new("/usr/sbin/ip")
            .arg("addr")
            .arg("add")
            .word(&gateway)
            .arg("dev")
            .arg(BRIDGE),
        Program::new("/usr/sbin/ip")
            .arg("link")
            .arg("set")
            .arg(BRIDGE)
            .arg("up"),
    ];
    for step in steps {
        checked("the host", "the machines' bridge", step.run().await?)?;
    }
    std::fs::write("/proc/sys/net/ipv4/ip_forward", "1")
        .map_err(|e| Error::io("enable net.ipv4.ip_forward", e))
}

/// Each machine reaches every other machine's pods over the bridge, straight to that machine
/// (no NAT, no hop through the host); the host reaches them the same way.
pub async fn route_pods(machines: &[Machine]) -> Result<(), Error> {
    for to in machines {
        let (cidr, via) = (to.pod_cidr(), to.address.to_string());
        let host = Program::new("/usr/sbin/ip")
            .arg("route")
            .arg("replace")
            .word(&cidr)
            .arg("via")
            .word(&via)
            .arg("dev")
            .arg(BRIDGE);
        checked("the host", &format!("route {cidr}"), host.run().await?)?;
        for from in machines.iter().filter(|m| m.index != to.index) {
            let args = ["route", "replace", &cidr, "via", &via, "dev", "eth0"];
            from.run("ip", &args).await?;
        }
    }
    Ok(())
}

/// Removes everything the machines made (cleanup.sh): their processes (by cgroup), cgroups,
/// veths, bridge, routes and files. Idempotent.
pub async fn cleanup() -> Result<(), Error> {
    let output = Program::new("/bin/sh")
        .arg("-c")
        .arg(CLEANUP_SCRIPT)
        .arg("cleanup")
        .arg(STATE_DIR)
        .arg(BRIDGE)
        .arg(CGROUP_PREFIX)
        .timeout(CLEANUP_TIMEOUT)
        .run()
        .await?;
    let output = checked("the host", "the machines' cleanup", output)?;
    let said = String::from_utf8_lossy(&output.stdout);
    match said.lines().find(|l| l.starts_with("cleanup:")) {
        Some(line) => Err(Error::failed("the machines' cleanup", line)),
        None => Ok(()),
    }
}

/// The machines' lock ([`LOCK_FILE`], flock(2)), held while this value lives; its file says who
/// holds it.
#[derive(Debug)]
pub struct Lock {
    file: Flock<File>,
}

impl Lock {
    /// Takes the lock and writes `holder` into its file, or `Err(Busy)` with what the file says.
    pub fn take(holder: &str) -> Result<Self, Error> {
        let file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .read(true)
            .open(LOCK_FILE)
            .map_err(|e| Error::io(format!("open {LOCK_FILE}"), e))?;
        let mut file = match Flock::lock(file, FlockArg::LockExclusiveNonblock) {
            Ok(locked) => locked,
            Err((_, nix::errno::Errno::EWOULDBLOCK)) => {
                return Err(Error::Busy {
                    holder: holder_of()?,
                });
            }
            Err((_, errno)) => {
                return Err(Error::failed(
                    format!("lock {LOCK_FILE}"),
                    errno.to_string(),
                ));
            }
        };
        file.set_len(0)
            .and_then(|()| file.seek(SeekFrom::Start(0)).map(|_| ()))
            .and_then(|()| writeln!(file, "{holder}"))
            .map_err(|e| Error::io(format!("write {LOCK_FILE}"), e))?;
        Ok(Self { file })
    }

    /// Takes the lock, waiting up to `timeout` while someone else holds it.
    pub async fn wait(holder: &str, timeout: Duration) -> Result<Self, Error> {
        let deadline = Instant::now() + timeout;
        loop {
            match Self::take(holder) {
                Err(Error::Busy { .. }) if Instant::now() < deadline => {
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
                taken => return taken,
            }
        }
    }

    /// Lets processes started from now on inherit the lock: it then stays held as long as any
    /// of them lives, after this process has exited (the persistent machines' first processes).
    pub fn bequeath(&self) -> Result<(), Error> {
        fcntl(self.file.as_fd(), FcntlArg::F_SETFD(FdFlag::empty()))
            .map(|_| ())
            .map_err(|e| Error::failed(format!("pass on {LOCK_FILE}"), e.to_string()))
    }

    /// Leaves the lock to the processes that inherited it ([`Self::bequeath`]): this process's
    /// descriptor closes when it exits, without unlocking, which would unlock theirs too (a
    /// flock belongs to the open file, which they share).
    pub fn hand_over(self) {
        std::mem::forget(self.file);
    }

    /// Empties the lock's file and releases it.
    pub fn release(self) {
        // Whatever fails here, the lock goes with the file descriptor.
        let _ = self.file.set_len(0);
    }
}

/// Who holds the lock, as its file says.
pub fn holder_of() -> Result<String, Error> {
    let mut text = String::new();
    match File::open(LOCK_FILE) {
        Ok(mut file) => file
            .read_to_string(&mut text)
            .map_err(|e| Error::io(format!("read {LOCK_FILE}"), e))?,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => 0,
        Err(e) => return Err(Error::io(format!("read {LOCK_FILE}"), e)),
    };
    let text = text.trim();
    Ok(if text.is_empty() {
        "a process that did not say who it is".into()
    } else {
        text.to_owned()
    })
}
