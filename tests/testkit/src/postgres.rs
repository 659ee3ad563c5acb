//! A real PostgreSQL server (Debian's `postgresql` package) on a free loopback port with its own
//! data directory, and a fresh database per test.
//!
//! PostgreSQL refuses to run as root, and CI runs as root: the server then runs as the `postgres`
//! system user the Debian package creates.

use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use nix::unistd::{Uid, User, chown};
use sqlx::{Connection, Executor, PgConnection};

use crate::process::{ManagedProcess, tail};
use crate::{Error, wait};

/// A running PostgreSQL server.
#[derive(Debug)]
pub struct Postgres {
    process: ManagedProcess,
    port: u16,
}

/// A database created for one test, with the URL to reach it.
#[derive(Debug, Clone)]
pub struct TestDatabase {
    pub name: String,
    pub url: String,
}

/// Directory holding `initdb` and `postgres`: `KUBENEST_PG_BIN`, else the newest
/// `/usr/lib/postgresql/*/bin`.
fn bin_dir() -> Result<PathBuf, Error> {
    if let Some(dir) = std::env::var_os("KUBENEST_PG_BIN") {
        return Ok(dir.into());
    }
    let mut versions: Vec<(u32, PathBuf)> = std::fs::read_dir("/usr/lib/postgresql")
        .map_err(|_| Error::MissingBinary("/usr/lib/postgresql/*/bin/postgres".into()))?
        .flatten()
        .filter_map(|e| Some((e.file_name().to_str()?.parse().ok()?, e.path().join("bin"))))
        .filter(|(_, bin)| bin.join("postgres").exists())
        .collect();
    versions.sort();
    versions
        .pop()
        .map(|(_, bin)| bin)
        .ok_or_else(|| Error::MissingBinary("/usr/lib/postgresql/*/bin/postgres".into()))
}

/// When running as root, the `postgres` user to run the server as.
fn server_user() -> Result<Option<User>, Error> {
    if !Uid::effective().is_root() {
        return Ok(None);
    }
    User::from_name("postgres")
        .map_err(|e| Error::Postgres(format!("look up user postgres: {e}")))?
        .map(Some)
        .ok_or_else(|| {
            Error::Postgres(
                "running as root needs the `postgres` user (apt-get install postgresql)".into(),
            )
        })
}

fn as_user(cmd: &mut Command, user: Option<&User>) {
    if let Some(user) = user {
        cmd.uid(user.uid.as_raw()).gid(user.gid.as_raw());
    }
}

impl Postgres {
    /// Initialises a cluster under `dir/postgres` and starts the server.
    pub async fn start(dir: &Path) -> Result<Self, Error> {
        let bin = bin_dir()?;
        let user = server_user()?;
        let root = dir.join("postgres");
        let data = root.join("data");
        std::fs::create_dir_all(&data).map_err(|e| Error::io("create postgres dir", e))?;
        if let Some(user) = &user {
            // The server user must be able to reach its data directory through ours.
            for d in [dir, root.as_path()] {
                std::fs::set_permissions(d, std::fs::Permissions::from_mode(0o755))
                    .map_err(|e| Error::io("open postgres dir", e))?;
            }
            chown(&data, Some(user.uid), Some(user.gid))
                .map_err(|e| Error::Postgres(format!("chown data dir: {e}")))?;
        }
        std::fs::set_permissions(&data, std::fs::Permissions::from_mode(0o700))
            .map_err(|e| Error::io("chmod data dir", e))?;

        let log = root.join("postgres.log");
        let log_file =
            std::fs::File::create(&log).map_err(|e| Error::io("create postgres log", e))?;
        let mut initdb = Command::new(bin.join("initdb"));
        initdb
            .arg("-D")
            .arg(&data)
            .args([
                "-U",
                "postgres",
                "--auth=trust",
                "--encoding=UTF8",
                "--no-sync",
                "--no-instructions",
            ])
            .current_dir(&root)
            .stdin(Stdio::null())
            .stdout(log_file.try_clone().map_err(|e| Error::io("log", e))?)
            .stderr(log_file);
        as_user(&mut initdb, user.as_ref());
        let status = initdb.status().map_err(|e| Error::io("run initdb", e))?;
        if !status.success() {
            return Err(Error::Postgres(format!(
                "initdb failed ({status}):\n{}",
                tail(&log, 20)
            )));
        }

        let port = wait::free_port()?;
        let mut server = Command::new(bin.join("postgres"));
        server
            .arg("-D")
            .arg(&data)
            .arg("-p")
            .arg(port.to_string())
            .current_dir(&root);
        for setting in [
            "listen_addresses=127.0.0.1",
            "unix_socket_directories=",
            // Throwaway data: trade durability for speed.
            "fsync=off",
            "synchronous_commit=off",
            "full_page_writes=off",
            "max_connections=300",
        ] {
            server.arg("-c").arg(setting);
        }
        as_user(&mut server, user.as_ref());
        let mut process = ManagedProcess::spawn("postgres", server, log)?;
        let url = format!("postgres://postgres@127.0.0.1:{port}/postgres");
        wait::until(
            "postgres to accept connections",
            Duration::from_secs(60),
            || process.check_running(),
            || {
                let url = url.clone();
                async move {
                    let conn = PgConnection::connect(&url)
                        .await
                        .map_err(|e| e.to_string())?;
                    let _ = conn.close().await;
                    Ok(true)
                }
            },
        )
        .await?;
        Ok(Self { process, port })
    }

    /// The loopback port the server listens on.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// The URL of database `db` as the superuser.
    pub fn url(&self, db: &str) -> String {
        format!("postgres://postgres@127.0.0.1:{}/{db}", self.port)
    }

    /// The server process.
    pub fn process(&self) -> &ManagedProcess {
        &self.process
    }

    /// Creates an empty database named `{prefix}_{random}`.
    pub async fn fresh_database(&self, prefix: &str) -> Result<TestDatabase, Error> {
        let suffix = uuid::Uuid::new_v4().simple().to_string();
        let name = format!(
            "{}_{}",
            prefix.replace(|c: char| !c.is_ascii_alphanumeric(), "_"),
            &suffix[..8]
        );
        let mut conn = PgConnection::connect(&self.url("postgres"))
            .await
            .map_err(|e| Error::Postgres(format!("connect: {e}")))?;
        conn.execute(format!("CREATE DATABASE \"{name}\"").as_str())
            .await
            .map_err(|e| Error::Postgres(format!("create database {name}: {e}")))?;
        let _ = conn.close().await;
        Ok(TestDatabase {
            url: self.url(&name),
            name,
        })
    }
}
