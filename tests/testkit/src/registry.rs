//! An OCI image registry for tests and `make dev`: the distribution registry (Debian's
//! `docker-registry`), on an address pods and nodes reach, over TLS from a [`ServerCa`], with
//! one htpasswd account and nothing anonymous. Images are put into it with skopeo.

use std::net::IpAddr;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

use crate::process::ManagedProcess;
use crate::tls::ServerCa;
use crate::{Error, free_port};

/// A running registry at `host:port`.
pub struct Registry {
    _process: ManagedProcess,
    _dir: tempfile::TempDir,
    address: String,
    username: String,
    password: String,
    ca_file: std::path::PathBuf,
}

impl std::fmt::Debug for Registry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Registry")
            .field("address", &self.address)
            .field("username", &self.username)
            .finish_non_exhaustive()
    }
}

impl Registry {
    /// Starts a registry on `host` (a free port), serving a certificate of `ca`, with one
    /// account of a fresh random password.
    pub async fn start(host: IpAddr, ca: &ServerCa) -> Result<Self, Error> {
        let dir = tempfile::tempdir().map_err(|e| Error::io("registry folder", e))?;
        let port = free_port()?;
        let address = format!("{host}:{port}");
        let serving = ca.issue("registry", &[host])?;
        let username = "kubenest".to_owned();
        let password = uuid::Uuid::new_v4().simple().to_string();
        let htpasswd = dir.path().join("htpasswd");
        let out = Command::new("htpasswd")
            .args(["-Bbn", &username, &password])
            .output()
            .map_err(|e| Error::io("run htpasswd (tools/setup.sh installs it)", e))?;
        if !out.status.success() {
            return Err(Error::Process(format!(
                "htpasswd: {}",
                String::from_utf8_lossy(&out.stderr)
            )));
        }
        std::fs::write(&htpasswd, &out.stdout).map_err(|e| Error::io("write htpasswd", e))?;
        let config = dir.path().join("config.yml");
        let text = format!(
            "version: 0.1\nlog:\n  level: warn\n  accesslog:\n    disabled: true\n\
             storage:\n  filesystem:\n    rootdirectory: {data}\n  delete:\n    enabled: true\n\
             http:\n  addr: {address}\n  tls:\n    certificate: {cert}\n    key: {key}\n\
             auth:\n  htpasswd:\n    realm: kubenest-registry\n    path: {htpasswd}\n",
            data = dir.path().join("data").display(),
            cert = serving.cert.display(),
            key = serving.key.display(),
            htpasswd = htpasswd.display(),
        );
        std::fs::write(&config, text).map_err(|e| Error::io("write registry config", e))?;
        let mut command = Command::new("docker-registry");
        command.arg("serve").arg(&config);
        let process = ManagedProcess::spawn("registry", command, dir.path().join("registry.log"))?;
        let registry = Self {
            _process: process,
            _dir: dir,
            address,
            username,
            password,
            ca_file: ca.path.clone(),
        };
        registry.wait_ready().await?;
        Ok(registry)
    }

    async fn wait_ready(&self) -> Result<(), Error> {
        let pem = std::fs::read(&self.ca_file).map_err(|e| Error::io("read the CA", e))?;
        let ca = reqwest::Certificate::from_pem(&pem)
            .map_err(|e| Error::Process(format!("the server CA: {e}")))?;
        let client = reqwest::Client::builder()
            .add_root_certificate(ca)
            .build()
            .map_err(|e| Error::Process(format!("registry client: {e}")))?;
        let url = format!("https://{}/v2/", self.address);
        for _ in 0..100 {
            // 401 without credentials, 200 with them: the registry serves and checks accounts.
            let answer = client
                .get(&url)
                .basic_auth(&self.username, Some(&self.password))
                .send()
                .await;
            if answer.is_ok_and(|a| a.status().is_success()) {
                return Ok(());
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        Err(Error::Process(format!(
            "the registry at {} did not answer",
            self.address
        )))
    }

    /// `host:port`, the first part of every image name in it.
    pub fn address(&self) -> &str {
        &self.address
    }

    /// The account's name.
    pub fn username(&self) -> &str {
        &self.username
    }

    /// The account's password.
    pub fn password(&self) -> &str {
        &self.password
    }

    /// Copies the image of OCI archive `archive` into the registry as `{address}/{name}`.
    pub fn push_archive(&self, archive: &Path, name: &str) -> Result<String, Error> {
        let target = format!("{}/{name}", self.address);
        let out = Command::new("skopeo")
            .arg("copy")
            .arg("--quiet")
            .arg(format!("--dest-creds={}:{}", self.username, self.password))
            .arg(format!(
                "--dest-cert-dir={}",
                self.ca_file.parent().unwrap_or(Path::new(".")).display()
            ))
            .arg(format!("oci-archive:{}", archive.display()))
            .arg(format!("docker://{target}"))
            .output()
            .map_err(|e| Error::io("run skopeo (tools/setup.sh installs it)", e))?;
        if !out.status.success() {
            return Err(Error::Process(format!(
                "skopeo copy {} to {target}: {}",
                archive.display(),
                String::from_utf8_lossy(&out.stderr)
            )));
        }
        Ok(target)
    }

    /// Pushes chart package `package` (a `.tgz` of `helm package`) under `{address}/charts`
    /// with `helm push`, as the account; returns the repository a chart reference names
    /// (`oci://{address}/charts`).
    pub fn push_chart(&self, package: &Path) -> Result<String, Error> {
        let repository = format!("oci://{}/charts", self.address);
        let config = tempfile::NamedTempFile::new().map_err(|e| Error::io("helm login", e))?;
        std::fs::write(config.path(), self.docker_config_json())
            .map_err(|e| Error::io("helm login", e))?;
        crate::charts::helm(&[
            "push",
            &package.to_string_lossy(),
            &repository,
            "--ca-file",
            &self.ca_file.to_string_lossy(),
            "--registry-config",
            &config.path().to_string_lossy(),
        ])?;
        Ok(repository)
    }

    /// The `.dockerconfigjson` of the account, as an image pull Secret holds it.
    pub fn docker_config_json(&self) -> String {
        use base64::Engine as _;
        let auth = base64::engine::general_purpose::STANDARD
            .encode(format!("{}:{}", self.username, self.password));
        serde_json::json!({"auths": {&self.address: {
            "username": self.username, "password": self.password, "auth": auth}}})
        .to_string()
    }
}
