//! A Git server over smart HTTP on loopback, for GitOps engines under test: Git's own CGI
//! program, `git http-backend`, behind a small axum handler, serving every bare repository in a
//! temporary folder; and commits made into them.
//!
//! Written by hand (about fifty lines of CGI plumbing) because no maintained Rust crate serves
//! Git's smart HTTP protocol; the protocol itself is Git's, unchanged.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, HeaderName, HeaderValue, Method, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use tokio::io::AsyncWriteExt as _;

use crate::Error;

/// Bare repositories served at `http://127.0.0.1:{port}/{name}.git`, or over HTTPS with an
/// account on another address ([`GitServer::start_secured`]).
#[derive(Debug)]
pub struct GitServer {
    dir: tempfile::TempDir,
    base: String,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for GitServer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

fn git(dir: &Path, args: &[&str]) -> Result<String, Error> {
    let out = Command::new("git")
        .args([
            "-c",
            "user.name=kubenest tests",
            "-c",
            "user.email=tests@kubenest.invalid",
        ])
        .args(args)
        .current_dir(dir)
        .stdin(Stdio::null())
        .output()
        .map_err(|e| Error::io("run git", e))?;
    if !out.status.success() {
        return Err(Error::Process(format!(
            "git {}: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr)
        )));
    }
    Ok(String::from_utf8_lossy(&out.stdout).trim().to_owned())
}

impl GitServer {
    /// Serves an empty folder of repositories on a free loopback port.
    pub async fn start() -> Result<Self, Error> {
        let dir = tempfile::tempdir().map_err(|e| Error::io("git server folder", e))?;
        let root = dir.path().join("repos");
        std::fs::create_dir_all(&root).map_err(|e| Error::io("git repos folder", e))?;
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .map_err(|e| Error::io("bind the git server", e))?;
        let base = format!(
            "http://{}",
            listener
                .local_addr()
                .map_err(|e| Error::io("git address", e))?
        );
        let app = axum::Router::new().fallback(backend).with_state(Served {
            root,
            authorization: None,
        });
        let task = tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        Ok(Self { dir, base, task })
    }

    /// Serves an empty folder of repositories over HTTPS on `host` (a free port), with a
    /// serving certificate of `ca`, to the one account `username`/`password` (HTTP basic
    /// authentication; anyone else gets 401).
    pub async fn start_secured(
        host: std::net::IpAddr,
        ca: &crate::ServerCa,
        username: &str,
        password: &str,
    ) -> Result<Self, Error> {
        use base64::Engine as _;
        let dir = tempfile::tempdir().map_err(|e| Error::io("git server folder", e))?;
        let root = dir.path().join("repos");
        std::fs::create_dir_all(&root).map_err(|e| Error::io("git repos folder", e))?;
        let serving = ca.issue("git", &[host])?;
        let tls = axum_server::tls_rustls::RustlsConfig::from_pem_file(&serving.cert, &serving.key)
            .await
            .map_err(|e| Error::io("the git server's certificate", e))?;
        let listener = std::net::TcpListener::bind((host, 0))
            .map_err(|e| Error::io("bind the git server", e))?;
        let address = listener
            .local_addr()
            .map_err(|e| Error::io("git address", e))?;
        let token =
            base64::engine::general_purpose::STANDARD.encode(format!("{username}:{password}"));
        let app = axum::Router::new().fallback(backend).with_state(Served {
            root,
            authorization: Some(format!("Basic {token}")),
        });
        let server = axum_server::from_tcp_rustls(listener, tls)
            .map_err(|e| Error::io("serve the git server", e))?;
        let task = tokio::spawn(async move {
            let _ = server.serve(app.into_make_service()).await;
        });
        Ok(Self {
            dir,
            base: format!("https://{address}"),
            task,
        })
    }

    /// The clone URL of repository `name`.
    pub fn url(&self, name: &str) -> String {
        format!("{}/{name}.git", self.base)
    }

    /// Where bare repository `name` is on this machine, for a writer that pushes to it as a
    /// path while others fetch it over HTTP.
    pub fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join("repos").join(format!("{name}.git"))
    }

    /// Writes `files` (path, contents; `None` removes) into repository `name` (created on first
    /// use, branch `main`) and commits them; returns the commit's id.
    pub fn commit(
        &self,
        name: &str,
        files: &[(&str, Option<&str>)],
        message: &str,
    ) -> Result<String, Error> {
        let bare = self.dir.path().join("repos").join(format!("{name}.git"));
        let work = self.dir.path().join("work").join(name);
        if !bare.exists() {
            std::fs::create_dir_all(&work).map_err(|e| Error::io("git work tree", e))?;
            git(
                self.dir.path(),
                &[
                    "init",
                    "-q",
                    "--bare",
                    "-b",
                    "main",
                    &bare.to_string_lossy(),
                ],
            )?;
            git(&work, &["init", "-q", "-b", "main"])?;
            git(&work, &["remote", "add", "origin", &bare.to_string_lossy()])?;
        }
        for (path, contents) in files {
            let file = work.join(path);
            match contents {
                Some(text) => {
                    if let Some(parent) = file.parent() {
                        std::fs::create_dir_all(parent).map_err(|e| Error::io("git dir", e))?;
                    }
                    std::fs::write(&file, text).map_err(|e| Error::io("git file", e))?;
                }
                None => {
                    let _ = std::fs::remove_file(&file);
                }
            }
        }
        git(&work, &["add", "-A"])?;
        git(&work, &["commit", "-q", "--allow-empty", "-m", message])?;
        git(&work, &["push", "-q", "origin", "main"])?;
        git(&work, &["rev-parse", "HEAD"])
    }
}

/// Git over ssh to a [`GitServer`]'s repositories: OpenSSH's server, one key, and the URL form it
/// is reached by ([`GitServer::serve_ssh`], [`GitServer::serve_scp_like`]).
pub struct GitSsh {
    _process: crate::ManagedProcess,
    address: std::net::SocketAddr,
    form: SshForm,
    root: PathBuf,
    /// The client's private key (OpenSSH format), as a Git credential Secret holds it.
    pub private_key: String,
    /// The `known_hosts` line of the server's host key.
    pub known_hosts: String,
}

/// How a client names a repository on a [`GitSsh`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum SshForm {
    /// `ssh://root@host:port/absolute/path/name.git`.
    Url,
    /// Git's scp-like shorthand `git@host:name.git`: port 22 and user `git`, whose home is the
    /// repositories' folder (as on the common Git hosts).
    ScpLike,
}

impl std::fmt::Debug for GitSsh {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GitSsh")
            .field("address", &self.address)
            .field("form", &self.form)
            .finish_non_exhaustive()
    }
}

impl GitSsh {
    /// The clone URL of repository `name`, in this server's form.
    pub fn url(&self, name: &str) -> String {
        match self.form {
            SshForm::Url => format!(
                "ssh://root@{}{}/{name}.git",
                self.address,
                self.root.display()
            ),
            SshForm::ScpLike => format!("git@{}:{name}.git", self.address.ip()),
        }
    }
}

/// Makes an ed25519 key pair without a passphrase at `path` (and `path.pub`), as OpenSSH's
/// `ssh-keygen` does: for sshd's host keys and for test clients.
pub fn keygen(path: &Path) -> Result<(), Error> {
    let out = Command::new("ssh-keygen")
        .args([
            "-q",
            "-t",
            "ed25519",
            "-N",
            "",
            "-C",
            "kubenest-tests",
            "-f",
        ])
        .arg(path)
        .output()
        .map_err(|e| Error::io("run ssh-keygen", e))?;
    if !out.status.success() {
        return Err(Error::Process(format!(
            "ssh-keygen: {}",
            String::from_utf8_lossy(&out.stderr)
        )));
    }
    Ok(())
}

impl GitServer {
    /// Serves the repositories over ssh too, on `host` (a free port), as `ssh://` URLs: OpenSSH's
    /// `sshd` with a fresh host key and one authorized client key, public-key login only (as
    /// root, since the test runs as root; `git-upload-pack` is what the clients run).
    /// tools/setup.sh installs `openssh-server`.
    pub async fn serve_ssh(&self, host: std::net::IpAddr) -> Result<GitSsh, Error> {
        self.start_sshd(host, SshForm::Url).await
    }

    /// Serves the repositories over ssh on `host` port 22 for user `git`, so that Git's scp-like
    /// `git@host:name.git` reaches them. There is no `git` account on the machine: `sshd` runs in
    /// a mount namespace of its own (`unshare`, as root) where `/etc/passwd` is a copy with a
    /// line for `git` (uid 0, home the repositories' folder); the machine's files are untouched.
    /// Errs if something else holds port 22 on `host`.
    pub async fn serve_scp_like(&self, host: std::net::IpAddr) -> Result<GitSsh, Error> {
        self.start_sshd(host, SshForm::ScpLike).await
    }

    async fn start_sshd(&self, host: std::net::IpAddr, form: SshForm) -> Result<GitSsh, Error> {
        let root = self.dir.path().join("repos");
        let dir = self.dir.path().join(match form {
            SshForm::Url => "ssh",
            SshForm::ScpLike => "ssh-scp",
        });
        std::fs::create_dir_all(&dir).map_err(|e| Error::io("ssh folder", e))?;
        keygen(&dir.join("host_key"))?;
        keygen(&dir.join("client_key"))?;
        std::fs::copy(dir.join("client_key.pub"), dir.join("authorized_keys"))
            .map_err(|e| Error::io("authorized_keys", e))?;
        let port = match form {
            SshForm::Url => crate::free_port()?,
            SshForm::ScpLike => 22,
        };
        let address = std::net::SocketAddr::new(host, port);
        if form == SshForm::ScpLike {
            std::net::TcpListener::bind(address).map_err(|e| {
                Error::io(
                    format!("port 22 on {host}, which git@host:path URLs need, is taken"),
                    e,
                )
            })?;
        }
        let config = dir.join("sshd_config");
        std::fs::write(
            &config,
            format!(
                "ListenAddress {address}\nHostKey {d}/host_key\nAuthorizedKeysFile {d}/authorized_keys\n\
                 PidFile {d}/sshd.pid\nPermitRootLogin prohibit-password\nPasswordAuthentication no\n\
                 KbdInteractiveAuthentication no\nUsePAM no\nStrictModes no\nAllowTcpForwarding no\n\
                 X11Forwarding no\nPermitTTY no\n",
                d = dir.display()
            ),
        )
        .map_err(|e| Error::io("sshd_config", e))?;
        // sshd wants its privilege-separation folder; Debian's is /run/sshd.
        std::fs::create_dir_all("/run/sshd").map_err(|e| Error::io("/run/sshd", e))?;
        let command = match form {
            SshForm::Url => {
                let mut command = Command::new("/usr/sbin/sshd");
                command.args(["-D", "-e", "-f"]).arg(&config);
                command
            }
            SshForm::ScpLike => {
                let machine = std::fs::read_to_string("/etc/passwd")
                    .map_err(|e| Error::io("read /etc/passwd", e))?;
                let mut passwd: String = machine
                    .lines()
                    .filter(|line| !line.starts_with("git:"))
                    .map(|line| format!("{line}\n"))
                    .collect();
                passwd.push_str(&format!(
                    "git:x:0:0:kubenest tests:{}:/bin/sh\n",
                    root.display()
                ));
                let passwd_file = dir.join("passwd");
                std::fs::write(&passwd_file, passwd).map_err(|e| Error::io("passwd", e))?;
                // `unshare` and `sh` exec, so the managed process is sshd itself.
                let mut command = Command::new("unshare");
                command.args(["--mount", "--propagation", "private", "sh", "-c"]);
                command.arg(format!(
                    "mount --bind '{}' /etc/passwd && exec /usr/sbin/sshd -D -e -f '{}'",
                    passwd_file.display(),
                    config.display()
                ));
                command
            }
        };
        let process = crate::ManagedProcess::spawn("sshd", command, dir.join("sshd.log"))?;
        crate::wait::until(
            "sshd listening",
            std::time::Duration::from_secs(10),
            || Ok(()),
            || async move {
                tokio::net::TcpStream::connect(address)
                    .await
                    .map(|_| true)
                    .map_err(|e| e.to_string())
            },
        )
        .await?;
        let read = |name: &str| {
            std::fs::read_to_string(dir.join(name))
                .map_err(|e| Error::io(format!("read {name}"), e))
        };
        let host_key = read("host_key.pub")?;
        let mut key = host_key.split_whitespace();
        // known_hosts names a host on port 22 bare, any other port as [host]:port.
        let known_host = match port {
            22 => host.to_string(),
            _ => format!("[{host}]:{port}"),
        };
        let known_hosts = format!(
            "{known_host} {} {}\n",
            key.next().unwrap_or_default(),
            key.next().unwrap_or_default()
        );
        Ok(GitSsh {
            _process: process,
            address,
            form,
            root,
            private_key: read("client_key")?,
            known_hosts,
        })
    }
}

/// What the server serves, and to whom.
#[derive(Debug, Clone)]
struct Served {
    root: PathBuf,
    /// The `Authorization` header every request must carry, if any.
    authorization: Option<String>,
}

/// One request through `git http-backend` (CGI/1.1: the request in environment variables and
/// standard input, the answer as header lines, a blank line and the body on standard output).
async fn backend(
    State(served): State<Served>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    if let Some(expected) = &served.authorization {
        let given = headers.get(axum::http::header::AUTHORIZATION);
        if given.and_then(|v| v.to_str().ok()) != Some(expected.as_str()) {
            return (
                StatusCode::UNAUTHORIZED,
                [(axum::http::header::WWW_AUTHENTICATE, "Basic realm=\"git\"")],
            )
                .into_response();
        }
    }
    let root = served.root;
    let header = |name: &str| {
        headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
            .to_owned()
    };
    let child = tokio::process::Command::new("git")
        .arg("http-backend")
        .env("GIT_PROJECT_ROOT", &root)
        .env("GIT_HTTP_EXPORT_ALL", "1")
        .env("REQUEST_METHOD", method.as_str())
        .env("PATH_INFO", uri.path())
        .env("QUERY_STRING", uri.query().unwrap_or_default())
        .env("CONTENT_TYPE", header("content-type"))
        .env("CONTENT_LENGTH", body.len().to_string())
        .env("HTTP_CONTENT_ENCODING", header("content-encoding"))
        .env("GIT_PROTOCOL", header("git-protocol"))
        .env("REMOTE_ADDR", "127.0.0.1")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn();
    let mut child = match child {
        Ok(child) => child,
        Err(e) => return (StatusCode::INTERNAL_SERVER_ERROR, e.to_string()).into_response(),
    };
    if let Some(mut stdin) = child.stdin.take() {
        let _ = stdin.write_all(&body).await;
    }
    let output = match child.wait_with_output().await {
        Ok(output) => output.stdout,
        Err(e) => return (StatusCode::INTERNAL_SERVER_ERROR, e.to_string()).into_response(),
    };
    let split = output
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .map(|at| (at, 4))
        .or_else(|| {
            output
                .windows(2)
                .position(|w| w == b"\n\n")
                .map(|at| (at, 2))
        });
    let Some((at, gap)) = split else {
        return (
            StatusCode::BAD_GATEWAY,
            "git http-backend answered no headers",
        )
            .into_response();
    };
    let mut status = StatusCode::OK;
    let mut response_headers = HeaderMap::new();
    for line in String::from_utf8_lossy(&output[..at]).lines() {
        let Some((name, value)) = line.split_once(':') else {
            continue;
        };
        let value = value.trim();
        if name.eq_ignore_ascii_case("status") {
            status = value
                .split_whitespace()
                .next()
                .and_then(|code| code.parse().ok())
                .and_then(|code| StatusCode::from_u16(code).ok())
                .unwrap_or(StatusCode::BAD_GATEWAY);
        } else if let (Ok(name), Ok(value)) = (
            HeaderName::try_from(name.trim()),
            HeaderValue::try_from(value),
        ) {
            response_headers.insert(name, value);
        }
    }
    (status, response_headers, output[at + gap..].to_vec()).into_response()
}
