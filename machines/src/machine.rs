//! One local machine: its folders and cgroup on the host, its first process (machine.sh) in new
//! namespaces, detached from whoever made it, its veth on the bridge, and its record.

use std::ffi::OsStr;
use std::net::Ipv4Addr;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use kubenest_runtime::exec::{Output, Program};
use serde::{Deserialize, Serialize};

use crate::{BRIDGE, CGROUP_PREFIX, Error, GATEWAY, LOCK_FILE, STATE_DIR};

const MACHINE_SCRIPT: &str = include_str!("machine.sh");
/// The PATH of every program run inside a machine (a root's, with the sbin folders).
const PATH: &str = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";
/// How long a machine's first process has to say `ready`.
const READY_TIMEOUT: Duration = Duration::from_secs(30);
/// How long a program run inside a machine may take unless the caller says otherwise.
const RUN_TIMEOUT: Duration = Duration::from_secs(60);

/// A running local machine, as its record (`STATE_DIR/NAME/machine.json`) keeps it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Machine {
    /// From 1; it numbers the address, the pod network and the cgroup.
    pub index: u8,
    /// Its hostname, `kn-machine-N`.
    pub name: String,
    /// Its address on the bridge, `10.250.0.(10+N)`.
    pub address: Ipv4Addr,
    /// The host pid of its first process (PID 1 inside).
    pub pid: u32,
    /// That process's start time (field 22 of `/proc/PID/stat`): a pid reused after the
    /// machine ended (or after a reboot) does not pass for it.
    pub start_time: u64,
    /// Its cgroup in every hierarchy, `/kubenest-machine-N`.
    pub cgroup: String,
}

/// Machine `index`'s name.
pub fn name(index: u8) -> String {
    format!("kn-machine-{index}")
}

/// The host folder of machine `name`.
pub fn state_dir(name: &str) -> PathBuf {
    Path::new(STATE_DIR).join(name)
}

impl Machine {
    /// Makes machine `index`: its folders, cgroup, first process (detached: it lives until it
    /// is killed, whoever made it) and network, then writes its record. Of the descriptors this
    /// process leaves inheritable, the machine's first process keeps the machines' lock alone.
    pub async fn make(index: u8) -> Result<Self, Error> {
        let name = name(index);
        let dir = state_dir(&name);
        for sub in ["etc.upper", "etc.work", "var/lib", "var/log", "var/tmp"] {
            let path = dir.join(sub);
            std::fs::create_dir_all(&path)
                .map_err(|e| Error::io(format!("create {}", path.display()), e))?;
        }
        let script = dir.join("machine.sh");
        std::fs::write(&script, MACHINE_SCRIPT).map_err(|e| Error::io("write machine.sh", e))?;
        let cgroup = format!("/{CGROUP_PREFIX}{index}");
        let mut holder = Program::new("/usr/bin/setsid")
            .arg("--fork")
            .arg("/bin/sh")
            .path(&script)
            .arg("hold")
            .path(&dir)
            .env("MACHINES_LOCK", LOCK_FILE);
        for procs in cgroup_procs(&cgroup)? {
            holder = holder.path(&procs);
        }
        checked(&name, "start its first process", holder.run().await?)?;
        let hold = wait_ready(&name, &dir).await?;
        let pid = first_child(hold)
            .ok_or_else(|| Error::failed(&name, format!("no first process under {hold}")))?;
        let start_time = start_time(pid)
            .ok_or_else(|| Error::failed(&name, format!("its first process {pid} is gone")))?;
        let machine = Self {
            index,
            address: Ipv4Addr::new(10, 250, 0, 10 + index),
            name,
            pid,
            start_time,
            cgroup,
        };
        machine.network_up().await?;
        machine.save()?;
        Ok(machine)
    }

    /// A veth pair: `knmN` on the bridge, its peer moved into the machine as `eth0` with the
    /// machine's address and a default route through the host; forwarding on (pods' packets).
    async fn network_up(&self) -> Result<(), Error> {
        let (host_end, inner) = (format!("knm{}", self.index), format!("knm{}c", self.index));
        let add = Program::new("/usr/sbin/ip")
            .arg("link")
            .arg("add")
            .word(&host_end)
            .arg("type")
            .arg("veth")
            .arg("peer")
            .arg("name")
            .word(&inner);
        checked(&self.name, "add its veth", add.run().await?)?;
        host_ip(&["link", "set"], &[&host_end, "master", BRIDGE, "up"]).await?;
        host_ip(&["link", "set"], &[&inner, "netns", &self.pid.to_string()]).await?;
        let address = format!("{}/24", self.address);
        let gateway = GATEWAY.to_string();
        let steps: [&[&str]; 6] = [
            &["ip", "link", "set", &inner, "name", "eth0"],
            &["ip", "addr", "add", &address, "dev", "eth0"],
            &["ip", "link", "set", "eth0", "up"],
            &["ip", "link", "set", "lo", "up"],
            &["ip", "route", "add", "default", "via", &gateway],
            &["sysctl", "-qw", "net.ipv4.ip_forward=1"],
        ];
        for step in steps {
            self.run(step[0], &step[1..]).await?;
        }
        Ok(())
    }

    /// Its pods' network, `10.251.N.0/24`.
    pub fn pod_cidr(&self) -> String {
        format!("10.251.{}.0/24", self.index)
    }

    /// The gateway of its pods' bridge (`cni0` inside the machine).
    pub fn pod_gateway(&self) -> Ipv4Addr {
        Ipv4Addr::new(10, 251, self.index, 1)
    }

    /// Its record's path.
    pub fn record_path(name: &str) -> PathBuf {
        state_dir(name).join("machine.json")
    }

    fn save(&self) -> Result<(), Error> {
        let path = Self::record_path(&self.name);
        let text = serde_json::to_string_pretty(self)
            .map_err(|e| Error::failed("encode a machine's record", e.to_string()))?;
        std::fs::write(&path, text + "\n")
            .map_err(|e| Error::io(format!("write {}", path.display()), e))
    }

    /// Every machine recorded under [`STATE_DIR`], by index (alive or not).
    pub fn recorded() -> Result<Vec<Self>, Error> {
        let entries = match std::fs::read_dir(STATE_DIR) {
            Ok(entries) => entries,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(e) => return Err(Error::io(format!("read {STATE_DIR}"), e)),
        };
        let mut machines = Vec::new();
        for entry in entries.flatten() {
            let path = entry.path().join("machine.json");
            let Ok(text) = std::fs::read_to_string(&path) else {
                continue;
            };
            let machine: Self = serde_json::from_str(&text)
                .map_err(|e| Error::failed(format!("read {}", path.display()), e.to_string()))?;
            machines.push(machine);
        }
        machines.sort_by_key(|m| m.index);
        Ok(machines)
    }

    /// Whether its first process still runs (the same process: its start time matches).
    pub fn alive(&self) -> bool {
        start_time(self.pid) == Some(self.start_time)
    }

    /// The arguments of `nsenter` that enter every namespace of the machine, then its cgroup in
    /// every hierarchy (nsenter keeps the caller's cgroups), and `exec` what follows them: a
    /// program and its arguments. For callers that start long-lived programs themselves.
    pub fn enter_args(&self) -> Vec<String> {
        vec![
            format!("--target={}", self.pid),
            "--net".into(),
            "--mount".into(),
            "--uts".into(),
            "--pid".into(),
            "--".into(),
            "sh".into(),
            "-c".into(),
            format!(
                "for p in /sys/fs/cgroup/*{}/cgroup.procs; do echo $$ >\"$p\" || exit 125; done; \
                 exec \"$@\"",
                self.cgroup
            ),
            "enter".into(),
        ]
    }

    /// `program args` inside the machine, through `nsenter` ([`Self::enter_args`]).
    pub fn program<S: AsRef<OsStr>>(&self, program: &str, args: &[S]) -> Program {
        let script = format!(
            "for p in /sys/fs/cgroup/*{}/cgroup.procs; do echo $$ >\"$p\" || exit 125; done; \
             exec \"$@\"",
            self.cgroup
        );
        Program::new("/usr/bin/nsenter")
            .option("--target", self.pid.to_string())
            .arg("--net")
            .arg("--mount")
            .arg("--uts")
            .arg("--pid")
            .operands(["sh", "-c", &script, "enter", program])
            .operands(args)
            .env("PATH", PATH)
            .timeout(RUN_TIMEOUT)
    }

    /// Runs `program args` inside the machine and returns its stdout.
    pub async fn run<S: AsRef<OsStr>>(&self, program: &str, args: &[S]) -> Result<String, Error> {
        let output = self.program(program, args).run().await?;
        let output = checked(&self.name, &format!("`{program}`"), output)?;
        Ok(String::from_utf8_lossy(&output.stdout).into_owned())
    }

    /// The host path of `path` as the machine sees it (through its first process's root).
    pub fn path(&self, path: &str) -> PathBuf {
        PathBuf::from(format!("/proc/{}/root{path}", self.pid))
    }

    /// Writes `text` to `path` in the machine (its own `/etc`, `/var`, `/run`), making folders.
    pub fn write(&self, path: &str, text: &str) -> Result<(), Error> {
        let host = self.path(path);
        if let Some(parent) = host.parent() {
            std::fs::create_dir_all(parent)
                .map_err(|e| Error::io(format!("{}: create {}", self.name, parent.display()), e))?;
        }
        std::fs::write(&host, text)
            .map_err(|e| Error::io(format!("{}: write {path}", self.name), e))
    }

    /// Kills its first process, which ends the machine: the kernel kills every process of its
    /// PID namespace, and its network and mount namespaces go with them. Idempotent; what is
    /// left on the host (cgroup, files) is the cleanup's.
    pub fn kill(&self) {
        if self.alive()
            && let Ok(pid) = i32::try_from(self.pid)
        {
            // Gone meanwhile is fine.
            let _ = nix::sys::signal::kill(
                nix::unistd::Pid::from_raw(pid),
                nix::sys::signal::Signal::SIGKILL,
            );
        }
    }
}

/// `ip FIXED... VALUES...` on the host, each value a word that cannot be a flag.
async fn host_ip(fixed: &[&'static str], values: &[&str]) -> Result<(), Error> {
    let mut program = Program::new("/usr/sbin/ip");
    for word in fixed {
        program = program.arg(word);
    }
    for value in values {
        program = program.word(value);
    }
    let what = format!("ip {} {}", fixed.join(" "), values.join(" "));
    checked("the host", &what, program.run().await?).map(|_| ())
}

/// `Ok(output)` when the program succeeded, else an error with its own summary line.
pub(crate) fn checked(who: &str, what: &str, output: Output) -> Result<Output, Error> {
    if output.success {
        Ok(output)
    } else {
        Err(Error::failed(
            format!("{who}: {what}"),
            format!("failed ({:?}): {}", output.code, output.summary()),
        ))
    }
}

/// Waits until the machine's log says `ready`; the pid its first process wrote.
async fn wait_ready(name: &str, dir: &Path) -> Result<u32, Error> {
    let log = dir.join("machine.log");
    let deadline = Instant::now() + READY_TIMEOUT;
    loop {
        let text = std::fs::read_to_string(&log).unwrap_or_default();
        if text.lines().any(|l| l == "ready") {
            let pid = std::fs::read_to_string(dir.join("hold.pid")).unwrap_or_default();
            return pid
                .trim()
                .parse()
                .map_err(|_| Error::failed(name, format!("no pid in hold.pid: {pid:?}")));
        }
        if Instant::now() > deadline {
            let tail: Vec<&str> = text.lines().rev().take(5).collect();
            return Err(Error::failed(
                name,
                format!("not ready in {} s: {tail:?}", READY_TIMEOUT.as_secs()),
            ));
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Creates cgroup `path` in every mounted hierarchy of /sys/fs/cgroup (cpuset's with its
/// parent's CPUs and memory nodes, without which no process may join) and returns each one's
/// `cgroup.procs`.
fn cgroup_procs(path: &str) -> Result<Vec<PathBuf>, Error> {
    let root = Path::new("/sys/fs/cgroup");
    let entries = std::fs::read_dir(root).map_err(|e| Error::io("read /sys/fs/cgroup", e))?;
    let mut procs = Vec::new();
    for entry in entries.flatten() {
        let hierarchy = entry.path();
        if !hierarchy.join("cgroup.procs").is_file() {
            continue;
        }
        let dir = hierarchy.join(path.trim_start_matches('/'));
        std::fs::create_dir_all(&dir)
            .map_err(|e| Error::io(format!("create cgroup {}", dir.display()), e))?;
        for file in ["cpuset.cpus", "cpuset.mems"] {
            if let Ok(value) = std::fs::read_to_string(hierarchy.join(file)) {
                std::fs::write(dir.join(file), value.trim())
                    .map_err(|e| Error::io(format!("write {}/{file}", dir.display()), e))?;
            }
        }
        procs.push(dir.join("cgroup.procs"));
    }
    if procs.is_empty() {
        return Err(Error::failed(
            "cgroups",
            "no cgroup hierarchy under /sys/fs/cgroup",
        ));
    }
    Ok(procs)
}

/// The first child of process `pid` (unshare's forked child: the machine's PID 1).
fn first_child(pid: u32) -> Option<u32> {
    std::fs::read_to_string(format!("/proc/{pid}/task/{pid}/children"))
        .ok()?
        .split_whitespace()
        .next()?
        .parse()
        .ok()
}

/// Process `pid`'s start time (field 22 of `/proc/PID/stat`, read past the command's closing
/// paren, which the command itself may contain), while it runs: `None` once it has exited,
/// a zombie too.
pub fn start_time(pid: u32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    parse_start_time(&stat)
}

fn parse_start_time(stat: &str) -> Option<u64> {
    let (_, rest) = stat.rsplit_once(')')?;
    let mut fields = rest.split_whitespace();
    if matches!(fields.next()?, "Z" | "X" | "x") {
        return None;
    }
    fields.nth(18)?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_start_time_is_read_past_a_command_holding_parens() {
        let stat = "42 (sh) x) S 1 42 42 0 -1 4194560 1 0 0 0 0 0 0 0 20 0 1 0 98765 2 3";
        assert_eq!(parse_start_time(stat), Some(98765));
        assert_eq!(parse_start_time("garbage"), None);
        let zombie = stat.replace(") S ", ") Z ");
        assert_eq!(parse_start_time(&zombie), None);
    }

    #[test]
    fn a_record_reads_back_as_written() {
        let machine = Machine {
            index: 2,
            name: name(2),
            address: Ipv4Addr::new(10, 250, 0, 12),
            pid: 4242,
            start_time: 7,
            cgroup: "/kubenest-machine-2".into(),
        };
        let text = serde_json::to_string(&machine).unwrap();
        assert_eq!(serde_json::from_str::<Machine>(&text).unwrap(), machine);
        assert_eq!(machine.pod_cidr(), "10.251.2.0/24");
        assert_eq!(
            state_dir(&machine.name),
            Path::new(STATE_DIR).join("kn-machine-2")
        );
    }
}
