//! The stages of an install and how one fails: Gardener's vocabulary (the failed task, a code,
//! user error or temporary, retrying or stopped) rather than "timed out waiting for the
//! condition".

use std::fmt;

/// One stage of an install, in the order they run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Stage {
    /// Every machine reachable and fit: kernel, cgroups, swap, ports, clock, disk, OS.
    Preflight,
    /// The bundle's files on every machine, checked against its manifest.
    Bundle,
    /// The cluster's certificate authorities and certificates.
    Pki,
    Etcd,
    ControlPlane,
    /// The kubelets joined, one machine at a time (`nodes i/n`).
    Nodes,
    /// CNI, kube-proxy and the routes between machines.
    Network,
    Dns,
    Storage,
    /// PostgreSQL with a volume, then the kubenest control plane chart.
    Platform,
    /// The cluster registered to the control plane, its agent connected.
    Register,
}

impl Stage {
    /// Every stage, in order.
    pub const ALL: [Stage; 11] = [
        Stage::Preflight,
        Stage::Bundle,
        Stage::Pki,
        Stage::Etcd,
        Stage::ControlPlane,
        Stage::Nodes,
        Stage::Network,
        Stage::Dns,
        Stage::Storage,
        Stage::Platform,
        Stage::Register,
    ];

    /// The stage's name as statuses, events and the CLI print it.
    pub fn name(self) -> &'static str {
        match self {
            Stage::Preflight => "preflight",
            Stage::Bundle => "bundle",
            Stage::Pki => "pki",
            Stage::Etcd => "etcd",
            Stage::ControlPlane => "control-plane",
            Stage::Nodes => "nodes",
            Stage::Network => "network",
            Stage::Dns => "dns",
            Stage::Storage => "storage",
            Stage::Platform => "platform",
            Stage::Register => "register",
        }
    }

    /// The stage's place, from 1 (for `stage n/m`).
    pub fn number(self) -> usize {
        Stage::ALL.iter().position(|s| *s == self).unwrap_or(0) + 1
    }
}

impl fmt::Display for Stage {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Why a stage failed, as a code a program can act on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum FailureCode {
    /// SSH could not reach or log in to a machine.
    MachineUnreachable,
    /// A machine is unfit: the message says which check and what to change.
    Preflight,
    /// A kubelet did not become Ready; its own lines say why.
    KubeletNotReady,
    /// What was asked for cannot work as written (a setting, a file).
    Configuration,
    /// The stage's deadline passed.
    Timeout,
    /// Files did not arrive whole on a machine (a copy cut, a full disk).
    Transfer,
}

impl FailureCode {
    /// The code as statuses and the API print it.
    pub fn as_str(self) -> &'static str {
        match self {
            FailureCode::MachineUnreachable => "ERR_MACHINE_UNREACHABLE",
            FailureCode::Preflight => "ERR_PREFLIGHT",
            FailureCode::KubeletNotReady => "ERR_KUBELET_NOT_READY",
            FailureCode::Configuration => "ERR_CONFIGURATION",
            FailureCode::Timeout => "ERR_TIMEOUT",
            FailureCode::Transfer => "ERR_TRANSFER",
        }
    }

    /// Whether running the stage again, unchanged, can succeed: a machine that comes back or a
    /// slow start can; an unfit machine or a wrong setting needs a change first.
    pub fn retryable(self) -> bool {
        matches!(
            self,
            FailureCode::MachineUnreachable
                | FailureCode::Timeout
                | FailureCode::KubeletNotReady
                | FailureCode::Transfer
        )
    }
}

impl fmt::Display for FailureCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The most lines of a failing program's output a failure keeps.
pub const LOG_LINES: usize = 50;

/// A stage that failed: where, why, whether a retry can help, and the failing program's own
/// last lines.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{stage} failed ({code}{}): {message}", machine.as_ref().map(|m| format!(" on {m}")).unwrap_or_default())]
pub struct StageFailure {
    pub stage: Stage,
    pub code: FailureCode,
    /// The machine it failed on, when it was one.
    pub machine: Option<String>,
    /// For people: what failed and what to change.
    pub message: String,
    /// The last [`LOG_LINES`] lines of the failing program's output.
    pub log: Vec<String>,
}

impl StageFailure {
    pub fn new(stage: Stage, code: FailureCode, message: impl Into<String>) -> Self {
        Self {
            stage,
            code,
            machine: None,
            message: message.into(),
            log: Vec::new(),
        }
    }

    pub fn on(mut self, machine: &str) -> Self {
        self.machine = Some(machine.to_owned());
        self
    }

    /// Keeps the last [`LOG_LINES`] non-empty lines of `output`.
    pub fn with_log(mut self, output: &[u8]) -> Self {
        self.log = last_lines(output, LOG_LINES);
        self
    }

    pub fn retryable(&self) -> bool {
        self.code.retryable()
    }
}

/// The last `n` non-empty lines of `output`, control characters replaced.
pub fn last_lines(output: &[u8], n: usize) -> Vec<String> {
    let text = String::from_utf8_lossy(output);
    let lines: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
    lines[lines.len().saturating_sub(n)..]
        .iter()
        .map(|l| {
            l.chars()
                .map(|c| if c.is_control() { ' ' } else { c })
                .collect()
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stages_are_numbered_in_order_and_named_as_printed() {
        assert_eq!(Stage::Preflight.number(), 1);
        assert_eq!(Stage::Register.number(), 11);
        assert_eq!(Stage::ControlPlane.to_string(), "control-plane");
        let mut sorted = Stage::ALL;
        sorted.sort();
        assert_eq!(sorted, Stage::ALL);
    }

    #[test]
    fn a_failure_says_its_stage_code_and_machine_and_keeps_the_last_lines() {
        let output: String = (1..=80).map(|i| format!("line {i}\n\n")).collect();
        let failure = StageFailure::new(
            Stage::Preflight,
            FailureCode::MachineUnreachable,
            "no answer",
        )
        .on("machine-2")
        .with_log(output.as_bytes());
        assert_eq!(
            failure.to_string(),
            "preflight failed (ERR_MACHINE_UNREACHABLE on machine-2): no answer"
        );
        assert_eq!(failure.log.len(), LOG_LINES);
        assert_eq!(failure.log[0], "line 31");
        assert_eq!(failure.log[49], "line 80");
        assert!(failure.retryable());
        assert!(!FailureCode::Preflight.retryable());
    }
}
