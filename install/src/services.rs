//! Programs the stages run on machines, as services: each is a script
//! `/etc/kubenest/services/NAME.sh` made here from checked values (a file, never a command
//! line), and `kubenest-service` (`service.sh`, put on every machine with it) starts it as a
//! systemd unit where systemd is PID 1, or as a supervised process of the machine's own init
//! on a local machine. A stage says "start etcd"; how is the machine's business.

use std::path::Path;
use std::time::Duration;

use sha2::{Digest, Sha256};

use crate::files::{self, Pushed, Remote, Wanted};
use crate::ssh::Ssh;
use crate::stage::{FailureCode, Stage, StageFailure};

/// The service command, as every machine gets it.
const SERVICE_SH: &str = include_str!("service.sh");

const REMOTE: Remote = Remote {
    folders: &[
        ("bin", "/etc/kubenest/bin"),
        ("services", "/etc/kubenest/services"),
    ],
    list: "sh -c 'mkdir -p /etc/kubenest/bin /etc/kubenest/services && cd /etc/kubenest && \
           find bin services -type f -exec sha256sum {} +'",
};

/// How long a machine may take to answer a service command.
const COMMAND_DEADLINE: Duration = Duration::from_secs(60);

/// A service a stage runs: its name (the command's words are fixed per service) and script.
#[derive(Debug, Clone, Copy)]
pub struct Service {
    pub name: &'static str,
    pub start: &'static str,
    pub restart: &'static str,
    pub logs: &'static str,
}

/// etcd, on control plane machines.
pub const ETCD: Service = Service {
    name: "etcd",
    start: "sh /etc/kubenest/bin/kubenest-service start etcd",
    restart: "sh /etc/kubenest/bin/kubenest-service restart etcd",
    logs: "sh /etc/kubenest/bin/kubenest-service logs etcd",
};

fn wanted(dir: &Path, path: &str, text: &str) -> Result<Wanted, StageFailure> {
    let local = dir.join(path);
    if let Some(parent) = local.parent() {
        std::fs::create_dir_all(parent).map_err(|e| {
            StageFailure::new(Stage::Etcd, FailureCode::Configuration, e.to_string())
        })?;
    }
    std::fs::write(&local, text)
        .map_err(|e| StageFailure::new(Stage::Etcd, FailureCode::Configuration, e.to_string()))?;
    Ok(Wanted {
        path: path.to_owned(),
        local,
        sha256: format!("{:x}", Sha256::digest(text.as_bytes())),
        size: text.len() as u64,
    })
}

/// Puts `service`'s `script` (and the service command) on `ssh`'s machine, staged under `dir`,
/// and starts it: again if its script changed, else only if it does not run.
pub async fn run(
    stage: Stage,
    ssh: &Ssh,
    dir: &Path,
    service: Service,
    script: &str,
) -> Result<Pushed, StageFailure> {
    let files = [
        wanted(dir, "bin/kubenest-service", SERVICE_SH)?,
        wanted(dir, &format!("services/{}.sh", service.name), script)?,
    ];
    let pushed = files::sync(stage, ssh, &REMOTE, &files, COMMAND_DEADLINE).await?;
    let command = if pushed.copied > 0 {
        service.restart
    } else {
        service.start
    };
    let output = ssh
        .run(command, COMMAND_DEADLINE)
        .await
        .map_err(|e| files::failure(stage, ssh, e))?;
    if !output.success {
        return Err(StageFailure::new(
            stage,
            FailureCode::Configuration,
            format!(
                "{} could not be started: {}",
                service.name,
                output.summary()
            ),
        )
        .on(ssh.name())
        .with_log(&output.stderr));
    }
    Ok(pushed)
}

/// The service's last lines on `ssh`'s machine, for a failure (empty when they cannot be read).
pub async fn logs(ssh: &Ssh, service: Service) -> Vec<u8> {
    match ssh.run(service.logs, COMMAND_DEADLINE).await {
        Ok(output) => output.stdout,
        Err(_) => Vec::new(),
    }
}
