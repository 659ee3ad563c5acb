//! The kubenest programs and one running program of a system.

use std::ffi::OsString;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::Context as _;
use kubenest_testkit::ManagedProcess;

/// Where the repository is: charts and the addon catalog are read from it.
pub fn repository_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .map(Path::to_path_buf)
        .unwrap_or_else(|| PathBuf::from("."))
}

/// The kubenest release binaries.
#[derive(Debug, Clone)]
pub struct Programs {
    pub hub: PathBuf,
    pub controllers: PathBuf,
    pub apiserver: PathBuf,
    pub agent: PathBuf,
}

impl Programs {
    /// `$KUBENEST_BIN_DIR`, else the directory of the running executable or its parent (a test
    /// binary runs from `target/debug/deps`, the programs are in `target/debug`).
    pub fn locate() -> anyhow::Result<Self> {
        let mut dirs = Vec::new();
        if let Some(dir) = std::env::var_os("KUBENEST_BIN_DIR") {
            dirs.push(PathBuf::from(dir));
        }
        let exe = std::env::current_exe()?;
        for dir in exe.ancestors().skip(1).take(2) {
            dirs.push(dir.to_path_buf());
        }
        let dir = dirs
            .iter()
            .find(|d| d.join("kubenest-hub").is_file() && d.join("kubenest-agent").is_file())
            .with_context(|| {
                format!(
                    "the kubenest programs are not built (looked in {dirs:?}): run `cargo build \
                     -p kubenest-hub -p kubenest-controllers -p kubenest-apiserver -p kubenest-agent`"
                )
            })?;
        let programs = Self {
            hub: dir.join("kubenest-hub"),
            controllers: dir.join("kubenest-controllers"),
            apiserver: dir.join("kubenest-apiserver"),
            agent: dir.join("kubenest-agent"),
        };
        for program in [&programs.controllers, &programs.apiserver] {
            anyhow::ensure!(program.is_file(), "{} is not built", program.display());
        }
        Ok(programs)
    }
}

/// One kubenest program: how to start it, and its process while it runs.
#[derive(Debug)]
pub struct Service {
    name: String,
    program: PathBuf,
    args: Vec<OsString>,
    env: Vec<(String, String)>,
    log: PathBuf,
    /// Where its admin endpoint (`/metrics`, `/healthz`, `/readyz`) listens.
    admin: Option<SocketAddr>,
    process: Option<ManagedProcess>,
}

impl Service {
    pub(super) fn new(name: &str, program: &Path, dir: &Path) -> Self {
        Self {
            name: name.to_owned(),
            program: program.to_path_buf(),
            args: Vec::new(),
            env: Vec::new(),
            log: dir.join(format!("{name}.log")),
            admin: None,
            process: None,
        }
        // Logs for people: every program takes the flag (JSON is the charts' default).
        .arg("--log-format=text")
    }

    /// Exports the program's traces to the OTLP/HTTP `endpoint`, a batch every 200 ms.
    pub(super) fn traced(self, endpoint: Option<&str>) -> Self {
        match endpoint {
            Some(endpoint) => self
                .env("OTEL_EXPORTER_OTLP_ENDPOINT", endpoint)
                .env("OTEL_BSP_SCHEDULE_DELAY", "200"),
            None => self,
        }
    }

    /// Serves the program's admin endpoint on `address`.
    pub(super) fn admin(mut self, address: SocketAddr) -> Self {
        self.admin = Some(address);
        self.arg(format!("--admin-listen={address}"))
    }

    /// `http://host:port` of its admin endpoint.
    pub fn admin_url(&self) -> Option<String> {
        self.admin.map(|address| format!("http://{address}"))
    }

    pub(super) fn arg(mut self, arg: impl Into<OsString>) -> Self {
        self.args.push(arg.into());
        self
    }

    pub(super) fn env(mut self, key: &str, value: &str) -> Self {
        self.env.push((key.to_owned(), value.to_owned()));
        self
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    pub fn log_path(&self) -> &Path {
        &self.log
    }

    /// Starts the program (again, after [`kill`](Self::kill) or [`stop`](Self::stop)).
    pub fn start(&mut self) -> anyhow::Result<()> {
        anyhow::ensure!(self.process.is_none(), "{} is already running", self.name);
        let mut command = Command::new(&self.program);
        command.args(&self.args).env(
            "RUST_LOG",
            std::env::var("KUBENEST_LOG").unwrap_or("info".into()),
        );
        for (key, value) in &self.env {
            command.env(key, value);
        }
        self.process = Some(ManagedProcess::spawn(
            &self.name,
            command,
            self.log.clone(),
        )?);
        Ok(())
    }

    /// Kills the program outright, as a crash would.
    pub fn kill(&mut self) {
        if let Some(mut process) = self.process.take() {
            process.kill();
        }
    }

    /// Stops the program: SIGTERM, then SIGKILL after a grace period.
    pub fn stop(&mut self) {
        if let Some(mut process) = self.process.take() {
            process.stop();
        }
    }

    pub fn is_running(&self) -> bool {
        self.process.is_some()
    }

    pub fn pid(&self) -> Option<u32> {
        self.process.as_ref().map(ManagedProcess::pid)
    }

    /// `Err` with the end of its log when it was started and has exited.
    pub fn check_running(&mut self) -> anyhow::Result<()> {
        if let Some(process) = &mut self.process {
            process.check_running()?;
        }
        Ok(())
    }
}
