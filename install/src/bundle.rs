//! The `bundle` stage: the platform bundle's files each machine needs for its roles, under
//! [`REMOTE_DIR`] on the machine, each checked against the bundle's manifest. Idempotent: a
//! file already there with its checksum is kept, so a second run copies nothing and a run
//! after a cut copy sends only what is missing or different.
//!
//! The bundle is `make bundle`'s archive (tools/bundle.sh), unpacked where the install runs;
//! its manifest is read as a door (a path that climbs out or names another folder is refused)
//! before any of its paths reaches scp.

use std::collections::BTreeMap;
use std::path::{Component, Path, PathBuf};
use std::time::Duration;

use kubenest_runtime::exec::Program;
use serde::Deserialize;

use crate::files::{self, Pushed, Remote, Wanted};
use crate::machines::{MachinesFile, Role};
use crate::ssh::Ssh;
use crate::stage::{FailureCode, Stage, StageFailure};

/// Where a machine keeps the bundle's files.
pub const REMOTE_DIR: &str = "/var/lib/kubenest/bundle";

/// The folders of a bundle.
const FOLDERS: [&str; 4] = ["bin", "debs", "images", "charts"];

/// The programs only a control plane machine runs (and the charts it installs).
const CONTROL_PLANE_ONLY: [&str; 8] = [
    "bin/kube-apiserver",
    "bin/kube-controller-manager",
    "bin/kube-scheduler",
    "bin/etcd",
    "bin/helm",
    "bin/coredns",
    "bin/local-path-provisioner",
    "charts/",
];

/// The stage's deadline for one machine (copying every image takes the longest).
pub const DEADLINE: Duration = Duration::from_secs(600);

/// Makes the folders, then lists what is there with its checksums.
const LIST: &str = "sh -c 'mkdir -p /var/lib/kubenest/bundle/bin /var/lib/kubenest/bundle/debs \
     /var/lib/kubenest/bundle/images /var/lib/kubenest/bundle/charts && \
     cd /var/lib/kubenest/bundle && find bin debs images charts -type f -exec sha256sum {} +'";

/// The bundle's `manifest.json`.
#[derive(Debug, Clone, Deserialize)]
pub struct Manifest {
    pub name: String,
    pub version: String,
    pub arch: String,
    pub files: Vec<FileEntry>,
}

/// One file of the bundle.
#[derive(Debug, Clone, Deserialize)]
pub struct FileEntry {
    /// `folder/name`: `bin`, `debs`, `images` or `charts`.
    pub path: String,
    pub kind: String,
    pub sha256: String,
    pub size: u64,
}

/// An unpacked bundle.
#[derive(Debug, Clone)]
pub struct Bundle {
    top: PathBuf,
    pub manifest: Manifest,
}

fn configuration(message: impl Into<String>) -> StageFailure {
    StageFailure::new(Stage::Bundle, FailureCode::Configuration, message)
}

impl Bundle {
    /// Unpacks `archive` (a `.tar.zst`) into `into` and opens it.
    pub async fn unpack(archive: &Path, into: &Path) -> Result<Self, StageFailure> {
        let output = Program::new("tar")
            .arg("--zstd")
            .arg("-x")
            .path_option("--file", archive)
            .path_option("--directory", into)
            .timeout(Duration::from_secs(300))
            .run()
            .await
            .map_err(|e| configuration(e.to_string()))?;
        if !output.success {
            return Err(configuration(format!(
                "{} could not be unpacked: {}",
                archive.display(),
                output.summary()
            ))
            .with_log(&output.stderr));
        }
        let tops: Vec<PathBuf> = std::fs::read_dir(into)
            .map_err(|e| configuration(e.to_string()))?
            .flatten()
            .map(|e| e.path())
            .filter(|p| p.join("manifest.json").is_file())
            .collect();
        match tops.as_slice() {
            [top] => Self::open(top),
            _ => Err(configuration(format!(
                "{} holds no single folder with a manifest.json",
                archive.display()
            ))),
        }
    }

    /// Opens an unpacked bundle at `top`, checking its manifest's paths.
    pub fn open(top: &Path) -> Result<Self, StageFailure> {
        let top = top
            .canonicalize()
            .map_err(|e| configuration(format!("{}: {e}", top.display())))?;
        let text = std::fs::read(top.join("manifest.json"))
            .map_err(|e| configuration(format!("{}: manifest.json: {e}", top.display())))?;
        let manifest: Manifest = serde_json::from_slice(&text)
            .map_err(|e| configuration(format!("manifest.json: {e}")))?;
        if manifest.name != "kubenest-bundle" {
            return Err(configuration("manifest.json names no kubenest bundle"));
        }
        for entry in &manifest.files {
            check_path(&entry.path)?;
            if entry.sha256.len() != 64 || !entry.sha256.bytes().all(|b| b.is_ascii_hexdigit()) {
                return Err(configuration(format!(
                    "manifest.json: {}: sha256 is 64 hex digits",
                    entry.path
                )));
            }
        }
        Ok(Self { top, manifest })
    }

    /// The files a machine with `roles` needs.
    pub fn files_for(&self, roles: &[Role]) -> Vec<&FileEntry> {
        let control_plane = roles.contains(&Role::ControlPlane);
        self.manifest
            .files
            .iter()
            .filter(|f| {
                control_plane
                    || !CONTROL_PLANE_ONLY.iter().any(|only| {
                        f.path == *only || (only.ends_with('/') && f.path.starts_with(only))
                    })
            })
            .collect()
    }

    fn local(&self, entry: &FileEntry) -> PathBuf {
        self.top.join(&entry.path)
    }
}

/// A manifest path is `folder/name`: a known folder, one plain file name.
fn check_path(path: &str) -> Result<(), StageFailure> {
    let parts: Vec<Component<'_>> = Path::new(path).components().collect();
    let ok = matches!(
        parts.as_slice(),
        [Component::Normal(folder), Component::Normal(name)]
            if FOLDERS.iter().any(|f| folder.to_str() == Some(f))
                && !name.to_string_lossy().starts_with('-')
                && !name.to_string_lossy().contains(':')
    );
    if ok {
        Ok(())
    } else {
        Err(configuration(format!(
            "manifest.json: {path:?} is not a file of one of the bundle's folders"
        )))
    }
}

/// The bundle's folder on a machine.
const REMOTE: Remote = Remote {
    folders: &[
        ("bin", "/var/lib/kubenest/bundle/bin"),
        ("debs", "/var/lib/kubenest/bundle/debs"),
        ("images", "/var/lib/kubenest/bundle/images"),
        ("charts", "/var/lib/kubenest/bundle/charts"),
    ],
    list: LIST,
};

/// Brings one machine's files up to the bundle.
async fn push_one(bundle: &Bundle, ssh: &Ssh, roles: &[Role]) -> Result<Pushed, StageFailure> {
    let wanted: Vec<Wanted> = bundle
        .files_for(roles)
        .into_iter()
        .map(|f| Wanted {
            path: f.path.clone(),
            local: bundle.local(f),
            sha256: f.sha256.clone(),
            size: f.size,
        })
        .collect();
    files::sync(Stage::Bundle, ssh, &REMOTE, &wanted, DEADLINE).await
}

/// Runs the bundle stage on every machine at once: what each copied and kept, by name.
pub async fn push(
    bundle: &Bundle,
    file: &MachinesFile,
    known_hosts: &Path,
) -> Result<BTreeMap<String, Pushed>, StageFailure> {
    let pushes = file.machines.iter().map(|machine| async move {
        let ssh = Ssh::to(machine, known_hosts);
        (
            machine.name.clone(),
            push_one(bundle, &ssh, &machine.roles).await,
        )
    });
    let mut done = BTreeMap::new();
    for (name, result) in futures::future::join_all(pushes).await {
        done.insert(name, result?);
    }
    Ok(done)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_manifest_path_is_a_file_of_a_known_folder() {
        for good in [
            "bin/kubelet",
            "debs/conntrack_1%3a1.4.7-1+b2_amd64.deb",
            "charts/kubenest-0.1.0.tgz",
        ] {
            assert!(check_path(good).is_ok(), "{good}");
        }
        for bad in [
            "../bin/kubelet",
            "bin/../../etc/passwd",
            "/bin/kubelet",
            "etc/passwd",
            "bin",
            "bin/a/b",
            "bin/-oProxyCommand=x",
            "bin/host:file",
        ] {
            assert!(check_path(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn a_worker_gets_no_control_plane_program_nor_chart() {
        let entry = |path: &str| FileEntry {
            path: path.into(),
            kind: "binary".into(),
            sha256: "0".repeat(64),
            size: 1,
        };
        let bundle = Bundle {
            top: PathBuf::from("/b"),
            manifest: Manifest {
                name: "kubenest-bundle".into(),
                version: "0.1.0".into(),
                arch: "amd64".into(),
                files: [
                    "bin/kubelet",
                    "bin/etcd",
                    "charts/kubenest-0.1.0.tgz",
                    "images/agent.oci.tar",
                ]
                .into_iter()
                .map(entry)
                .collect(),
            },
        };
        let paths = |roles: &[Role]| -> Vec<String> {
            bundle
                .files_for(roles)
                .iter()
                .map(|f| f.path.clone())
                .collect()
        };
        assert_eq!(
            paths(&[Role::Worker]),
            ["bin/kubelet", "images/agent.oci.tar"]
        );
        assert_eq!(paths(&[Role::ControlPlane]).len(), 4);
    }
}
