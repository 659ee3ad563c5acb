//! What a real node needs from the machine: root, the binaries, the kernel's bridge netfilter
//! hook; the machine-wide lock and cleanup (the guard); the CNI bridge.

use std::io::{BufRead, BufReader, Write};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::time::{Duration, Instant};

use super::config::{BRIDGE, CNI_BIN_DIR, CNI_NETWORK, GATEWAY, SUBNET, SUBNET_PREFIX};
use crate::bins::{cache_root, pinned_version};
use crate::{Binaries, Error};

const GUARD_SCRIPT: &str = include_str!("guard.sh");
const CLEANUP_SCRIPT: &str = include_str!("cleanup.sh");

/// The machine-wide lock: one real node per machine, since the bridge, its subnet and the
/// iptables chains are the host's.
pub const LOCK_FILE: &str = "/run/kubenest-node.lock";
/// The node's runtime state (see [`super::config::Layout::state`]).
pub const STATE_DIR: &str = "/var/lib/kubenest-node";

/// How long the guard may take to clean the host.
pub(super) const CLEANUP_TIMEOUT: Duration = Duration::from_secs(60);

/// Paths of everything a real node runs, beyond the control plane's [`Binaries`].
#[derive(Debug, Clone)]
pub struct NodeBinaries {
    pub kubelet: PathBuf,
    pub kube_proxy: PathBuf,
    pub coredns: PathBuf,
    /// The storage provisioner (tools/build-k8s-bins.sh) and its helper pods' image
    /// (tools/build-testbox.sh's busybox).
    pub local_path: PathBuf,
    pub helper_archive: PathBuf,
    pub helper_image: String,
    /// The ingress controller, Traefik (tools/build-k8s-bins.sh).
    pub ingress: PathBuf,
    /// NetworkPolicy enforcement, kube-network-policies (tools/build-k8s-bins.sh).
    pub network_policies: PathBuf,
    pub containerd: PathBuf,
    pub ctr: PathBuf,
    /// The pod sandbox image's OCI archive (tools/build-pause.sh) and its name.
    pub pause_archive: PathBuf,
    pub pause_image: String,
}

pub(super) fn unavailable(reason: impl Into<String>) -> Error {
    Error::RealNodeUnavailable(reason.into())
}

fn on_path(program: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .chain(["/usr/sbin".into(), "/sbin".into()])
        .map(|dir| dir.join(program))
        .find(|p| p.is_file())
}

impl NodeBinaries {
    /// Checks that this machine can run a real node and finds what it runs; the error says what
    /// is missing and how to get it.
    pub fn locate(bins: &Binaries) -> Result<Self, Error> {
        if !nix::unistd::geteuid().is_root() {
            return Err(unavailable(
                "it needs root (containerd, runc, the CNI bridge, iptables and nftables)",
            ));
        }
        match std::fs::read_to_string("/proc/sys/net/bridge/bridge-nf-call-iptables") {
            Ok(v) if v.trim() == "1" => {}
            Ok(_) => {
                return Err(unavailable(
                    "net.bridge.bridge-nf-call-iptables is 0 (Services would not work between \
                     pods on the bridge): sysctl -w net.bridge.bridge-nf-call-iptables=1",
                ));
            }
            Err(_) => {
                return Err(unavailable(
                    "the br_netfilter module is not loaded: modprobe br_netfilter",
                ));
            }
        }
        let find = |program: &str| {
            on_path(program)
                .ok_or_else(|| unavailable(format!("`{program}` not found: run tools/setup.sh")))
        };
        for program in [
            "runc",
            "ip",
            "iptables",
            "iptables-save",
            "iptables-restore",
            "nft",
            "flock",
            "ps",
            "unshare",
            "mount",
        ] {
            find(program)?;
        }
        for plugin in ["bridge", "host-local", "portmap", "loopback"] {
            let path = Path::new(CNI_BIN_DIR).join(plugin);
            if !path.is_file() {
                return Err(unavailable(format!(
                    "CNI plugin {} not found: run tools/setup.sh",
                    path.display()
                )));
            }
        }
        let cache = cache_root();
        let k8s = bins
            .kube_apiserver
            .parent()
            .map(Path::to_path_buf)
            .unwrap_or_default();
        let pause = pinned_version("PAUSE_VERSION").unwrap_or("unknown");
        let coredns_version = pinned_version("COREDNS_VERSION").unwrap_or("unknown");
        let local_path_version = pinned_version("LOCAL_PATH_VERSION").unwrap_or("unknown");
        let testbox = pinned_version("TESTBOX_VERSION").unwrap_or("unknown");
        let traefik_version = pinned_version("TRAEFIK_VERSION").unwrap_or("unknown");
        let netpol_version = pinned_version("KUBE_NETWORK_POLICIES_VERSION").unwrap_or("unknown");
        let found = Self {
            kubelet: k8s.join("kubelet"),
            kube_proxy: k8s.join("kube-proxy"),
            coredns: std::env::var_os("KUBENEST_COREDNS_BIN")
                .map(PathBuf::from)
                .unwrap_or_else(|| cache.join("coredns").join(coredns_version).join("coredns")),
            local_path: std::env::var_os("KUBENEST_LOCAL_PATH_BIN")
                .map(PathBuf::from)
                .unwrap_or_else(|| {
                    cache
                        .join("local-path")
                        .join(local_path_version)
                        .join("local-path-provisioner")
                }),
            helper_archive: cache
                .join("images")
                .join(format!("testbox-{testbox}.oci.tar")),
            helper_image: format!("localhost/kubenest/testbox:{testbox}"),
            ingress: std::env::var_os("KUBENEST_TRAEFIK_BIN")
                .map(PathBuf::from)
                .unwrap_or_else(|| cache.join("traefik").join(traefik_version).join("traefik")),
            network_policies: std::env::var_os("KUBENEST_NETWORK_POLICIES_BIN")
                .map(PathBuf::from)
                .unwrap_or_else(|| {
                    cache
                        .join("kube-network-policies")
                        .join(netpol_version)
                        .join("kube-network-policies")
                }),
            containerd: find("containerd")?,
            ctr: find("ctr")?,
            pause_archive: cache.join("images").join(format!("pause-{pause}.oci.tar")),
            pause_image: format!("localhost/kubenest/pause:{pause}"),
        };
        for path in [
            &found.kubelet,
            &found.kube_proxy,
            &found.coredns,
            &found.local_path,
            &found.ingress,
            &found.network_policies,
            &found.helper_archive,
            &found.pause_archive,
        ] {
            if !path.exists() {
                return Err(unavailable(format!(
                    "{} not found: run tools/setup.sh",
                    path.display()
                )));
            }
        }
        Ok(found)
    }
}

/// Why [`Guard::take`] did not take the lock.
#[derive(Debug)]
pub(crate) enum Refusal {
    /// Another guard holds it; its holder's description.
    Busy(String),
    Failed(Error),
}

/// The running guard (guard.sh): while it lives the lock is held; closing its stdin makes it
/// kill the node's process groups, clean the host and exit.
#[derive(Debug)]
pub struct Guard {
    child: Child,
    stdin: Option<ChildStdin>,
}

impl Guard {
    /// Takes the machine-wide lock (after cleaning what an earlier node left), or fails naming
    /// the node that holds it. `log` receives the cleanup's output.
    pub fn acquire(config_dir: &Path, log: &Path) -> Result<Self, Error> {
        Self::take(
            LOCK_FILE,
            CLEANUP_SCRIPT,
            &[STATE_DIR, BRIDGE, SUBNET, CNI_NETWORK],
            config_dir,
            log,
        )
        .map_err(|refusal| match refusal {
            Refusal::Busy(holder) => Error::RealNodeBusy {
                lock: LOCK_FILE.into(),
                holder,
            },
            Refusal::Failed(e) => e,
        })
    }

    /// Takes lock file `lock` with guard.sh, which runs `cleanup` (a shell script, written into
    /// `config_dir`) with `args` before it says `locked` and again when the owner ends; the local
    /// machines ([`crate::machines`]) hold their own lock this way.
    pub(crate) fn take(
        lock: &str,
        cleanup: &str,
        args: &[&str],
        config_dir: &Path,
        log: &Path,
    ) -> Result<Self, Refusal> {
        let script = config_dir.join("cleanup.sh");
        std::fs::write(&script, cleanup)
            .map_err(|e| Refusal::Failed(Error::io("write cleanup.sh", e)))?;
        let log_file = std::fs::File::create(log)
            .map_err(|e| Refusal::Failed(Error::io(format!("create {}", log.display()), e)))?;
        let holder = format!(
            "process {} ({}), files in {}, since {:?}",
            std::process::id(),
            std::env::current_exe()
                .map(|p| p.display().to_string())
                .unwrap_or_default(),
            config_dir.display(),
            std::time::SystemTime::now()
        );
        let mut child = Command::new("sh")
            .arg("-c")
            .arg(GUARD_SCRIPT)
            .arg("guard")
            .args([lock, &holder])
            .arg(&script)
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(log_file)
            .process_group(0)
            .spawn()
            .map_err(|e| Refusal::Failed(Error::io("start the guard (sh)", e)))?;
        let stdin = child.stdin.take();
        let mut first = String::new();
        if let Some(stdout) = child.stdout.take() {
            BufReader::new(stdout)
                .read_line(&mut first)
                .map_err(|e| Refusal::Failed(Error::io("read the guard", e)))?;
        }
        let mut guard = Self { child, stdin };
        match first
            .trim_end()
            .split_once(' ')
            .unwrap_or((first.trim_end(), ""))
        {
            ("locked", _) => Ok(guard),
            ("busy", holder) => {
                guard.release();
                Err(Refusal::Busy(holder.to_owned()))
            }
            _ => {
                guard.release();
                Err(Refusal::Failed(unavailable(format!(
                    "the guard could not take {lock} (said {first:?}); see {}",
                    log.display()
                ))))
            }
        }
    }

    /// Has the guard kill process group `pgid` at the end, before it cleans up.
    pub fn register(&mut self, pgid: u32) -> Result<(), Error> {
        let stdin = self
            .stdin
            .as_mut()
            .ok_or_else(|| Error::Process("the real node's guard has ended".into()))?;
        writeln!(stdin, "+{pgid}")
            .map_err(|e| Error::Process(format!("cannot talk to the real node's guard: {e}")))
    }

    /// Ends the node: the guard kills the registered groups, cleans the host and exits, which
    /// releases the lock. Waits for that (up to a minute). Idempotent.
    pub fn release(&mut self) {
        drop(self.stdin.take());
        let deadline = Instant::now() + CLEANUP_TIMEOUT;
        while Instant::now() < deadline {
            if !matches!(self.child.try_wait(), Ok(None)) {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        tracing::warn!("the real node's cleanup did not finish in time");
    }
}

impl Drop for Guard {
    fn drop(&mut self) {
        self.release();
    }
}

/// Runs `program args`, returning its stdout; the error names the command and its stderr.
pub fn run(program: &Path, args: &[&str]) -> Result<String, Error> {
    let output = Command::new(program)
        .args(args)
        .output()
        .map_err(|e| Error::io(format!("run {}", program.display()), e))?;
    if output.status.success() {
        Ok(String::from_utf8_lossy(&output.stdout).into_owned())
    } else {
        Err(Error::Process(format!(
            "`{} {}` failed ({}): {}",
            program.display(),
            args.join(" "),
            output.status,
            String::from_utf8_lossy(&output.stderr).trim()
        )))
    }
}

/// Creates the CNI bridge with the gateway address, up front, so that host-side servers can bind
/// that address before the first pod exists; and turns on IP forwarding (pod → Service → pod is
/// routed through the host).
pub fn bridge_up() -> Result<(), Error> {
    let ip = Path::new("ip");
    let address = format!("{GATEWAY}/{SUBNET_PREFIX}");
    run(ip, &["link", "add", BRIDGE, "type", "bridge"])?;
    run(ip, &["addr", "add", &address, "dev", BRIDGE])?;
    run(ip, &["link", "set", BRIDGE, "up"])?;
    std::fs::write("/proc/sys/net/ipv4/ip_forward", "1")
        .map_err(|e| Error::io("enable net.ipv4.ip_forward", e))
}
