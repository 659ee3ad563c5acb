//! The first stage: every machine reachable over SSH and fit to run its roles. One fixed
//! script per machine reports facts (`key=value` lines); the judgement is here, in Rust, so it
//! is tested without machines. Every unfit machine is named with every check it fails and
//! what to change; an unreachable one ends the stage with `ERR_MACHINE_UNREACHABLE` (a retry
//! can help once it answers), an unfit one with `ERR_PREFLIGHT` (it needs a change first).

use std::collections::BTreeMap;
use std::path::Path;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use crate::machines::{Machine, MachinesFile, Role};
use crate::ssh::{Ssh, SshError};
use crate::stage::{FailureCode, Stage, StageFailure};

/// The stage's deadline for each machine.
pub const DEADLINE: Duration = Duration::from_secs(60);

/// The smallest free space under `/var` (the bundle, images, etcd), in KiB: 5 GiB.
pub const MIN_DISK_KIB: u64 = 5 << 20;
/// The smallest memory, in KiB: 1 GiB for a worker, 2 GiB for a control plane.
pub const MIN_MEMORY_KIB: [u64; 2] = [1 << 20, 2 << 20];
/// How far a machine's clock may be from this one's (certificates and tokens are dated).
pub const MAX_CLOCK_SKEW_SECS: i64 = 30;

/// Ports a control plane machine listens on: the API server, etcd, the controller manager, the
/// scheduler, and a node's.
const CONTROL_PLANE_PORTS: [u16; 5] = [6443, 2379, 2380, 10257, 10259];
/// Ports every machine's node listens on: the kubelet and kube-proxy's health.
const NODE_PORTS: [u16; 2] = [10250, 10256];

/// What a machine says of itself: `key=value` lines.
const FACTS: &str = r#"sh -c '
echo "kernel=$(uname -r)"
echo "arch=$(uname -m)"
if [ -f /sys/fs/cgroup/cgroup.controllers ]; then echo "cgroup=v2"
elif [ -d /sys/fs/cgroup/memory ] && [ -d /sys/fs/cgroup/cpu,cpuacct -o -d /sys/fs/cgroup/cpu ]; then echo "cgroup=v1"
else echo "cgroup=none"; fi
echo "swap=$(awk "/^SwapTotal:/ {print \$2}" /proc/meminfo)"
echo "memory=$(awk "/^MemTotal:/ {print \$2}" /proc/meminfo)"
echo "disk=$(df -Pk /var | awk "NR == 2 {print \$4}")"
echo "os=$(. /etc/os-release && echo "$ID $VERSION_ID")"
echo "listening=$(ss -ltnH | awk "{print \$4}" | sed "s/.*://" | sort -un | tr "\n" " ")"
echo "time=$(date +%s)"
'"#;

/// What one machine reported.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Facts {
    pub kernel: String,
    pub arch: String,
    pub cgroup: String,
    pub swap_kib: u64,
    pub memory_kib: u64,
    pub disk_kib: u64,
    pub os: String,
    pub listening: Vec<u16>,
    /// Its clock minus this one's, seconds.
    pub clock_skew_secs: i64,
}

impl Facts {
    /// Reads the script's lines; `now` is this machine's clock when the answer arrived.
    pub fn parse(text: &str, now: i64) -> Self {
        let values: BTreeMap<&str, &str> = text
            .lines()
            .filter_map(|l| l.split_once('='))
            .map(|(k, v)| (k.trim(), v.trim()))
            .collect();
        let get = |k: &str| values.get(k).copied().unwrap_or_default().to_owned();
        let number = |k: &str| values.get(k).and_then(|v| v.parse().ok()).unwrap_or(0);
        Facts {
            kernel: get("kernel"),
            arch: get("arch"),
            cgroup: get("cgroup"),
            swap_kib: number("swap"),
            memory_kib: number("memory"),
            disk_kib: number("disk"),
            os: get("os"),
            listening: get("listening")
                .split_whitespace()
                .filter_map(|p| p.parse().ok())
                .collect(),
            clock_skew_secs: values
                .get("time")
                .and_then(|v| v.parse::<i64>().ok())
                .map_or(i64::MAX, |t| t - now),
        }
    }

    /// Every check `machine` fails for its roles, each saying what to change.
    pub fn problems(&self, machine: &Machine) -> Vec<String> {
        let control_plane = machine.roles.contains(&Role::ControlPlane);
        let mut problems = Vec::new();
        if self.arch != "x86_64" {
            problems.push(format!(
                "its architecture is {:?}: the bundle is for x86_64",
                self.arch
            ));
        }
        if self.os != "debian 12" {
            problems.push(format!(
                "it runs {:?}: the bundle's packages are Debian 12's",
                self.os
            ));
        }
        match kernel_version(&self.kernel) {
            Some(v) if v >= (4, 19) => {}
            _ => problems.push(format!(
                "its kernel is {:?}: 4.19 or newer is needed",
                self.kernel
            )),
        }
        if self.cgroup != "v1" && self.cgroup != "v2" {
            problems.push("it has no cgroup hierarchy with memory and cpu mounted".to_owned());
        }
        if self.swap_kib > 0 {
            problems.push(format!(
                "swap is on ({} KiB): the kubelet refuses to start with swap; turn it off \
                 (swapoff -a, and remove it from /etc/fstab)",
                self.swap_kib
            ));
        }
        let memory = MIN_MEMORY_KIB[usize::from(control_plane)];
        if self.memory_kib < memory {
            problems.push(format!(
                "it has {} MiB of memory: {} MiB is the least for its roles",
                self.memory_kib >> 10,
                memory >> 10
            ));
        }
        if self.disk_kib < MIN_DISK_KIB {
            problems.push(format!(
                "/var has {} MiB free: {} MiB is the least",
                self.disk_kib >> 10,
                MIN_DISK_KIB >> 10
            ));
        }
        let mut ports: Vec<u16> = NODE_PORTS.to_vec();
        if control_plane {
            ports.extend(CONTROL_PLANE_PORTS);
        }
        let taken: Vec<String> = ports
            .iter()
            .filter(|p| self.listening.contains(p))
            .map(u16::to_string)
            .collect();
        if !taken.is_empty() {
            problems.push(format!(
                "port {} is taken by another program",
                taken.join(", ")
            ));
        }
        if self.clock_skew_secs.abs() > MAX_CLOCK_SKEW_SECS {
            problems.push(if self.clock_skew_secs == i64::MAX {
                "it did not say its time".to_owned()
            } else {
                format!(
                    "its clock is {}s from this machine's: more than {MAX_CLOCK_SKEW_SECS}s \
                     breaks certificates and tokens; run a time service (systemd-timesyncd, chrony)",
                    self.clock_skew_secs
                )
            });
        }
        problems
    }
}

fn kernel_version(release: &str) -> Option<(u32, u32)> {
    let mut parts = release.split(['.', '-']);
    let major = parts.next()?.parse().ok()?;
    let minor = parts.next()?.parse().ok()?;
    Some((major, minor))
}

/// Runs the preflight stage on every machine of `file` at once; the facts by machine name, or
/// the failure: unreachable machines first (a retry can help), then every unfit machine with
/// every check it fails.
pub async fn run(
    file: &MachinesFile,
    known_hosts: &Path,
) -> Result<BTreeMap<String, Facts>, StageFailure> {
    let checks = file.machines.iter().map(|machine| async move {
        let ssh = Ssh::to(machine, known_hosts);
        (machine, ssh.run(FACTS, DEADLINE).await)
    });
    let answers = futures::future::join_all(checks).await;
    let mut facts = BTreeMap::new();
    let mut unfit = Vec::new();
    for (machine, answer) in answers {
        let output = match answer {
            Ok(output) => output,
            Err(SshError::Unreachable {
                machine: name,
                address,
                summary,
                output,
            }) => {
                return Err(StageFailure::new(
                    Stage::Preflight,
                    FailureCode::MachineUnreachable,
                    format!("{name} ({address}) does not answer over SSH: {summary}"),
                )
                .on(&name)
                .with_log(&output));
            }
            Err(SshError::Exec(e)) => {
                let code = match e {
                    kubenest_runtime::exec::ExecError::TimedOut { .. } => FailureCode::Timeout,
                    _ => FailureCode::Configuration,
                };
                return Err(
                    StageFailure::new(Stage::Preflight, code, e.to_string()).on(&machine.name)
                );
            }
        };
        if !output.success {
            return Err(StageFailure::new(
                Stage::Preflight,
                FailureCode::Preflight,
                format!(
                    "{}: the checks could not run: {}",
                    machine.name,
                    output.summary()
                ),
            )
            .on(&machine.name)
            .with_log(&output.stderr));
        }
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| i64::try_from(d.as_secs()).unwrap_or(i64::MAX));
        let found = Facts::parse(&String::from_utf8_lossy(&output.stdout), now);
        let problems = found.problems(machine);
        if !problems.is_empty() {
            unfit.push((machine.name.clone(), problems));
        }
        facts.insert(machine.name.clone(), found);
    }
    if let Some((first, _)) = unfit.first() {
        let message = unfit
            .iter()
            .map(|(name, problems)| format!("{name}: {}", problems.join("; ")))
            .collect::<Vec<_>>()
            .join(". ");
        return Err(StageFailure::new(Stage::Preflight, FailureCode::Preflight, message).on(first));
    }
    Ok(facts)
}

#[cfg(test)]
mod tests {
    use super::*;

    const FIT: &str = "kernel=6.1.0-40-amd64\narch=x86_64\ncgroup=v2\nswap=0\nmemory=4000000\n\
                       disk=20000000\nos=debian 12\nlistening=22 \ntime=1000\n";

    fn machine(roles: &[Role]) -> Machine {
        Machine {
            name: "m1".into(),
            address: "10.0.0.1".into(),
            port: 22,
            user: "root".into(),
            key_file: "/k".into(),
            roles: roles.to_vec(),
        }
    }

    #[test]
    fn a_fit_machine_has_no_problem() {
        let facts = Facts::parse(FIT, 1002);
        assert_eq!(facts.listening, [22]);
        assert_eq!(facts.clock_skew_secs, -2);
        assert!(facts.problems(&machine(&[Role::ControlPlane])).is_empty());
    }

    #[test]
    fn every_unfit_fact_is_named_with_what_to_change() {
        let cases = [
            ("swap=0", "swap=1024", "swap is on (1024 KiB)"),
            ("arch=x86_64", "arch=aarch64", "architecture is \"aarch64\""),
            ("os=debian 12", "os=ubuntu 24.04", "runs \"ubuntu 24.04\""),
            (
                "kernel=6.1.0-40-amd64",
                "kernel=4.4.0",
                "kernel is \"4.4.0\"",
            ),
            ("cgroup=v2", "cgroup=none", "no cgroup hierarchy"),
            (
                "memory=4000000",
                "memory=1500000",
                "1464 MiB of memory: 2048 MiB",
            ),
            ("disk=20000000", "disk=1000", "/var has 0 MiB free"),
            (
                "listening=22 ",
                "listening=22 2379 6443",
                "port 6443, 2379 is taken",
            ),
            (
                "time=1000",
                "time=1100",
                "clock is 100s from this machine's",
            ),
            ("time=1000", "", "did not say its time"),
        ];
        for (from, to, said) in cases {
            let facts = Facts::parse(&FIT.replacen(from, to, 1), 1000);
            let problems = facts.problems(&machine(&[Role::ControlPlane]));
            assert!(
                problems.len() == 1 && problems[0].contains(said),
                "{to}: {problems:?}"
            );
        }
        // A worker needs less memory and none of the control plane's ports.
        let worker = Facts::parse(
            &FIT.replacen("memory=4000000", "memory=1500000", 1)
                .replacen("listening=22 ", "listening=6443", 1),
            1000,
        );
        assert!(worker.problems(&machine(&[Role::Worker])).is_empty());
    }
}
