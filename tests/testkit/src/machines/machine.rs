//! One local machine: its first process (machine.sh) in new namespaces, its veth on the bridge,
//! its cgroup, and the programs started inside it.

use std::net::Ipv4Addr;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use super::{BRIDGE, CGROUP_PREFIX, GATEWAY, state_dir};
use crate::node::host::{Guard, run};
use crate::process::ManagedProcess;
use crate::{Error, wait};

const MACHINE_SCRIPT: &str = include_str!("machine.sh");

/// The PATH of every program started in a machine (nothing else of the test's environment).
const PATH: &str = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

/// A running local machine.
#[derive(Debug)]
pub struct Machine {
    index: u8,
    name: String,
    /// The host pid of the machine's PID 1 (`machine.sh init`).
    init: u32,
    logs: PathBuf,
    /// The first process, then what was started inside, in order.
    processes: Mutex<Vec<ManagedProcess>>,
    /// The machines' guard, which kills each registered process group when they end.
    guard: Arc<Mutex<Guard>>,
}

impl Machine {
    /// Makes machine `index`: its folders, cgroup, first process and network.
    pub(super) async fn make(
        index: u8,
        logs: &Path,
        guard: &Arc<Mutex<Guard>>,
    ) -> Result<Self, Error> {
        let name = format!("kn-machine-{index}");
        let dir = state_dir(&name);
        for sub in ["etc.upper", "etc.work", "var/lib", "var/log", "var/tmp"] {
            std::fs::create_dir_all(dir.join(sub))
                .map_err(|e| Error::io(format!("create {}", dir.join(sub).display()), e))?;
        }
        let script = dir.join("machine.sh");
        std::fs::write(&script, MACHINE_SCRIPT).map_err(|e| Error::io("write machine.sh", e))?;
        let procs = cgroup_procs(&format!("{CGROUP_PREFIX}{index}"))?;
        let mut holder = Command::new("sh");
        holder
            .arg(&script)
            .args(["hold", &name])
            .arg(&dir)
            .args(&procs)
            .env_clear()
            .env("PATH", PATH);
        let log = logs.join(format!("{name}.log"));
        let process = ManagedProcess::spawn(&format!("{name}/init"), holder, log.clone())?;
        let holder_pid = process.pid();
        lock(guard).register(holder_pid)?;
        let mut process = Some(process);
        wait::until(
            &format!("{name} to be ready"),
            Duration::from_secs(30),
            || {
                process
                    .as_mut()
                    .map_or(Ok(()), ManagedProcess::check_running)
            },
            || {
                let ready = crate::process::tail(&log, 5).lines().any(|l| l == "ready");
                async move { Ok(ready) }
            },
        )
        .await?;
        let init = first_child(holder_pid).ok_or_else(|| {
            Error::Process(format!("{name}: no first process under {holder_pid}"))
        })?;
        let machine = Self {
            index,
            name,
            init,
            logs: logs.to_owned(),
            processes: Mutex::new(process.take().into_iter().collect()),
            guard: guard.clone(),
        };
        machine.network_up()?;
        Ok(machine)
    }

    /// A veth pair: `knmN` on the bridge, its peer moved into the machine as `eth0` with the
    /// machine's address and a default route through the host; forwarding on (pods' packets).
    fn network_up(&self) -> Result<(), Error> {
        let ip = Path::new("ip");
        let (host_end, inner) = (format!("knm{}", self.index), format!("knm{}c", self.index));
        run(
            ip,
            &[
                "link", "add", &host_end, "type", "veth", "peer", "name", &inner,
            ],
        )?;
        run(ip, &["link", "set", &host_end, "master", BRIDGE, "up"])?;
        run(
            ip,
            &["link", "set", &inner, "netns", &self.init.to_string()],
        )?;
        let address = format!("{}/24", self.ip());
        self.run("ip", &["link", "set", &inner, "name", "eth0"])?;
        self.run("ip", &["addr", "add", &address, "dev", "eth0"])?;
        self.run("ip", &["link", "set", "eth0", "up"])?;
        self.run("ip", &["link", "set", "lo", "up"])?;
        self.run(
            "ip",
            &["route", "add", "default", "via", &GATEWAY.to_string()],
        )?;
        self.run("sysctl", &["-qw", "net.ipv4.ip_forward=1"])?;
        Ok(())
    }

    pub fn index(&self) -> u8 {
        self.index
    }

    /// Its hostname and node name, `kn-machine-N`.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Its address on the bridge, `10.250.0.(10+N)`.
    pub fn ip(&self) -> Ipv4Addr {
        Ipv4Addr::new(10, 250, 0, 10 + self.index)
    }

    /// Its pods' network, `10.251.N.0/24`.
    pub fn pod_cidr(&self) -> String {
        format!("10.251.{}.0/24", self.index)
    }

    /// The gateway of its pods' bridge (`cni0` inside the machine).
    pub fn pod_gateway(&self) -> Ipv4Addr {
        Ipv4Addr::new(10, 251, self.index, 1)
    }

    /// Its cgroup in every hierarchy (the kubelet's `cgroupRoot`).
    pub fn cgroup(&self) -> String {
        format!("/{CGROUP_PREFIX}{}", self.index)
    }

    /// The host pid of its first process.
    pub fn init_pid(&self) -> u32 {
        self.init
    }

    /// `nsenter` into every namespace of the machine, then into its cgroup in every hierarchy
    /// (nsenter keeps the caller's cgroups), then `program args`.
    fn enter(&self, program: &str, args: &[&str]) -> Command {
        let mut command = Command::new("nsenter");
        command
            .arg(format!("--target={}", self.init))
            .args(["--net", "--mount", "--uts", "--pid", "--", "sh", "-c"])
            .arg(format!(
                "for p in /sys/fs/cgroup/*{}/cgroup.procs; do echo $$ >\"$p\" || exit 125; done; \
                 exec \"$@\"",
                self.cgroup()
            ))
            .arg("enter")
            .arg(program)
            .args(args)
            .env_clear()
            .env("PATH", PATH);
        command
    }

    /// Runs `program args` inside the machine and returns its stdout.
    pub fn run(&self, program: &str, args: &[&str]) -> Result<String, Error> {
        let output = self
            .enter(program, args)
            .output()
            .map_err(|e| Error::io(format!("{}: run {program}", self.name), e))?;
        if output.status.success() {
            Ok(String::from_utf8_lossy(&output.stdout).into_owned())
        } else {
            Err(Error::Process(format!(
                "{}: `{program} {}` failed ({}): {}",
                self.name,
                args.join(" "),
                output.status,
                String::from_utf8_lossy(&output.stderr).trim()
            )))
        }
    }

    /// The host path of `path` as the machine sees it (through its first process's root).
    pub fn path(&self, path: &str) -> PathBuf {
        PathBuf::from(format!("/proc/{}/root{path}", self.init))
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

    /// Starts `program args` inside the machine as its `component`, logging beside the others.
    pub fn spawn(&self, component: &str, program: &str, args: &[String]) -> Result<(), Error> {
        let mut command = self.enter(program, &[]);
        command.args(args);
        let log = self.logs.join(format!("{}-{component}.log", self.name));
        let process = ManagedProcess::spawn(&format!("{}/{component}", self.name), command, log)?;
        lock(&self.guard).register(process.pid())?;
        self.lock().push(process);
        Ok(())
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<ManagedProcess>> {
        self.processes.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// `Err` naming the first of its processes that has exited.
    pub fn check_running(&self) -> Result<(), Error> {
        self.lock()
            .iter_mut()
            .try_for_each(ManagedProcess::check_running)
    }

    /// The machine's memory as its cgroup counts it (`total_rss` of memory.stat: every process
    /// of the machine, its pods' too; page cache not included).
    pub fn cgroup_rss(&self) -> u64 {
        let stat = format!("/sys/fs/cgroup/memory{}/memory.stat", self.cgroup());
        std::fs::read_to_string(stat)
            .unwrap_or_default()
            .lines()
            .find_map(|l| l.strip_prefix("total_rss "))
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or(0)
    }

    /// Resident memory of each process of the machine outside its pods (its cgroup's own
    /// processes, i.e. not under `kubepods`), by command name, summed per name.
    pub fn resident_memory(&self) -> Vec<(String, u64)> {
        let procs = format!("/sys/fs/cgroup/pids{}/cgroup.procs", self.cgroup());
        let mut by_name: Vec<(String, u64)> = Vec::new();
        for pid in std::fs::read_to_string(procs).unwrap_or_default().lines() {
            let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
            let field = |key: &str| {
                status
                    .lines()
                    .find_map(|l| l.strip_prefix(key))
                    .map(|v| v.trim().to_owned())
            };
            let name = field("Name:").unwrap_or_default();
            let rss = field("VmRSS:")
                .and_then(|v| v.split_whitespace().next()?.parse::<u64>().ok())
                .map_or(0, |kib| kib * 1024);
            match by_name.iter_mut().find(|(n, _)| *n == name) {
                Some((_, total)) => *total += rss,
                None => by_name.push((name, rss)),
            }
        }
        by_name
    }

    /// Stops what runs inside (last started first), then kills its first process, which ends
    /// the machine and its namespaces. Idempotent.
    pub fn stop(&self) {
        let mut processes = self.lock();
        while processes.len() > 1 {
            if let Some(mut p) = processes.pop() {
                p.stop();
            }
        }
        if let Some(mut first) = processes.pop() {
            first.kill();
        }
    }
}

fn lock(guard: &Mutex<Guard>) -> std::sync::MutexGuard<'_, Guard> {
    guard.lock().unwrap_or_else(|e| e.into_inner())
}

/// Creates cgroup `name` in every mounted hierarchy of /sys/fs/cgroup (cpuset's with its
/// parent's CPUs and memory nodes, without which no process may join) and returns each one's
/// `cgroup.procs`.
fn cgroup_procs(name: &str) -> Result<Vec<PathBuf>, Error> {
    let root = Path::new("/sys/fs/cgroup");
    let entries = std::fs::read_dir(root).map_err(|e| Error::io("read /sys/fs/cgroup", e))?;
    let mut procs = Vec::new();
    for entry in entries.flatten() {
        let hierarchy = entry.path();
        if !hierarchy.join("cgroup.procs").is_file() {
            continue;
        }
        let dir = hierarchy.join(name);
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
        return Err(Error::Machines(
            "no cgroup hierarchy under /sys/fs/cgroup".into(),
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
