//! The command-line tools tests drive charts with: helm with a throwaway home, and kubectl's
//! server-side apply (or its dry run) of a manifest against a cluster of the kit.

use std::io::Write as _;
use std::process::{Command, Output, Stdio};

use crate::{Binaries, Cluster, Error};

/// Runs the kit's helm with `args`, its cache, config and data in a fresh temporary directory.
pub fn helm(args: &[&str]) -> Result<Output, Error> {
    let bins = Binaries::locate()?;
    let home = tempfile::tempdir().map_err(|e| Error::io("helm home", e))?;
    Command::new(bins.helm)
        .args(args)
        .env("HELM_CACHE_HOME", home.path().join("cache"))
        .env("HELM_CONFIG_HOME", home.path().join("config"))
        .env("HELM_DATA_HOME", home.path().join("data"))
        .output()
        .map_err(|e| Error::io("run helm", e))
}

/// The objects of a multi-document manifest (`helm template`'s output), empty documents left
/// out, for tests that assert what a chart renders field by field.
pub fn manifest_objects(manifest: &str) -> Result<Vec<serde_json::Value>, Error> {
    use serde::Deserialize as _;
    let mut objects = Vec::new();
    for document in serde_yaml::Deserializer::from_str(manifest) {
        let object = serde_json::Value::deserialize(document)
            .map_err(|e| Error::Process(format!("a manifest document is no object: {e}")))?;
        if !object.is_null() {
            objects.push(object);
        }
    }
    Ok(objects)
}

/// The objects `helm template RELEASE CHART ARGS...` renders, or the error naming helm's own
/// lines when it refuses (a value the chart's schema refuses, a template that fails).
pub fn template(
    release: &str,
    chart: &str,
    args: &[&str],
) -> Result<Vec<serde_json::Value>, Error> {
    let mut all = vec!["template", release, chart];
    all.extend(args);
    let out = helm(&all)?;
    if !out.status.success() {
        return Err(Error::Process(format!(
            "helm template {release}: {}",
            String::from_utf8_lossy(&out.stderr)
        )));
    }
    manifest_objects(&String::from_utf8_lossy(&out.stdout))
}

/// A temporary values file holding `yaml`, for `--values`.
pub fn values_file(yaml: &str) -> Result<tempfile::NamedTempFile, Error> {
    let file = tempfile::NamedTempFile::new().map_err(|e| Error::io("values file", e))?;
    std::fs::write(file.path(), yaml).map_err(|e| Error::io("values file", e))?;
    Ok(file)
}

/// The object of `kind` named `name` among `objects`, if any.
pub fn find_object<'a>(
    objects: &'a [serde_json::Value],
    kind: &str,
    name: &str,
) -> Option<&'a serde_json::Value> {
    objects
        .iter()
        .find(|o| o["kind"] == kind && o["metadata"]["name"] == name)
}

/// `kubectl apply --server-side --dry-run=server` of `manifest` into `namespace` of `cluster`.
pub fn server_dry_run(cluster: &Cluster, namespace: &str, manifest: &str) -> Result<Output, Error> {
    kubectl_apply(cluster, namespace, manifest, &["--dry-run=server"])
}

/// `kubectl apply --server-side` of `manifest` into `namespace` of `cluster`, as its admin.
pub fn server_apply(cluster: &Cluster, namespace: &str, manifest: &str) -> Result<Output, Error> {
    kubectl_apply(cluster, namespace, manifest, &[])
}

fn kubectl_apply(
    cluster: &Cluster,
    namespace: &str,
    manifest: &str,
    extra: &[&str],
) -> Result<Output, Error> {
    let bins = Binaries::locate()?;
    let mut apply = Command::new(&bins.kubectl)
        .arg(format!(
            "--kubeconfig={}",
            cluster.kubeconfig_path().display()
        ))
        .args([
            "apply",
            "--server-side",
            "--namespace",
            namespace,
            "-f",
            "-",
        ])
        .args(extra)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| Error::io("run kubectl", e))?;
    if let Some(mut stdin) = apply.stdin.take() {
        stdin
            .write_all(manifest.as_bytes())
            .map_err(|e| Error::io("write the manifest to kubectl", e))?;
    }
    apply
        .wait_with_output()
        .map_err(|e| Error::io("wait for kubectl", e))
}
