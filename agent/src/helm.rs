//! Rendering charts with helm (`helm template`): the agent applies the result itself, so there is
//! no Tiller-like state on the cluster and pruning works the same as for workloads.

use std::path::PathBuf;

use kubenest_contracts as wire;
use serde_json::Value;
use tokio::process::Command;

/// Why a chart could not be rendered.
#[derive(Debug, thiserror::Error)]
pub enum HelmError {
    #[error("chart {name} {version} is not in the agent's catalog ({dir})")]
    NotInCatalog {
        name: String,
        version: String,
        dir: String,
    },
    #[error("chart {name} in the catalog is version {found}, not the pinned {version}")]
    VersionMismatch {
        name: String,
        version: String,
        found: String,
    },
    #[error("helm template failed: {0}")]
    Render(String),
    #[error("helm output is not YAML: {0}")]
    Output(String),
    #[error("running helm: {0}")]
    Io(#[from] std::io::Error),
}

/// A chart pull's registry credentials: the `.dockerconfigjson` of the project's pull Secret
/// (helm reads the same format from `--registry-config`).
pub type RegistryAuth = Option<Vec<u8>>;

/// The helm binary and the local chart catalog.
#[derive(Debug, Clone)]
pub struct Helm {
    pub bin: PathBuf,
    /// Charts that `repository` values without a scheme refer to (e.g. `charts/addons`).
    pub catalog: PathBuf,
    /// PEM file of a private CA that chart repositories and registries may be signed by
    /// (`--ca-file`; the agent's `--private-ca-file`, the one the builds trust too).
    pub ca_file: Option<PathBuf>,
    /// Renders by (release, namespace, chart, values): a pinned chart renders the same every
    /// time, so a reconcile at rest spawns no helm.
    pub renders: Renders,
}

/// The render cache (bounded: cleared when full).
#[derive(Debug, Clone, Default)]
pub struct Renders(std::sync::Arc<std::sync::Mutex<std::collections::HashMap<String, Vec<Value>>>>);

/// Renders kept before the cache starts over.
const MAX_RENDERS: usize = 4096;

impl Renders {
    fn get(&self, key: &str) -> Option<Vec<Value>> {
        self.0.lock().ok()?.get(key).cloned()
    }

    fn put(&self, key: String, objects: Vec<Value>) {
        if let Ok(mut renders) = self.0.lock() {
            if renders.len() >= MAX_RENDERS {
                renders.clear();
            }
            renders.insert(key, objects);
        }
    }
}

impl Helm {
    /// helm at `bin` rendering from `catalog`.
    pub fn new(bin: PathBuf, catalog: PathBuf) -> Self {
        Self {
            bin,
            catalog,
            ca_file: None,
            renders: Renders::default(),
        }
    }

    /// The same, trusting the CA of PEM file `ca_file` for chart pulls.
    pub fn with_ca_file(self, ca_file: Option<PathBuf>) -> Self {
        Self { ca_file, ..self }
    }
}

/// Where a chart comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Source {
    /// A directory of the catalog.
    Local(PathBuf),
    /// A chart repository or OCI registry, pinned by version.
    Remote { repository: String },
}

impl Helm {
    /// Where `chart` is: catalog paths (`charts/addons`, `charts/addons/postgres`) are looked up
    /// in the catalog by the chart's name; URLs are passed to helm.
    pub fn source(&self, chart: &wire::ChartRef) -> Result<Source, HelmError> {
        let repository = chart.repository.as_str();
        if repository.contains("://") {
            return Ok(Source::Remote {
                repository: repository.to_owned(),
            });
        }
        let dir = self.catalog.join(&chart.name);
        let manifest = dir.join("Chart.yaml");
        let text = std::fs::read_to_string(&manifest).map_err(|_| HelmError::NotInCatalog {
            name: chart.name.clone(),
            version: chart.version.clone(),
            dir: self.catalog.display().to_string(),
        })?;
        let found = chart_version(&text).unwrap_or_default();
        if found.trim_start_matches('v') != chart.version.trim_start_matches('v') {
            return Err(HelmError::VersionMismatch {
                name: chart.name.clone(),
                version: chart.version.clone(),
                found,
            });
        }
        Ok(Source::Local(dir))
    }

    /// Renders `chart` as release `release` in `namespace` with `values`; returns the objects.
    /// `auth` (awaited only when helm must run: a cached render needs no credentials) gives the
    /// registry credentials of an `oci://` chart.
    pub async fn template(
        &self,
        release: &str,
        namespace: &str,
        chart: &wire::ChartRef,
        values: &Value,
        auth: impl Future<Output = RegistryAuth>,
    ) -> Result<Vec<Value>, HelmError> {
        // The namespace is part of the key: one project's render (pulled with its credentials)
        // never serves another's.
        let key = kubenest_contracts::checksum_of(&serde_json::json!({
            "release": release, "namespace": namespace, "chart": chart, "values": values,
        }));
        if let Some(objects) = self.renders.get(&key) {
            return Ok(objects);
        }
        let auth = auth.await;
        let objects = self
            .render(release, namespace, chart, values, auth.as_deref())
            .await?;
        self.renders.put(key, objects.clone());
        Ok(objects)
    }

    async fn render(
        &self,
        release: &str,
        namespace: &str,
        chart: &wire::ChartRef,
        values: &Value,
        auth: Option<&[u8]>,
    ) -> Result<Vec<Value>, HelmError> {
        let source = self.source(chart)?;
        let dir = tempfile::tempdir()?;
        let values_file = dir.path().join("values.yaml");
        let yaml = serde_yaml::to_string(values).map_err(|e| HelmError::Output(e.to_string()))?;
        tokio::fs::write(&values_file, yaml).await?;
        let mut command = Command::new(&self.bin);
        command
            .arg("template")
            .arg(release)
            .args(["--namespace", namespace])
            .arg("--values")
            .arg(&values_file)
            .env("HELM_CACHE_HOME", dir.path().join("cache"))
            .env("HELM_CONFIG_HOME", dir.path().join("config"))
            .env("HELM_DATA_HOME", dir.path().join("data"));
        if let Some(ca_file) = &self.ca_file {
            command.arg("--ca-file").arg(ca_file);
        }
        match &source {
            Source::Local(path) => {
                command.arg(path);
            }
            Source::Remote { repository } if repository.starts_with("oci://") => {
                // The credentials live in the render's own folder, removed with it.
                let registry_config = dir.path().join("registry.json");
                tokio::fs::write(&registry_config, auth.unwrap_or(b"{}")).await?;
                command
                    .arg("--registry-config")
                    .arg(&registry_config)
                    .arg(format!(
                        "{}/{}",
                        repository.trim_end_matches('/'),
                        chart.name
                    ))
                    .args(["--version", &chart.version]);
            }
            Source::Remote { repository } => {
                command
                    .arg(&chart.name)
                    .args(["--repo", repository, "--version", &chart.version]);
            }
        }
        let output = command.output().await?;
        if !output.status.success() {
            return Err(HelmError::Render(
                String::from_utf8_lossy(&output.stderr).trim().to_owned(),
            ));
        }
        parse_manifests(&String::from_utf8_lossy(&output.stdout))
    }
}

/// The `version:` of a Chart.yaml.
pub fn chart_version(chart_yaml: &str) -> Option<String> {
    let value: Value = serde_yaml::from_str(chart_yaml).ok()?;
    value.get("version")?.as_str().map(str::to_owned)
}

/// The objects of a multi-document YAML stream, skipping empty documents.
pub fn parse_manifests(text: &str) -> Result<Vec<Value>, HelmError> {
    let mut objects = Vec::new();
    for document in serde_yaml::Deserializer::from_str(text) {
        let value: Value = serde::Deserialize::deserialize(document)
            .map_err(|e: serde_yaml::Error| HelmError::Output(e.to_string()))?;
        if value.is_object() {
            objects.push(value);
        }
    }
    Ok(objects)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn manifests_parse_and_empty_documents_are_skipped() {
        let text = "---\n# Source: x\n---\napiVersion: v1\nkind: Service\nmetadata:\n  name: a\n---\n\n---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: b\n";
        let objects = parse_manifests(text).unwrap();
        assert_eq!(objects.len(), 2);
        assert_eq!(objects[1]["kind"], "ConfigMap");
    }

    #[test]
    fn catalog_charts_are_found_by_name_and_pinned_by_version() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("postgres")).unwrap();
        std::fs::write(
            dir.path().join("postgres/Chart.yaml"),
            "apiVersion: v2\nname: postgres\nversion: 1.2.0\n",
        )
        .unwrap();
        let helm = Helm::new("helm".into(), dir.path().into());
        let chart = |repository: &str, version: &str| wire::ChartRef {
            repository: repository.into(),
            name: "postgres".into(),
            version: version.into(),
        };
        assert_eq!(
            helm.source(&chart("charts/addons", "1.2.0")).unwrap(),
            Source::Local(dir.path().join("postgres"))
        );
        assert!(matches!(
            helm.source(&chart("charts/addons", "1.3.0")),
            Err(HelmError::VersionMismatch { .. })
        ));
        assert!(matches!(
            helm.source(&chart("https://charts.example.test", "9.9.9")),
            Ok(Source::Remote { .. })
        ));
    }
}
