//! A chart package (`.tgz` of one folder) and the chart repository's `index.yaml`, read in
//! Rust: no helm runs for a user's chart.

use std::collections::HashMap;
use std::io::Read;

use reqwest::Url;
use serde::Deserialize;

use super::FetchError;

/// Most bytes a package unpacks to before it is refused (a small gzip can unpack to gigabytes).
const UNPACKED_LIMIT: u64 = 64 * 1024 * 1024;

#[derive(Debug, Deserialize)]
struct Index {
    #[serde(default)]
    entries: HashMap<String, Vec<Entry>>,
}

#[derive(Debug, Deserialize)]
struct Entry {
    version: String,
    #[serde(default)]
    urls: Vec<String>,
}

/// The URL of chart `name` at `version` in the repository index `index` read from
/// `index_url`; a relative URL is relative to the index.
pub(super) fn chart_url(
    index_url: &Url,
    index: &[u8],
    name: &str,
    version: &str,
) -> Result<Url, FetchError> {
    let index: Index =
        serde_yaml::from_slice(index).map_err(|e| FetchError::Index(format!("not YAML: {e}")))?;
    let entry = index
        .entries
        .get(name)
        .and_then(|versions| versions.iter().find(|e| e.version == version))
        .ok_or_else(|| FetchError::Index(format!("no {name} {version}")))?;
    let first = entry
        .urls
        .first()
        .ok_or_else(|| FetchError::Index(format!("{name} {version} has no URL")))?;
    index_url
        .join(first)
        .map_err(|e| FetchError::Index(format!("the URL {first:?}: {e}")))
}

/// The text of `values.yaml` in the chart's folder of package `tgz` (empty when the chart has
/// none), refused past `limit` bytes.
pub(super) fn values_yaml(tgz: &[u8], limit: usize) -> Result<String, FetchError> {
    let bad = |e: std::io::Error| FetchError::Package(e.to_string());
    let unpacked = flate2::read::GzDecoder::new(tgz).take(UNPACKED_LIMIT);
    let mut archive = tar::Archive::new(unpacked);
    for entry in archive.entries().map_err(bad)? {
        let entry = entry.map_err(bad)?;
        let path = entry.path().map_err(bad)?;
        let parts: Vec<_> = path.components().collect();
        // helm reads the chart from the package's one top folder, whatever its name.
        let is_values = parts.len() == 2
            && matches!(parts[0], std::path::Component::Normal(_))
            && parts[1].as_os_str() == "values.yaml";
        if !is_values {
            continue;
        }
        let mut text = String::new();
        entry
            .take(limit as u64 + 1)
            .read_to_string(&mut text)
            .map_err(bad)?;
        if text.len() > limit {
            return Err(FetchError::TooLarge {
                url: "values.yaml".into(),
                limit,
            });
        }
        return Ok(text);
    }
    Ok(String::new())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tgz(files: &[(&str, &[u8])]) -> Vec<u8> {
        let mut builder = tar::Builder::new(flate2::write::GzEncoder::new(
            Vec::new(),
            flate2::Compression::default(),
        ));
        for (path, bytes) in files {
            let mut header = tar::Header::new_gnu();
            header.set_size(bytes.len() as u64);
            header.set_mode(0o644);
            header.set_cksum();
            builder.append_data(&mut header, path, *bytes).unwrap();
        }
        builder.into_inner().unwrap().finish().unwrap()
    }

    #[test]
    fn values_come_from_the_charts_own_folder_and_are_bounded() {
        let package = tgz(&[
            ("web/Chart.yaml", b"name: web\n"),
            ("web/charts/sub/values.yaml", b"sub: 1\n"),
            ("web/values.yaml", b"replicas: 2\n"),
        ]);
        assert_eq!(values_yaml(&package, 1024).unwrap(), "replicas: 2\n");
        assert!(matches!(
            values_yaml(&package, 4),
            Err(FetchError::TooLarge { .. })
        ));
        assert_eq!(
            values_yaml(&tgz(&[("web/Chart.yaml", b"name: web\n")]), 1024).unwrap(),
            ""
        );
        assert!(values_yaml(b"not a gzip", 1024).is_err());
    }

    #[test]
    fn a_charts_url_is_found_in_the_index_relative_or_absolute() {
        let index_url = Url::parse("https://charts.example.test/stable/index.yaml").unwrap();
        let index = b"apiVersion: v1\nentries:\n  web:\n  - version: 1.0.0\n    urls: [web-1.0.0.tgz]\n  - version: 2.0.0\n    urls: ['https://cdn.example.test/web-2.0.0.tgz']\n";
        assert_eq!(
            chart_url(&index_url, index, "web", "1.0.0")
                .unwrap()
                .as_str(),
            "https://charts.example.test/stable/web-1.0.0.tgz"
        );
        assert_eq!(
            chart_url(&index_url, index, "web", "2.0.0")
                .unwrap()
                .as_str(),
            "https://cdn.example.test/web-2.0.0.tgz"
        );
        assert!(chart_url(&index_url, index, "web", "3.0.0").is_err());
        assert!(chart_url(&index_url, index, "db", "1.0.0").is_err());
    }
}
