//! Flux — its source-controller and kustomize-controller, built by `tools/build-flux.sh` — as
//! processes against a cluster of the kit: a real GitOps engine applying a Git repository (for
//! instance one of [`crate::GitServer`]). Both act as one Kubernetes user (impersonated by the
//! cluster's admin, with its powers), as a Flux installation's service account would.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use crate::bins::{cache_root, pinned_version};
use crate::{Binaries, Error, ManagedProcess, free_port};

/// The two controllers, running until dropped; their logs are in [`Flux::logs`].
#[derive(Debug)]
pub struct Flux {
    processes: Vec<ManagedProcess>,
    dir: tempfile::TempDir,
}

/// The namespace Flux runs in (its events, and where the tests put their sources).
pub const NAMESPACE: &str = "flux-system";

fn kubectl(kubeconfig: &Path, args: &[&str]) -> Result<(), Error> {
    let bins = Binaries::locate()?;
    let out = Command::new(&bins.kubectl)
        .arg(format!("--kubeconfig={}", kubeconfig.display()))
        .args(args)
        .output()
        .map_err(|e| Error::io("run kubectl", e))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(Error::Process(format!(
            "kubectl {}: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr)
        )))
    }
}

impl Flux {
    /// Where `tools/build-flux.sh` put the binaries and CRDs.
    pub fn dir() -> PathBuf {
        cache_root()
            .join("flux")
            .join(pinned_version("FLUX_VERSION").unwrap_or("unknown"))
    }

    /// Installs Flux's CRDs and namespace with the admin `kubeconfig`, then starts both
    /// controllers as Kubernetes user `user`; returns once both report healthy.
    pub async fn start(kubeconfig: &Path, user: &str) -> Result<Self, Error> {
        let home = Self::dir();
        for binary in ["source-controller", "kustomize-controller"] {
            if !home.join(binary).exists() {
                return Err(Error::MissingBinary(home.join(binary)));
            }
        }
        let crds = home.join("crds");
        kubectl(
            kubeconfig,
            &[
                "apply",
                "--server-side",
                "--force-conflicts",
                "-f",
                &crds.to_string_lossy(),
            ],
        )?;
        kubectl(
            kubeconfig,
            &[
                "wait",
                "--for=condition=Established",
                "--timeout=60s",
                "crd/gitrepositories.source.toolkit.fluxcd.io",
                "crd/kustomizations.kustomize.toolkit.fluxcd.io",
            ],
        )?;
        let namespace = format!(
            "{{\"apiVersion\":\"v1\",\"kind\":\"Namespace\",\"metadata\":{{\"name\":\"{NAMESPACE}\"}}}}"
        );
        let dir = tempfile::tempdir().map_err(|e| Error::io("flux folder", e))?;
        let manifest = dir.path().join("namespace.json");
        std::fs::write(&manifest, namespace).map_err(|e| Error::io("write namespace", e))?;
        kubectl(
            kubeconfig,
            &["apply", "--server-side", "-f", &manifest.to_string_lossy()],
        )?;

        let mut config = kube::config::Kubeconfig::read_from(kubeconfig)
            .map_err(|e| Error::Kubeconfig(e.to_string()))?;
        for entry in &mut config.auth_infos {
            if let Some(auth) = entry.auth_info.as_mut() {
                auth.impersonate = Some(user.to_owned());
                auth.impersonate_groups = Some(vec!["system:masters".to_owned()]);
            }
        }
        let own_kubeconfig = dir.path().join("kubeconfig");
        std::fs::write(
            &own_kubeconfig,
            serde_json::to_string(&config).map_err(|e| Error::Kubeconfig(e.to_string()))?,
        )
        .map_err(|e| Error::io("write flux kubeconfig", e))?;

        let storage = free_port()?;
        let mut processes = Vec::new();
        let mut health = Vec::new();
        for name in ["source-controller", "kustomize-controller"] {
            let (metrics, probe) = (free_port()?, free_port()?);
            let mut command = Command::new(home.join(name));
            command
                .env("KUBECONFIG", &own_kubeconfig)
                .env("RUNTIME_NAMESPACE", NAMESPACE)
                .arg(format!("--metrics-addr=127.0.0.1:{metrics}"))
                .arg(format!("--health-addr=127.0.0.1:{probe}"))
                .arg("--enable-leader-election=false")
                .arg("--log-level=info");
            if name == "source-controller" {
                let path = dir.path().join("storage");
                std::fs::create_dir_all(&path).map_err(|e| Error::io("flux storage", e))?;
                command
                    .arg(format!("--storage-path={}", path.display()))
                    .arg(format!("--storage-addr=127.0.0.1:{storage}"))
                    .arg(format!("--storage-adv-addr=127.0.0.1:{storage}"));
            }
            let log = dir.path().join(format!("{name}.log"));
            processes.push(ManagedProcess::spawn(
                &format!("flux/{name}"),
                command,
                log,
            )?);
            health.push(format!("http://127.0.0.1:{probe}/readyz"));
        }
        let mut flux = Self { processes, dir };
        let http = reqwest::Client::new();
        for url in &health {
            let mut ready = false;
            for _ in 0..120 {
                for process in &mut flux.processes {
                    process.check_running()?;
                }
                if http
                    .get(url)
                    .send()
                    .await
                    .is_ok_and(|r| r.status().is_success())
                {
                    ready = true;
                    break;
                }
                tokio::time::sleep(Duration::from_millis(250)).await;
            }
            if !ready {
                return Err(Error::Timeout {
                    what: format!("Flux ready at {url}"),
                    secs: 30,
                    last_observation: flux.logs(20),
                });
            }
        }
        Ok(flux)
    }

    /// The last `lines` of each controller's log.
    pub fn logs(&self, lines: usize) -> String {
        self.processes
            .iter()
            .map(|p| {
                format!(
                    "--- {}\n{}",
                    p.name(),
                    crate::process::tail(p.log_path(), lines)
                )
            })
            .collect::<Vec<_>>()
            .join("\n")
    }

    /// The folder of the controllers' logs and storage.
    pub fn work_dir(&self) -> &Path {
        self.dir.path()
    }
}
