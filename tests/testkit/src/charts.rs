//! A Helm chart repository over HTTPS on loopback (a serving certificate of the test's
//! [`ServerCa`]), as `helm repo index` lays one out (an `index.yaml` beside packaged charts),
//! for chart workloads and templates under test. helm packages and indexes the charts; the
//! server only hands out those files, counts the requests it gets (so a test sees that a
//! server was never asked) and can be told to redirect every request elsewhere.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use axum::extract::State;
use axum::http::{StatusCode, Uri, header};
use axum::response::{IntoResponse, Response};

use crate::{Error, ServerCa};

/// A chart repository at `https://127.0.0.1:{port}`.
#[derive(Debug)]
pub struct ChartRepository {
    dir: tempfile::TempDir,
    url: String,
    served: Served,
    task: tokio::task::JoinHandle<()>,
}

/// What the server's handler shares with the test.
#[derive(Debug, Clone)]
struct Served {
    root: PathBuf,
    requests: Arc<AtomicUsize>,
    redirect: Arc<Mutex<Option<String>>>,
}

impl Drop for ChartRepository {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl ChartRepository {
    /// Serves an empty repository on a free loopback port, with a certificate of `ca`.
    pub async fn start(ca: &ServerCa) -> Result<Self, Error> {
        let dir = tempfile::tempdir().map_err(|e| Error::io("chart repository folder", e))?;
        let host = std::net::IpAddr::from([127, 0, 0, 1]);
        let serving = ca.issue("charts", &[host])?;
        let tls = axum_server::tls_rustls::RustlsConfig::from_pem_file(&serving.cert, &serving.key)
            .await
            .map_err(|e| Error::io("the chart repository's certificate", e))?;
        let listener = std::net::TcpListener::bind((host, 0))
            .map_err(|e| Error::io("bind the chart repository", e))?;
        let url = format!(
            "https://{}",
            listener
                .local_addr()
                .map_err(|e| Error::io("chart repository address", e))?
        );
        let served = Served {
            root: dir.path().to_owned(),
            requests: Arc::default(),
            redirect: Arc::default(),
        };
        let app = axum::Router::new()
            .fallback(file)
            .with_state(served.clone());
        let server = axum_server::from_tcp_rustls(listener, tls)
            .map_err(|e| Error::io("serve the chart repository", e))?;
        let task = tokio::spawn(async move {
            let _ = server.serve(app.into_make_service()).await;
        });
        let repository = Self {
            dir,
            url,
            served,
            task,
        };
        repository.index_at(&repository.url)?;
        Ok(repository)
    }

    /// The repository's URL (`helm --repo`, a chart reference's `repository`).
    pub fn url(&self) -> &str {
        &self.url
    }

    /// How many HTTP requests the repository has answered.
    pub fn requests(&self) -> usize {
        self.served.requests.load(Ordering::SeqCst)
    }

    /// From now on, answers every request with a redirect to the same path under `base`.
    pub fn redirect_to(&self, base: &str) {
        if let Ok(mut redirect) = self.served.redirect.lock() {
            *redirect = Some(base.trim_end_matches('/').to_owned());
        }
    }

    /// Writes a chart from `files` (paths inside the chart, e.g. `Chart.yaml`,
    /// `templates/deployment.yaml`), packages it into the repository and indexes it again.
    pub fn publish(&self, name: &str, files: &[(&str, &str)]) -> Result<(), Error> {
        package(name, files, self.dir.path())?;
        self.index_at(&self.url)
    }

    /// Indexes the repository again with every chart's URL under `base` (another server's,
    /// to test what follows an index's URLs).
    pub fn index_at(&self, base: &str) -> Result<(), Error> {
        helm(&[
            "repo",
            "index",
            &self.dir.path().to_string_lossy(),
            "--url",
            base,
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
async fn file(State(served): State<Served>, uri: Uri) -> Response {
    served.requests.fetch_add(1, Ordering::SeqCst);
    let redirect = served.redirect.lock().ok().and_then(|r| r.clone());
    if let Some(base) = redirect {
        let to = format!("{base}{}", uri.path());
        return (StatusCode::FOUND, [(header::LOCATION, to)]).into_response();
    }
    let name = uri.path().trim_start_matches('/');
    if name.is_empty() || name.contains("..") || name.contains('/') {
        return StatusCode::NOT_FOUND.into_response();
    }
    match tokio::fs::read(served.root.join(name)).await {
        Ok(bytes) => bytes.into_response(),
        Err(_) => StatusCode::NOT_FOUND.into_response(),
    }
}
