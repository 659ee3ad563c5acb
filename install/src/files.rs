//! Keeping a machine's folder in step with files made here, for the stages that hand files out
//! (`bundle`, `pki`): list what the machine holds with its checksums, copy only what is
//! missing or different (scp, modes kept), then list again and compare, so what arrived is
//! checked rather than assumed. A second run copies nothing.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::time::Duration;

use kubenest_runtime::exec::ExecError;

use crate::ssh::{Ssh, SshError};
use crate::stage::{FailureCode, Stage, StageFailure};

/// A folder on every machine, fixed by this crate: its subfolders (relative name, absolute
/// path) and the command that makes them and lists every file under it with its sha256.
#[derive(Debug)]
pub struct Remote {
    pub folders: &'static [(&'static str, &'static str)],
    pub list: &'static str,
}

/// A file a machine should hold: its path under the folder (`etcd/ca.crt`), the local file and
/// its checksum.
#[derive(Debug, Clone)]
pub struct Wanted {
    pub path: String,
    pub local: PathBuf,
    pub sha256: String,
    pub size: u64,
}

/// What a stage did on one machine.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Pushed {
    /// Files copied.
    pub copied: usize,
    /// Files already there, whole.
    pub kept: usize,
    /// Bytes copied.
    pub bytes: u64,
}

/// The failure of `stage` on `ssh`'s machine for an SSH error.
pub fn failure(stage: Stage, ssh: &Ssh, error: SshError) -> StageFailure {
    match error {
        SshError::Unreachable {
            summary, output, ..
        } => StageFailure::new(
            stage,
            FailureCode::MachineUnreachable,
            format!("{} does not answer over SSH: {summary}", ssh.name()),
        )
        .with_log(&output),
        SshError::Exec(e) => {
            let code = match e {
                ExecError::TimedOut { .. } => FailureCode::Timeout,
                _ => FailureCode::Transfer,
            };
            StageFailure::new(stage, code, e.to_string())
        }
    }
    .on(ssh.name())
}

/// What the machine holds under `remote`: checksum by path.
async fn listed(
    stage: Stage,
    ssh: &Ssh,
    remote: &Remote,
    deadline: Duration,
) -> Result<BTreeMap<String, String>, StageFailure> {
    let output = ssh
        .run(remote.list, deadline)
        .await
        .map_err(|e| failure(stage, ssh, e))?;
    if !output.success {
        return Err(StageFailure::new(
            stage,
            FailureCode::Transfer,
            format!(
                "the machine's folder could not be read: {}",
                output.summary()
            ),
        )
        .on(ssh.name())
        .with_log(&output.stderr));
    }
    Ok(String::from_utf8_lossy(&output.stdout)
        .lines()
        .filter_map(|l| l.split_once("  "))
        .map(|(digest, path)| {
            let path = path.strip_prefix("./").unwrap_or(path);
            (path.to_owned(), digest.to_owned())
        })
        .collect())
}

/// Brings `ssh`'s machine's `remote` folder up to `wanted`, within `deadline` per step.
pub async fn sync(
    stage: Stage,
    ssh: &Ssh,
    remote: &Remote,
    wanted: &[Wanted],
    deadline: Duration,
) -> Result<Pushed, StageFailure> {
    let there = listed(stage, ssh, remote, deadline).await?;
    let missing: Vec<&Wanted> = wanted
        .iter()
        .filter(|f| there.get(&f.path) != Some(&f.sha256))
        .collect();
    let folder_of = |path: &str| {
        path.rsplit_once('/')
            .map_or("", |(folder, _)| folder)
            .to_owned()
    };
    let folders: BTreeSet<String> = missing.iter().map(|f| folder_of(&f.path)).collect();
    for folder in folders {
        let Some((_, into)) = remote.folders.iter().find(|(name, _)| *name == folder) else {
            return Err(StageFailure::new(
                stage,
                FailureCode::Configuration,
                format!("no folder {folder:?} to copy into"),
            ));
        };
        let files: Vec<&Path> = missing
            .iter()
            .filter(|f| folder_of(&f.path) == folder)
            .map(|f| f.local.as_path())
            .collect();
        let output = ssh
            .copy(&files, into, deadline)
            .await
            .map_err(|e| failure(stage, ssh, e))?;
        if !output.success {
            return Err(StageFailure::new(
                stage,
                FailureCode::Transfer,
                format!("copying into {into} failed: {}", output.summary()),
            )
            .on(ssh.name())
            .with_log(&output.stderr));
        }
    }
    if !missing.is_empty() {
        let arrived = listed(stage, ssh, remote, deadline).await?;
        if let Some(bad) = wanted
            .iter()
            .find(|f| arrived.get(&f.path) != Some(&f.sha256))
        {
            return Err(StageFailure::new(
                stage,
                FailureCode::Transfer,
                format!("{} did not arrive whole", bad.path),
            )
            .on(ssh.name()));
        }
    }
    Ok(Pushed {
        copied: missing.len(),
        kept: wanted.len() - missing.len(),
        bytes: missing.iter().map(|f| f.size).sum(),
    })
}
