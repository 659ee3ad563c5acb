//! The cluster's GitOps repository: a record of the addons the agent runs, one folder per
//! addon under `clusters/{cluster-id}/addons/{namespace}-{addon}/`, committed with a message
//! that says what changed, and pushed. Workloads are never committed (a Helm workload's chart
//! is the App's own, and its App is the record). The agent keeps a working clone of its own;
//! commits are serialized, and a push that lost a race is redone on the new head.
//!
//! Each folder stands on its own, readable by any engine without kubenest ([`addon_files`]):
//! `manifests.yaml` (every object the agent applies for the addon, Secrets excepted) with a
//! `kustomization.yaml` over it, for kustomize engines such as Flux's kustomize-controller;
//! and `Chart.yaml` with `values.yaml` for Helm, the chart vendored in `chart/` when it is one
//! of the agent's catalog (which exists only in its image) or named by its repository URL. The
//! `kustomization.yaml` of `clusters/{cluster-id}/addons/` lists every folder, so one engine
//! pointed there applies them all. Credentials are never committed: the addon's export Secret
//! stays on its cluster, and a folder's `README.md` says what must exist before it is applied
//! elsewhere.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use kubenest_runtime::exec::{ExecError, Program};

mod folder;

pub use folder::{AddonRecord, addon_files, chart_files};
use folder::{KUSTOMIZATION, kustomization};
use tokio::sync::Mutex;

/// How long one git command may take (a clone or push over the network included).
const GIT_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(120);

/// Why the repository could not be updated.
#[derive(Debug, thiserror::Error)]
pub enum GitError {
    #[error("git {args}: {stderr}")]
    Failed { args: String, stderr: String },
    #[error("running git: {0}")]
    Exec(#[from] ExecError),
    #[error("writing the repository's files: {0}")]
    Io(#[from] std::io::Error),
}

/// One addon's folder as committed: each file's path in the folder, and its text.
pub type AddonFiles = BTreeMap<String, String>;

/// A GitOps repository and the agent's working clone of it.
#[derive(Debug)]
pub struct GitOps {
    remote: String,
    branch: String,
    work: PathBuf,
    lock: Mutex<()>,
    /// What each folder last held and the commit holding it: unchanged files cost no git work.
    committed: std::sync::Mutex<std::collections::HashMap<String, (AddonFiles, String)>>,
}

const AUTHOR: [(&str, &str); 4] = [
    ("GIT_AUTHOR_NAME", "kubenest-agent"),
    ("GIT_AUTHOR_EMAIL", "agent@kubenest.invalid"),
    ("GIT_COMMITTER_NAME", "kubenest-agent"),
    ("GIT_COMMITTER_EMAIL", "agent@kubenest.invalid"),
];

impl GitOps {
    /// A repository at `remote` (a URL or a path), cloned into `work` on first use.
    pub fn new(remote: impl Into<String>, branch: impl Into<String>, work: PathBuf) -> Self {
        Self {
            remote: remote.into(),
            branch: branch.into(),
            work,
            lock: Mutex::new(()),
            committed: Default::default(),
        }
    }

    /// The folder of an addon in the repository.
    pub fn addon_dir(cluster_id: &str, namespace: &str, addon: &str) -> String {
        format!("{}/{namespace}-{addon}", Self::addons_dir(cluster_id))
    }

    /// The folder holding a cluster's addon folders.
    pub fn addons_dir(cluster_id: &str) -> String {
        format!("clusters/{cluster_id}/addons")
    }

    /// Rewrites the `kustomization.yaml` of the addons folder that holds `dir` to list every
    /// addon folder in it, and stages it (or removes it once no folder is left).
    async fn index(&self, dir: &str) -> Result<(), GitError> {
        let Some((parent, _)) = dir.rsplit_once('/') else {
            return Ok(());
        };
        let folder = self.work.join(parent);
        let mut folders = Vec::new();
        if let Ok(mut entries) = tokio::fs::read_dir(&folder).await {
            while let Some(entry) = entries.next_entry().await? {
                if entry.path().join(KUSTOMIZATION).exists() {
                    folders.push(entry.file_name().to_string_lossy().into_owned());
                }
            }
        }
        folders.sort();
        let index = format!("{parent}/{KUSTOMIZATION}");
        if folders.is_empty() {
            self.git(
                &self.work,
                Self::program("rm")
                    .arg("--quiet")
                    .arg("--ignore-unmatch")
                    .operands([index.as_str()]),
            )
            .await?;
            return Ok(());
        }
        tokio::fs::write(self.work.join(&index), kustomization(None, &folders)).await?;
        self.git(&self.work, Self::program("add").operands([index.as_str()]))
            .await?;
        Ok(())
    }

    /// `git <command> …` in `dir`, through the one module that starts programs: the remote,
    /// branch and folder names are operands after `--end-of-options`/`--`, never flags.
    fn program(command: &'static str) -> Program {
        let mut program = Program::new("git")
            .arg(command)
            .env("GIT_TERMINAL_PROMPT", "0")
            .timeout(GIT_TIMEOUT);
        for (key, value) in AUTHOR {
            program = program.env(key, value);
        }
        // The agent's own account (ssh keys, credential helpers) reaches the remote as before.
        if let Some(home) = std::env::var_os("HOME") {
            program = program.env("HOME", home);
        }
        program
    }

    async fn git(&self, dir: &Path, program: Program) -> Result<String, GitError> {
        let command = program
            .argv()
            .first()
            .map(|c| c.to_string_lossy().into_owned())
            .unwrap_or_default();
        let output = program.current_dir(dir).run().await?;
        if !output.success {
            return Err(GitError::Failed {
                args: command,
                stderr: output.summary(),
            });
        }
        Ok(String::from_utf8_lossy(&output.stdout).trim().to_owned())
    }

    /// Clones on first use, then brings the clone to the remote's head (dropping anything local
    /// that never got pushed: the remote is the record).
    async fn refresh(&self) -> Result<(), GitError> {
        if !self.work.join(".git").exists() {
            if let Some(parent) = self.work.parent() {
                tokio::fs::create_dir_all(parent).await?;
            }
            let work = self.work.display().to_string();
            let parent = self.work.parent().unwrap_or(Path::new("/"));
            self.git(
                parent,
                Self::program("clone")
                    .arg("--quiet")
                    .operands([self.remote.as_str(), work.as_str()]),
            )
            .await?;
        }
        self.git(
            &self.work,
            Self::program("fetch").arg("--quiet").arg("origin"),
        )
        .await?;
        let remote_head = format!("origin/{}", self.branch);
        let has_branch = self
            .git(
                &self.work,
                Self::program("rev-parse")
                    .arg("--verify")
                    .arg("--quiet")
                    .after("--end-of-options", [remote_head.as_str()]),
            )
            .await
            .is_ok();
        if has_branch {
            // The branch and the work tree become the remote's head, local changes dropped
            // (`reset` takes no `--end-of-options`; `switch` does, and can discard).
            self.git(
                &self.work,
                Self::program("switch")
                    .arg("--quiet")
                    .arg("--discard-changes")
                    .option("--force-create", &self.branch)
                    .after("--end-of-options", [remote_head.as_str()]),
            )
            .await?;
        } else {
            // An empty repository: the first commit starts the branch. A commit made here
            // before (whose push was refused) is not the remote's: the clone starts over, or
            // the next attempt would find nothing to commit and take that commit as written.
            let local = self
                .git(
                    &self.work,
                    Self::program("rev-parse")
                        .arg("--verify")
                        .arg("--quiet")
                        .arg("HEAD"),
                )
                .await;
            if local.is_ok() {
                tokio::fs::remove_dir_all(&self.work).await?;
                return Box::pin(self.refresh()).await;
            }
            self.git(
                &self.work,
                Self::program("switch")
                    .arg("--quiet")
                    .option("--orphan", &self.branch),
            )
            .await
            .or_else(|e| match e {
                GitError::Failed { .. } => Ok(String::new()),
                other => Err(other),
            })?;
        }
        Ok(())
    }

    /// Writes an addon's files and commits them with `message`; returns the commit holding them
    /// (the current head when nothing changed).
    pub async fn commit_addon(
        &self,
        dir: &str,
        files: &AddonFiles,
        message: &str,
    ) -> Result<String, GitError> {
        let cached = self.committed.lock().ok().and_then(|c| {
            c.get(dir)
                .filter(|(held, _)| held == files)
                .map(|(_, sha)| sha.clone())
        });
        if let Some(sha) = cached {
            return Ok(sha);
        }
        let _serial = self.lock.lock().await;
        let mut attempt = 0;
        loop {
            self.refresh().await?;
            // The folder is replaced whole: a file the addon no longer has goes with it.
            self.git(
                &self.work,
                Self::program("rm")
                    .arg("-r")
                    .arg("--quiet")
                    .arg("--ignore-unmatch")
                    .operands([dir]),
            )
            .await?;
            let folder = self.work.join(dir);
            for (path, text) in files {
                let file = folder.join(path);
                if let Some(parent) = file.parent() {
                    tokio::fs::create_dir_all(parent).await?;
                }
                tokio::fs::write(file, text).await?;
            }
            self.git(&self.work, Self::program("add").operands([dir]))
                .await?;
            self.index(dir).await?;
            match self.commit_and_push(message).await {
                Err(GitError::Failed { args, stderr })
                    if args.starts_with("push") && attempt < 3 =>
                {
                    tracing::info!(%stderr, "gitops push lost a race; redoing on the new head");
                    attempt += 1;
                }
                Ok(sha) => {
                    if let Ok(mut committed) = self.committed.lock() {
                        committed.insert(dir.to_owned(), (files.clone(), sha.clone()));
                    }
                    return Ok(sha);
                }
                other => return other,
            }
        }
    }

    /// Removes an addon's folder and commits that; returns the new head.
    pub async fn remove_addon(&self, dir: &str, message: &str) -> Result<String, GitError> {
        if let Ok(mut committed) = self.committed.lock() {
            committed.remove(dir);
        }
        let _serial = self.lock.lock().await;
        let mut attempt = 0;
        loop {
            self.refresh().await?;
            if !self.work.join(dir).exists() {
                return self.head().await;
            }
            self.git(
                &self.work,
                Self::program("rm").arg("-r").arg("--quiet").operands([dir]),
            )
            .await?;
            self.index(dir).await?;
            match self.commit_and_push(message).await {
                Err(GitError::Failed { args, .. }) if args.starts_with("push") && attempt < 3 => {
                    attempt += 1;
                }
                other => return other,
            }
        }
    }

    async fn commit_and_push(&self, message: &str) -> Result<String, GitError> {
        let unchanged = self
            .git(
                &self.work,
                Self::program("diff").arg("--cached").arg("--quiet"),
            )
            .await
            .is_ok();
        if unchanged {
            return self.head().await;
        }
        self.git(
            &self.work,
            Self::program("commit")
                .arg("--quiet")
                .option("--message", message),
        )
        .await?;
        let refspec = format!("HEAD:refs/heads/{}", self.branch);
        self.git(
            &self.work,
            Self::program("push")
                .arg("--quiet")
                .after("--end-of-options", ["origin", refspec.as_str()]),
        )
        .await?;
        self.head().await
    }

    async fn head(&self) -> Result<String, GitError> {
        self.git(&self.work, Self::program("rev-parse").arg("HEAD"))
            .await
    }
}
