//! An addon's folder in the GitOps repository, as files (pure): what it holds and why is in
//! the parent module's documentation.

use std::collections::BTreeMap;
use std::path::Path;

use super::AddonFiles;

/// The name of a kustomization file.
pub(super) const KUSTOMIZATION: &str = "kustomization.yaml";

/// A `kustomization.yaml` of `resources`, placing them in `namespace` when given.
pub(super) fn kustomization(namespace: Option<&str>, resources: &[String]) -> String {
    let mut kustomization = serde_json::json!({
        "apiVersion": "kustomize.config.k8s.io/v1beta1",
        "kind": "Kustomization",
        "resources": resources,
    });
    if let Some(namespace) = namespace {
        kustomization["namespace"] = namespace.into();
    }
    serde_yaml::to_string(&kustomization).unwrap_or_default()
}

/// What an addon's folder is made of.
#[derive(Debug, Clone, Copy)]
pub struct AddonRecord<'a> {
    /// The release (the folder's chart name).
    pub name: &'a str,
    pub namespace: &'a str,
    pub chart: &'a kubenest_contracts::ChartRef,
    /// The chart's own files when it is one of the agent's catalog, to vendor in `chart/`.
    pub vendored: Option<&'a BTreeMap<String, String>>,
    pub values: &'a serde_json::Value,
    /// Every object the agent applies for the addon.
    pub applied: &'a [serde_json::Value],
    /// The Secret of the addon's exports, which stays on its cluster.
    pub export_secret: &'a str,
}

/// The files of an addon's folder (pure): its applied objects for kustomize engines, an
/// umbrella chart that pins the addon's chart (vendored, or by its repository URL) with its
/// values for Helm, and a README.
pub fn addon_files(record: &AddonRecord<'_>) -> AddonFiles {
    let chart = record.chart;
    let repository = match record.vendored {
        Some(_) => "file://chart".to_owned(),
        None => chart.repository.clone(),
    };
    let chart_yaml = serde_yaml::to_string(&serde_json::json!({
        "apiVersion": "v2",
        "name": record.name,
        "version": chart.version,
        "description": format!("{} {} managed by kubenest", chart.name, chart.version),
        "dependencies": [{
            "name": chart.name,
            "version": chart.version,
            "repository": repository,
        }],
    }))
    .unwrap_or_default();
    let values_yaml =
        serde_yaml::to_string(&serde_json::json!({ chart.name.clone(): record.values }))
            .unwrap_or_default();
    let manifests: Vec<String> = record
        .applied
        .iter()
        .filter(|object| object["kind"] != "Secret")
        .filter_map(|object| serde_yaml::to_string(object).ok())
        .collect();
    let readme = format!(
        "# Addon {name} in namespace {namespace}\n\n\
         Written by the kubenest agent of this cluster; changes made here are overwritten.\n\n\
         - `manifests.yaml` is every object the agent applies for the addon, and\n  \
         `kustomization.yaml` applies them in namespace `{namespace}`.\n\
         - `Chart.yaml` and `values.yaml` render the same with Helm (`helm dependency build`,\n  \
         then `helm template {name} .`).\n\n\
         Before applying it elsewhere, namespace `{namespace}` must exist and hold Secret\n\
         `{secret}` with a key `password`: credentials are never committed.\n",
        name = record.name,
        namespace = record.namespace,
        secret = record.export_secret,
    );
    let mut files = AddonFiles::from([
        ("Chart.yaml".to_owned(), chart_yaml),
        ("values.yaml".to_owned(), values_yaml),
        ("manifests.yaml".to_owned(), manifests.join("---\n")),
        (
            KUSTOMIZATION.to_owned(),
            kustomization(Some(record.namespace), &["manifests.yaml".to_owned()]),
        ),
        ("README.md".to_owned(), readme),
    ]);
    for (path, text) in record.vendored.into_iter().flatten() {
        files.insert(format!("chart/{path}"), text.clone());
    }
    files
}

/// The files of chart directory `dir` (relative path, text), to vendor. Only regular files
/// are read, so nothing outside the directory is reached through a link.
pub fn chart_files(dir: &Path) -> std::io::Result<BTreeMap<String, String>> {
    let mut files = BTreeMap::new();
    let mut pending = vec![dir.to_path_buf()];
    while let Some(folder) = pending.pop() {
        for entry in std::fs::read_dir(&folder)? {
            let entry = entry?;
            let kind = entry.file_type()?;
            if kind.is_dir() {
                pending.push(entry.path());
            } else if kind.is_file() {
                let path = entry.path();
                let relative = path.strip_prefix(dir).unwrap_or(&path);
                files.insert(
                    relative.to_string_lossy().into_owned(),
                    std::fs::read_to_string(&path)?,
                );
            }
        }
    }
    Ok(files)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn chart(repository: &str) -> kubenest_contracts::ChartRef {
        serde_json::from_value(
            json!({"repository": repository, "name": "postgres", "version": "1.0.0"}),
        )
        .unwrap()
    }

    #[test]
    fn an_addon_folder_stands_on_its_own_and_holds_no_secret() {
        let vendored = BTreeMap::from([
            ("Chart.yaml".to_owned(), "name: postgres\n".to_owned()),
            (
                "templates/statefulset.yaml".to_owned(),
                "kind: StatefulSet\n".to_owned(),
            ),
        ]);
        let applied = [
            json!({"apiVersion": "apps/v1", "kind": "StatefulSet", "metadata": {"name": "db"}}),
            json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "db-exports"},
                   "data": {"password": "c2VjcmV0"}}),
            json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "db"}}),
        ];
        let values = json!({"size": "2Gi"});
        let record = AddonRecord {
            name: "shop-db",
            namespace: "shop",
            chart: &chart("charts/addons"),
            vendored: Some(&vendored),
            values: &values,
            applied: &applied,
            export_secret: "shop-db-exports",
        };
        let files = addon_files(&record);
        let manifests = &files["manifests.yaml"];
        assert!(manifests.contains("kind: StatefulSet") && manifests.contains("kind: Service"));
        assert!(
            !manifests.contains("c2VjcmV0") && !manifests.contains("Secret"),
            "{manifests}"
        );
        assert!(files["Chart.yaml"].contains("repository: file://chart"));
        assert_eq!(
            files["chart/templates/statefulset.yaml"],
            "kind: StatefulSet\n"
        );
        assert!(files[KUSTOMIZATION].contains("namespace: shop"));
        assert!(files["values.yaml"].contains("size: 2Gi"));
        assert!(files["README.md"].contains("shop-db-exports"));

        // A chart from a repository is named by its URL, not vendored.
        let remote = chart("https://charts.example.test/stable");
        let files = addon_files(&AddonRecord {
            chart: &remote,
            vendored: None,
            ..record
        });
        assert!(files["Chart.yaml"].contains("repository: https://charts.example.test/stable"));
        assert!(!files.keys().any(|path| path.starts_with("chart/")));
    }

    #[test]
    fn the_index_lists_folders_and_a_folder_places_its_objects() {
        let index = kustomization(None, &["shop-db".into(), "web-cache".into()]);
        assert!(
            index.contains("- shop-db") && index.contains("- web-cache"),
            "{index}"
        );
        assert!(!index.contains("namespace"), "{index}");
    }
}
