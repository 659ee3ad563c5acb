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
        ("conf", "/etc/kubenest/conf"),
    ],
    list: "sh -c 'mkdir -p /etc/kubenest/bin /etc/kubenest/services && \
           mkdir -p -m 0700 /etc/kubenest/conf && cd /etc/kubenest && \
           find bin services conf -type f -exec sha256sum {} +'",
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

/// A service's fixed commands, from its name (a literal, so the commands stay `&'static str`).
macro_rules! service {
    ($name:literal) => {
        Service {
            name: $name,
            start: concat!("sh /etc/kubenest/bin/kubenest-service start ", $name),
            restart: concat!("sh /etc/kubenest/bin/kubenest-service restart ", $name),
            logs: concat!("sh /etc/kubenest/bin/kubenest-service logs ", $name),
        }
    };
}

/// etcd, on control plane machines.
pub const ETCD: Service = service!("etcd");
/// The control plane's programs.
pub const KUBE_APISERVER: Service = service!("kube-apiserver");
pub const KUBE_CONTROLLER_MANAGER: Service = service!("kube-controller-manager");
pub const KUBE_SCHEDULER: Service = service!("kube-scheduler");

/// A file a service reads besides its script: its path under `/etc/kubenest` (`conf/NAME`),
/// its text, and whether it holds a secret (a kubeconfig with a key: mode 0600).
#[derive(Debug, Clone)]
pub struct Extra {
    pub path: String,
    pub text: String,
    pub secret: bool,
}

fn wanted(
    stage: Stage,
    dir: &Path,
    path: &str,
    text: &str,
    secret: bool,
) -> Result<Wanted, StageFailure> {
    use std::io::Write as _;
    use std::os::unix::fs::OpenOptionsExt as _;
    let failed = |e: std::io::Error| {
        StageFailure::new(stage, FailureCode::Configuration, format!("{path}: {e}"))
    };
    let local = dir.join(path);
    if let Some(parent) = local.parent() {
        std::fs::create_dir_all(parent).map_err(failed)?;
    }
    // Made again each time, so a file once written open is not left so.
    let _ = std::fs::remove_file(&local);
    std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(if secret { 0o600 } else { 0o644 })
        .open(&local)
        .and_then(|mut f| f.write_all(text.as_bytes()))
        .map_err(failed)?;
    Ok(Wanted {
        path: path.to_owned(),
        local,
        sha256: format!("{:x}", Sha256::digest(text.as_bytes())),
        size: text.len() as u64,
    })
}

/// Puts `service`'s `script` and `extra` files (and the service command) on `ssh`'s machine,
/// staged under `dir`, and starts it: again if any of them changed, else only if it does not
/// run.
pub async fn run(
    stage: Stage,
    ssh: &Ssh,
    dir: &Path,
    service: Service,
    script: &str,
    extra: &[Extra],
) -> Result<Pushed, StageFailure> {
    let mut files = vec![
        wanted(stage, dir, "bin/kubenest-service", SERVICE_SH, false)?,
        wanted(
            stage,
            dir,
            &format!("services/{}.sh", service.name),
            script,
            false,
        )?,
    ];
    for file in extra {
        files.push(wanted(stage, dir, &file.path, &file.text, file.secret)?);
    }
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
