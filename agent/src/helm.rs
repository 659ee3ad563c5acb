//! Rendering charts with helm (`helm template`): the agent applies the result itself, so there is
//! no Tiller-like state on the cluster and pruning works the same as for workloads.

use std::path::PathBuf;

use std::time::Duration;

use kubenest_contracts as wire;
use kubenest_contracts::patterns;
use kubenest_runtime::exec::{ExecError, Program};

use crate::egress::Egress;
use serde_json::Value;

/// How long one render may take (a remote chart is pulled first).
const RENDER_TIMEOUT: Duration = Duration::from_secs(120);

/// The most a chart may render, in bytes of YAML.
const MAX_RENDER_BYTES: usize = 32 << 20;

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
    #[error("chart reference refused: {field}: {rule}")]
    Refused {
        field: &'static str,
        rule: &'static str,
    },
    /// A connection the chart pull needed reaches the cluster's own network ([`Egress`]).
    #[error("chart.repository: {0}")]
    Unreachable(String),
    #[error("running helm: {0}")]
    Exec(#[from] ExecError),
    #[error("preparing the render: {0}")]
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
    /// Where a remote chart's pull may connect (`--chart-sources`).
    pub egress: Egress,
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
            egress: Egress::default(),
            renders: Renders::default(),
        }
    }

    /// The same, trusting the CA of PEM file `ca_file` for chart pulls.
    pub fn with_ca_file(self, ca_file: Option<PathBuf>) -> Self {
        Self { ca_file, ..self }
    }

    /// The same, pulling remote charts through `egress`.
    pub fn with_egress(self, egress: Egress) -> Self {
        Self { egress, ..self }
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
        // The hub's schema checked these already; the agent checks again before a value
        // becomes a path or a URL (a frame from an older hub, or a bug, must not be trusted).
        for (field, pattern, value) in [
            (
                "chart.repository",
                patterns::CHART_REPOSITORY,
                &chart.repository,
            ),
            ("chart.name", patterns::CHART_NAME, &chart.name),
            ("chart.version", patterns::CHART_VERSION, &chart.version),
        ] {
            if !patterns::matches(pattern, value) {
                return Err(HelmError::Refused {
                    field,
                    rule: patterns::rule_of(pattern).unwrap_or("not allowed"),
                });
            }
        }
        let repository = chart.repository.as_str();
        if repository.starts_with("https://") || repository.starts_with("oci://") {
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
        // Every value of the chart reference is an option's value or an operand after `--`
        // (exec::Program), so a name like `--post-renderer=…` is a name helm does not find.
        let mut program = Program::new(&self.bin)
            .arg("template")
            .option("--namespace", namespace)
            .path_option("--values", &values_file)
            .env("HELM_CACHE_HOME", dir.path().join("cache"))
            .env("HELM_CONFIG_HOME", dir.path().join("config"))
            .env("HELM_DATA_HOME", dir.path().join("data"))
            .timeout(RENDER_TIMEOUT)
            .max_output(MAX_RENDER_BYTES);
        if let Some(ca_file) = &self.ca_file {
            program = program.path_option("--ca-file", &absolute(ca_file)?);
        }
        // A remote chart's first URL is decided here; every connection helm opens after it
        // goes through the render's own proxy, which decides each again.
        let gate = match &source {
            Source::Local(_) => None,
            Source::Remote { repository } => {
                self.egress
                    .check_source(repository)
                    .map_err(HelmError::Unreachable)?;
                Some(self.egress.open().await?)
            }
        };
        if let Some(gate) = &gate {
            for name in ["HTTPS_PROXY", "HTTP_PROXY", "https_proxy", "http_proxy"] {
                program = program.env(name, &gate.url);
            }
        }
        let program = match &source {
            Source::Local(path) => {
                program.operands([std::ffi::OsStr::new(release), path.as_os_str()])
            }
            Source::Remote { repository } if repository.starts_with("oci://") => {
                // The credentials live in the render's own folder, removed with it.
                let registry_config = dir.path().join("registry.json");
                tokio::fs::write(&registry_config, auth.unwrap_or(b"{}")).await?;
                let reference = format!("{}/{}", repository.trim_end_matches('/'), chart.name);
                program
                    .path_option("--registry-config", &registry_config)
                    .option("--version", &chart.version)
                    .operands([release, reference.as_str()])
            }
            Source::Remote { repository } => program
                .option("--repo", repository)
                .option("--version", &chart.version)
                .operands([release, chart.name.as_str()]),
        };
        let output = program.run().await?;
        if let Some(why) = gate.as_ref().and_then(|gate| gate.refused()) {
            return Err(HelmError::Unreachable(why));
        }
        if !output.success {
            // The whole text stays in the agent's log; a status shows one clean line of it.
            tracing::warn!(chart = %chart.name, stderr = %String::from_utf8_lossy(&output.stderr),
                           "helm template failed");
            return Err(HelmError::Render(output.summary()));
        }
        if output.truncated {
            return Err(HelmError::Output(format!(
                "the chart renders more than {} MiB",
                MAX_RENDER_BYTES >> 20
            )));
        }
        parse_manifests(&String::from_utf8_lossy(&output.stdout))
    }
}

/// `path` as an absolute path (relative ones are taken from the agent's working folder).
fn absolute(path: &std::path::Path) -> Result<PathBuf, HelmError> {
    Ok(std::path::absolute(path)?)
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

    #[test]
    fn a_chart_reference_that_could_be_a_flag_or_a_path_is_refused_before_helm_runs() {
        let helm = Helm::new("helm".into(), "/opt/kubenest/charts/addons".into());
        let refused = |repository: &str, name: &str, version: &str| {
            let chart = wire::ChartRef {
                repository: repository.into(),
                name: name.into(),
                version: version.into(),
            };
            match helm.source(&chart) {
                Err(HelmError::Refused { field, .. }) => field,
                other => panic!("{repository} {name} {version}: {other:?}"),
            }
        };
        assert_eq!(refused("charts/addons", "--debug", "1.0.0"), "chart.name");
        assert_eq!(refused("charts/addons", "../../etc", "1.0.0"), "chart.name");
        assert_eq!(refused("charts/addons", "/etc", "1.0.0"), "chart.name");
        assert_eq!(
            refused("../../etc", "postgres", "1.0.0"),
            "chart.repository"
        );
        assert_eq!(refused("/etc", "postgres", "1.0.0"), "chart.repository");
        assert_eq!(
            refused("https://u:p@charts.example.test", "web", "1.0.0"),
            "chart.repository"
        );
        assert_eq!(
            refused("http://127.0.0.1:1", "web", "1.0.0"),
            "chart.repository"
        );
        assert_eq!(
            refused(
                "https://charts.example.test",
                "web",
                "--set-file=x=/etc/passwd"
            ),
            "chart.version"
        );
    }
}
