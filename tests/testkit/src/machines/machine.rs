//! One local machine of a test ([`kubenest_machines::Machine`]) and the programs the test starts
//! inside it, stopped with it.

use std::net::Ipv4Addr;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Arc, Mutex};

use crate::Error;
use crate::node::host::Guard;
use crate::process::ManagedProcess;

/// The PATH of every program started in a machine (nothing else of the test's environment).
const PATH: &str = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

/// A running local machine.
#[derive(Debug)]
pub struct Machine {
    machine: kubenest_machines::Machine,
    logs: PathBuf,
    /// What was started inside, in order.
    processes: Mutex<Vec<ManagedProcess>>,
    /// The machines' guard, which kills each registered process group when they end.
    guard: Arc<Mutex<Guard>>,
}

impl Machine {
    /// Makes machine `index` (its folders, cgroup, first process and network).
    pub(super) async fn make(
        index: u8,
        logs: &Path,
        guard: &Arc<Mutex<Guard>>,
    ) -> Result<Self, Error> {
        Ok(Self {
            machine: kubenest_machines::Machine::make(index).await?,
            logs: logs.to_owned(),
            processes: Mutex::new(Vec::new()),
            guard: guard.clone(),
        })
    }

    /// The machine as the product knows it (its record).
    pub fn machine(&self) -> &kubenest_machines::Machine {
        &self.machine
    }

    pub fn index(&self) -> u8 {
        self.machine.index
    }

    /// Its hostname and node name, `kn-machine-N`.
    pub fn name(&self) -> &str {
        &self.machine.name
    }

    /// Its address on the bridge, `10.250.0.(10+N)`.
    pub fn ip(&self) -> Ipv4Addr {
        self.machine.address
    }

    /// Its pods' network, `10.251.N.0/24`.
    pub fn pod_cidr(&self) -> String {
        self.machine.pod_cidr()
    }

    /// The gateway of its pods' bridge (`cni0` inside the machine).
    pub fn pod_gateway(&self) -> Ipv4Addr {
        self.machine.pod_gateway()
    }

    /// Its cgroup in every hierarchy (the kubelet's `cgroupRoot`).
    pub fn cgroup(&self) -> String {
        self.machine.cgroup.clone()
    }

    /// The host pid of its first process.
    pub fn init_pid(&self) -> u32 {
        self.machine.pid
    }

    /// Runs `program args` inside the machine and returns its stdout.
    pub async fn run(&self, program: &str, args: &[&str]) -> Result<String, Error> {
        Ok(self.machine.run(program, args).await?)
    }

    /// The host path of `path` as the machine sees it (through its first process's root).
    pub fn path(&self, path: &str) -> PathBuf {
        self.machine.path(path)
    }

    /// Writes `text` to `path` in the machine (its own `/etc`, `/var`, `/run`), making folders.
    pub fn write(&self, path: &str, text: &str) -> Result<(), Error> {
        Ok(self.machine.write(path, text)?)
    }

    /// Starts `program args` inside the machine as its `component`, logging beside the others.
    pub fn spawn(&self, component: &str, program: &str, args: &[String]) -> Result<(), Error> {
        let mut command = Command::new("nsenter");
        command
            .args(self.machine.enter_args())
            .arg(program)
            .args(args)
            .env_clear()
            .env("PATH", PATH);
        let log = self.logs.join(format!("{}-{component}.log", self.name()));
        let process = ManagedProcess::spawn(&format!("{}/{component}", self.name()), command, log)?;
        self.guard
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .register(process.pid())?;
        self.lock().push(process);
        Ok(())
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<ManagedProcess>> {
        self.processes.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// `Err` naming the machine or the first of its processes that has exited.
    pub fn check_running(&self) -> Result<(), Error> {
        if !self.machine.alive() {
            return Err(Error::Machines(format!("{} has ended", self.name())));
        }
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
        while let Some(mut p) = processes.pop() {
            p.stop();
        }
        self.machine.kill();
    }
}
