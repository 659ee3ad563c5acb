//! Where the upstream binaries are. `tools/build-k8s-bins.sh` builds them into a cache keyed by
//! the versions in `tools/versions.env`; this module reads the same file at compile time so the
//! two never disagree. Environment variables override each location.

use std::path::{Path, PathBuf};

use crate::Error;

const VERSIONS: &str = include_str!("../../../tools/versions.env");

/// Paths of every binary the kit runs.
#[derive(Debug, Clone)]
pub struct Binaries {
    pub etcd: PathBuf,
    pub kube_apiserver: PathBuf,
    pub kube_controller_manager: PathBuf,
    pub kube_scheduler: PathBuf,
    pub kubectl: PathBuf,
    pub kwok: PathBuf,
    pub kwok_stages: PathBuf,
    pub helm: PathBuf,
}

/// The pinned version of `key` (e.g. `K8S_VERSION`) from `tools/versions.env`.
pub fn pinned_version(key: &str) -> Option<&'static str> {
    VERSIONS.lines().find_map(|line| {
        let (k, v) = line.split_once('=')?;
        (k.trim() == key).then(|| v.trim())
    })
}

/// The cache root: `$KUBENEST_CACHE`, else `$XDG_CACHE_HOME/kubenest` or `~/.cache/kubenest`.
pub(crate) fn cache_root() -> PathBuf {
    if let Some(dir) = std::env::var_os("KUBENEST_CACHE") {
        return dir.into();
    }
    let base = std::env::var_os("XDG_CACHE_HOME")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            std::env::var_os("HOME")
                .map(PathBuf::from)
                .unwrap_or_else(|| "/tmp".into())
                .join(".cache")
        });
    base.join("kubenest")
}

fn from_env_or(var: &str, default: PathBuf) -> PathBuf {
    std::env::var_os(var).map(PathBuf::from).unwrap_or(default)
}

impl Binaries {
    /// Finds every binary, or says which one is missing and how to build it.
    pub fn locate() -> Result<Self, Error> {
        let cache = cache_root();
        let version = |key| pinned_version(key).unwrap_or("unknown");
        let k8s = from_env_or(
            "KUBENEST_K8S_BIN",
            cache.join("k8s").join(version("K8S_VERSION")),
        );
        let kwok_dir = cache.join("kwok").join(version("KWOK_VERSION"));
        let vendored_etcd = match etcd_bin_vendored_linux_amd64::etcd_bin_path() {
            Ok(path) => path.to_path_buf(),
            Err(never) => match never {},
        };
        let bins = Self {
            etcd: from_env_or("KUBENEST_ETCD_BIN", vendored_etcd),
            kube_apiserver: k8s.join("kube-apiserver"),
            kube_controller_manager: k8s.join("kube-controller-manager"),
            kube_scheduler: k8s.join("kube-scheduler"),
            kubectl: k8s.join("kubectl"),
            kwok: from_env_or("KUBENEST_KWOK_BIN", kwok_dir.join("kwok")),
            kwok_stages: from_env_or("KUBENEST_KWOK_STAGES", kwok_dir.join("stages-2.yaml")),
            helm: from_env_or(
                "KUBENEST_HELM_BIN",
                cache
                    .join("helm")
                    .join(version("HELM_VERSION"))
                    .join("helm"),
            ),
        };
        for path in [
            &bins.etcd,
            &bins.kube_apiserver,
            &bins.kube_controller_manager,
            &bins.kube_scheduler,
            &bins.kubectl,
            &bins.kwok,
            &bins.kwok_stages,
            &bins.helm,
        ] {
            ensure_exists(path)?;
        }
        Ok(bins)
    }
}

fn ensure_exists(path: &Path) -> Result<(), Error> {
    if path.exists() {
        Ok(())
    } else {
        Err(Error::MissingBinary(path.to_owned()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_are_pinned() {
        assert!(pinned_version("K8S_VERSION").is_some_and(|v| v.starts_with("v1.35.")));
        assert!(pinned_version("KWOK_VERSION").is_some());
        assert!(pinned_version("HELM_VERSION").is_some());
        assert_eq!(pinned_version("NOPE"), None);
    }
}
