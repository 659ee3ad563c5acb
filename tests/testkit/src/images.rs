//! Where kubenest's images are. `tools/build-images.sh` builds them (buildah, no Docker daemon)
//! into OCI archives under `$KUBENEST_CACHE/images/`; this module asks the same script where
//! (`--print-env`), so the two never disagree, and can have it build them first. A real node
//! loads an archive with `Cluster::import_image`; containerd then knows the image by the name
//! in [`ImageArchive::reference`] (`localhost/kubenest/<name>:<version>`), which is what a pod
//! spec names (with `imagePullPolicy: Never` or `IfNotPresent`: no registry holds them).
//!
//! ```no_run
//! # async fn demo() -> Result<(), kubenest_testkit::Error> {
//! let images = kubenest_testkit::Images::build(&["demo", "postgres"]).await?;
//! let demo = images.get("demo")?;
//! println!("{} is in {}", demo.reference, demo.path.display());
//! # Ok(()) }
//! ```

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use crate::Error;

/// The script that builds the images and knows where they are.
const SCRIPT: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../tools/build-images.sh");

/// Every image the script builds (the base they share is not archived).
pub const IMAGE_NAMES: [&str; 9] = [
    "apiserver",
    "controllers",
    "hub",
    "agent",
    "demo",
    "postgres",
    "redis",
    "kafka",
    "builder",
];

/// One image's archive and the name it carries.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ImageArchive {
    /// The short name (`demo`).
    pub name: String,
    /// The image reference inside the archive, as containerd lists it after an import and as a
    /// pod spec names it: `localhost/kubenest/demo:0.1.0`.
    pub reference: String,
    /// The OCI archive (`…/images/demo-0.1.0.oci.tar`).
    pub path: PathBuf,
}

/// The images of this checkout: a path and a reference per image name.
#[derive(Debug, Clone)]
pub struct Images {
    /// The workspace version every image is tagged with.
    pub version: String,
    /// The directory of the archives.
    pub dir: PathBuf,
    archives: BTreeMap<String, ImageArchive>,
}

impl Images {
    /// Where every image's archive is (built or not: see [`Images::get`]).
    pub fn locate() -> Result<Self, Error> {
        let output = std::process::Command::new("bash")
            .arg(SCRIPT)
            .arg("--print-env")
            .output()
            .map_err(|e| Error::io("run tools/build-images.sh --print-env", e))?;
        if !output.status.success() {
            return Err(Error::ImageBuild(format!(
                "tools/build-images.sh --print-env: {}",
                String::from_utf8_lossy(&output.stderr).trim()
            )));
        }
        parse_env(&String::from_utf8_lossy(&output.stdout))
    }

    /// Builds `names` (every image when empty) with `tools/build-images.sh` — cargo builds the
    /// binaries first; an image whose inputs are unchanged is not rebuilt — and locates them.
    /// Blocks the calling task for as long as the builds take (seconds when nothing changed).
    pub async fn build(names: &[&str]) -> Result<Self, Error> {
        if let Some(unknown) = names.iter().find(|n| !IMAGE_NAMES.contains(n)) {
            return Err(Error::ImageBuild(format!(
                "no image named {unknown} (images: {})",
                IMAGE_NAMES.join(", ")
            )));
        }
        let mut command = tokio::process::Command::new("bash");
        command.arg(SCRIPT).args(names);
        if std::env::var_os("CARGO_TARGET_DIR").is_none()
            && let Some(target) = own_target_dir()
        {
            // The binaries this test was built with, not a second build somewhere else.
            command.env("CARGO_TARGET_DIR", target);
        }
        let output = command
            .output()
            .await
            .map_err(|e| Error::io("run tools/build-images.sh", e))?;
        if !output.status.success() {
            let log = String::from_utf8_lossy(&output.stderr);
            let tail: Vec<&str> = log.lines().rev().take(40).collect();
            return Err(Error::ImageBuild(format!(
                "tools/build-images.sh {} failed ({}):\n{}",
                names.join(" "),
                output.status,
                tail.into_iter().rev().collect::<Vec<_>>().join("\n")
            )));
        }
        let images = Self::locate()?;
        for name in names {
            images.get(name)?;
        }
        Ok(images)
    }

    /// The archive of image `name`, which must exist (built earlier by [`Images::build`],
    /// `make images` or `tools/build-images.sh`).
    pub fn get(&self, name: &str) -> Result<&ImageArchive, Error> {
        let image = self.archives.get(name).ok_or_else(|| {
            Error::ImageBuild(format!(
                "no image named {name} (images: {})",
                IMAGE_NAMES.join(", ")
            ))
        })?;
        if image.path.exists() {
            Ok(image)
        } else {
            Err(Error::MissingImage(image.path.clone()))
        }
    }

    /// The archive file of image `name` (see [`Images::get`]).
    pub fn archive(&self, name: &str) -> Result<&Path, Error> {
        Ok(&self.get(name)?.path)
    }

    /// Every image, built or not.
    pub fn all(&self) -> impl Iterator<Item = &ImageArchive> {
        self.archives.values()
    }
}

/// The target directory of the running test binary (`<target>/debug/deps/<test>`).
fn own_target_dir() -> Option<PathBuf> {
    let exe = std::env::current_exe().ok()?;
    let deps = exe.parent()?;
    (deps.file_name()? == "deps").then_some(())?;
    Some(deps.parent()?.parent()?.to_owned())
}

/// The images named in `--print-env` output (`KUBENEST_IMAGE_DEMO=…`,
/// `KUBENEST_IMAGE_DEMO_ARCHIVE=…`).
fn parse_env(text: &str) -> Result<Images, Error> {
    let vars: BTreeMap<&str, &str> = text
        .lines()
        .filter_map(|line| line.split_once('='))
        .collect();
    let var = |key: &str| {
        vars.get(key).map(|v| v.to_string()).ok_or_else(|| {
            Error::ImageBuild(format!("tools/build-images.sh --print-env names no {key}"))
        })
    };
    let version = var("KUBENEST_IMAGES_VERSION")?;
    let dir = var("KUBENEST_IMAGES_DIR")?.into();
    let mut archives = BTreeMap::new();
    for name in IMAGE_NAMES {
        let key = format!("KUBENEST_IMAGE_{}", name.to_ascii_uppercase());
        archives.insert(
            name.to_owned(),
            ImageArchive {
                name: name.to_owned(),
                reference: var(&key)?,
                path: var(&format!("{key}_ARCHIVE"))?.into(),
            },
        );
    }
    Ok(Images {
        version,
        dir,
        archives,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_image_has_a_reference_and_an_archive_under_the_cache() {
        let images = Images::locate().unwrap();
        assert_eq!(images.version, env!("CARGO_PKG_VERSION"));
        for name in IMAGE_NAMES {
            let image = &images.archives[name];
            assert_eq!(
                image.reference,
                format!("localhost/kubenest/{name}:{}", env!("CARGO_PKG_VERSION"))
            );
            assert!(image.path.starts_with(&images.dir));
            assert!(image.path.to_string_lossy().ends_with(".oci.tar"));
        }
    }

    #[test]
    fn a_missing_variable_is_named() {
        let err = parse_env("KUBENEST_IMAGES_DIR=/x\n").unwrap_err();
        assert!(err.to_string().contains("KUBENEST_IMAGES_VERSION"), "{err}");
    }
}
