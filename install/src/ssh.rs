//! SSH sessions to the machines: OpenSSH's client, started through the one module that starts
//! programs ([`kubenest_runtime::exec`]), non-interactive, with a connect timeout and the
//! machine's key only. Host keys are learnt on first contact into the install's own
//! known-hosts file and held to after that (`StrictHostKeyChecking=accept-new`): a machine
//! whose key changes mid-install is refused, not trusted again.
//!
//! Only commands this crate fixes run on a machine ([`Ssh::run`] takes `&'static str`); a
//! machine's address, port, user and key file were checked by [`crate::machines`] and reach
//! ssh as option values or after `--`.

use std::path::{Path, PathBuf};
use std::time::Duration;

use kubenest_runtime::exec::{ExecError, Output, Program};

use crate::machines::Machine;

/// How long a connection may take before the machine counts as unreachable.
pub const CONNECT_TIMEOUT_SECS: u32 = 5;

/// The exit status ssh itself fails with (as opposed to the remote command's).
const SSH_FAILED: i32 = 255;

/// How a machine is reached.
#[derive(Debug, Clone)]
pub struct Ssh {
    name: String,
    address: String,
    port: u16,
    user: String,
    key_file: PathBuf,
    known_hosts: PathBuf,
}

/// Why a command did not run to its end on a machine.
#[derive(Debug, thiserror::Error)]
pub enum SshError {
    /// ssh could not connect or log in: its own lines say why.
    #[error("{machine} ({address}) is unreachable over SSH: {summary}")]
    Unreachable {
        machine: String,
        address: String,
        summary: String,
        output: Vec<u8>,
    },
    #[error(transparent)]
    Exec(#[from] ExecError),
}

impl Ssh {
    /// Reaches `machine`, learning and keeping host keys in `known_hosts`.
    pub fn to(machine: &Machine, known_hosts: &Path) -> Self {
        Self {
            name: machine.name.clone(),
            address: machine.address.clone(),
            port: machine.port,
            user: machine.user.clone(),
            key_file: machine.key_file.clone(),
            known_hosts: known_hosts.to_owned(),
        }
    }

    /// The machine's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Runs `command` (a shell command line of this crate's) on the machine, at most `timeout`.
    /// The remote command's own failure is an [`Output`] like any other; ssh's is
    /// [`SshError::Unreachable`].
    pub async fn run(&self, command: &'static str, timeout: Duration) -> Result<Output, SshError> {
        let output = self
            .options(Program::new("ssh"))
            .option("-oUser", &self.user)
            .operands([self.address.as_str(), command])
            .timeout(timeout)
            .max_output(1 << 20)
            .run()
            .await?;
        if output.code == Some(SSH_FAILED) {
            return Err(self.unreachable(output));
        }
        Ok(output)
    }

    /// Copies `files` (absolute paths) into the machine's folder `into` (absolute, a path of
    /// this crate's) with scp, at most `timeout`.
    pub async fn copy(
        &self,
        files: &[&Path],
        into: &str,
        timeout: Duration,
    ) -> Result<Output, SshError> {
        let host = match self.address.parse::<std::net::IpAddr>() {
            Ok(std::net::IpAddr::V6(v6)) => format!("[{v6}]"),
            _ => self.address.clone(),
        };
        let destination = format!("{}@{host}:{into}/", self.user);
        let mut operands: Vec<&std::ffi::OsStr> = files.iter().map(|f| f.as_os_str()).collect();
        operands.push(destination.as_ref());
        // A relative `host:file` would name another machine's file to scp.
        if let Some(relative) = files.iter().find(|f| !f.is_absolute()) {
            return Err(SshError::Exec(ExecError::RelativePath {
                program: "scp".to_owned(),
                path: relative.display().to_string(),
            }));
        }
        let output = self
            .options(Program::new("scp"))
            .arg("-q")
            // Modes kept: a key stays readable by its owner only.
            .arg("-p")
            .operands(operands)
            .timeout(timeout)
            .max_output(1 << 20)
            .run()
            .await?;
        if !output.success && output.code == Some(SSH_FAILED) {
            return Err(self.unreachable(output));
        }
        Ok(output)
    }

    /// The options ssh and scp share.
    fn options(&self, program: Program) -> Program {
        program
            .arg("-oBatchMode=yes")
            .arg("-oIdentitiesOnly=yes")
            .arg("-oStrictHostKeyChecking=accept-new")
            .arg("-oLogLevel=ERROR")
            .option("-oConnectTimeout", CONNECT_TIMEOUT_SECS.to_string())
            .option("-oServerAliveInterval", "5")
            .path_option("-oIdentityFile", &self.key_file)
            .path_option("-oUserKnownHostsFile", &self.known_hosts)
            .option("-oPort", self.port.to_string())
    }

    fn unreachable(&self, output: Output) -> SshError {
        SshError::Unreachable {
            machine: self.name.clone(),
            address: self.address.clone(),
            summary: output.summary(),
            output: output.stderr,
        }
    }
}
