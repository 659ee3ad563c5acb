//! A Helm chart repository over plain HTTP on loopback, as `helm repo index` lays one out (an
//! `index.yaml` beside packaged charts), for chart workloads under test. helm packages and
//! indexes the charts; the server only hands out those files.

use std::path::{Path, PathBuf};

use axum::extract::State;
use axum::http::{StatusCode, Uri};
use axum::response::{IntoResponse, Response};

use crate::Error;

/// A chart repository at `http://127.0.0.1:{port}`.
#[derive(Debug)]
pub struct ChartRepository {
    dir: tempfile::TempDir,
    url: String,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for ChartRepository {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl ChartRepository {
    /// Serves an empty repository on a free loopback port.
    pub async fn start() -> Result<Self, Error> {
        let dir = tempfile::tempdir().map_err(|e| Error::io("chart repository folder", e))?;
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .map_err(|e| Error::io("bind the chart repository", e))?;
        let url = format!(
            "http://{}",
            listener
                .local_addr()
                .map_err(|e| Error::io("chart repository address", e))?
        );
        let app = axum::Router::new()
            .fallback(file)
            .with_state(dir.path().to_owned());
        let task = tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        let repository = Self { dir, url, task };
        repository.index()?;
        Ok(repository)
    }

    /// The repository's URL (`helm --repo`, a chart reference's `repository`).
    pub fn url(&self) -> &str {
        &self.url
    }

    /// Writes a chart from `files` (paths inside the chart, e.g. `Chart.yaml`,
    /// `templates/deployment.yaml`), packages it into the repository and indexes it again.
    pub fn publish(&self, name: &str, files: &[(&str, &str)]) -> Result<(), Error> {
        package(name, files, self.dir.path())?;
        self.index()
    }

    fn index(&self) -> Result<(), Error> {
        helm(&[
            "repo",
            "index",
            &self.dir.path().to_string_lossy(),
            "--url",
            &self.url,
        ])
    }
}

/// Writes chart `name` from `files` (paths inside the chart) and packages it into folder
/// `destination` with `helm package`; returns the package's path.
pub fn package(name: &str, files: &[(&str, &str)], destination: &Path) -> Result<PathBuf, Error> {
    let source = tempfile::tempdir().map_err(|e| Error::io("chart source", e))?;
    let chart = source.path().join(name);
    for (path, text) in files {
        let file = chart.join(path);
        if let Some(parent) = file.parent() {
            std::fs::create_dir_all(parent).map_err(|e| Error::io("chart folder", e))?;
        }
        std::fs::write(&file, text).map_err(|e| Error::io("chart file", e))?;
    }
    let before = packages(destination)?;
    helm(&[
        "package",
        &chart.to_string_lossy(),
        "--destination",
        &destination.to_string_lossy(),
    ])?;
    packages(destination)?
        .into_iter()
        .find(|p| !before.contains(p))
        .ok_or_else(|| Error::Process(format!("helm package {name} wrote no package")))
}

fn packages(folder: &Path) -> Result<Vec<PathBuf>, Error> {
    Ok(std::fs::read_dir(folder)
        .map_err(|e| Error::io("chart package folder", e))?
        .filter_map(|entry| entry.ok().map(|e| e.path()))
        .filter(|path| path.extension().is_some_and(|ext| ext == "tgz"))
        .collect())
}

pub(crate) fn helm(args: &[&str]) -> Result<(), Error> {
    let out = crate::tools::helm(args)?;
    if out.status.success() {
        Ok(())
    } else {
        Err(Error::Process(format!(
            "helm {}: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr)
        )))
    }
}

/// One file of the repository's folder; nothing outside it.
async fn file(State(root): State<PathBuf>, uri: Uri) -> Response {
    let name = uri.path().trim_start_matches('/');
    if name.is_empty() || name.contains("..") || name.contains('/') {
        return StatusCode::NOT_FOUND.into_response();
    }
    match tokio::fs::read(Path::new(&root).join(name)).await {
        Ok(bytes) => bytes.into_response(),
        Err(_) => StatusCode::NOT_FOUND.into_response(),
    }
}
