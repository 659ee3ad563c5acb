//! Each machine's own sshd: host keys of its own, root let in with one authorized key, listening
//! on the machine's address only; and whether it answers.

use std::io::Read;
use std::net::{SocketAddr, TcpStream};
use std::path::Path;
use std::time::{Duration, Instant};

use kubenest_runtime::exec::Program;

use crate::machine::checked;
use crate::{Error, Machine};

/// Where the authorized key sits inside each machine (its own `/etc`).
pub const AUTHORIZED_KEYS: &str = "/etc/kubenest/ssh/authorized_keys";
/// The machine's host key (ed25519 only: an RSA key takes seconds to make on a busy host).
const HOST_KEY: &str = "/etc/ssh/ssh_host_ed25519_key";
/// The port sshd listens on, on the machine's address.
pub const PORT: u16 = 22;
/// How long a started sshd has to answer.
const ANSWER_TIMEOUT: Duration = Duration::from_secs(15);

/// Makes an ed25519 key pair at `key` (private, mode 600) and `key.pub`; returns the public line.
pub async fn keygen(key: &Path) -> Result<String, Error> {
    if let Some(dir) = key.parent() {
        std::fs::create_dir_all(dir)
            .map_err(|e| Error::io(format!("create {}", dir.display()), e))?;
    }
    for old in [key.to_path_buf(), key.with_extension("pub")] {
        match std::fs::remove_file(&old) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                return Err(Error::io(format!("remove {}", old.display()), e));
            }
            _ => {}
        }
    }
    let keygen = Program::new("/usr/bin/ssh-keygen")
        .arg("-q")
        .arg("-t")
        .arg("ed25519")
        .arg("-N")
        .arg("")
        .arg("-C")
        .arg("kubenest-machines")
        .arg("-f")
        .path(key);
    checked("the host", "ssh-keygen", keygen.run().await?)?;
    let public = key.with_extension("pub");
    std::fs::read_to_string(&public)
        .map(|line| line.trim().to_owned())
        .map_err(|e| Error::io(format!("read {}", public.display()), e))
}

impl Machine {
    /// Gives the machine a host key of its own (the host's show through the `/etc` overlay and
    /// are dropped) and `authorized_key` (an OpenSSH public key line) for root; returns the
    /// arguments that start its sshd on the machine's address.
    pub async fn prepare_sshd(&self, authorized_key: &str) -> Result<Vec<String>, Error> {
        let keygen = format!(
            "rm -f /etc/ssh/ssh_host_*_key* && ssh-keygen -q -t ed25519 -N '' -f {HOST_KEY}"
        );
        self.run("sh", &["-c", &keygen]).await?;
        self.run("mkdir", &["-p", "-m", "0755", "/run/sshd"])
            .await?;
        self.write(AUTHORIZED_KEYS, &format!("{}\n", authorized_key.trim()))?;
        Ok(vec![
            "-o".to_owned(),
            format!("ListenAddress={}:{PORT}", self.address),
            "-o".to_owned(),
            format!("AuthorizedKeysFile={AUTHORIZED_KEYS}"),
            "-o".to_owned(),
            "PidFile=/run/sshd.pid".to_owned(),
            "-o".to_owned(),
            format!("HostKey={HOST_KEY}"),
        ])
    }

    /// Starts the machine's sshd as a daemon of the machine (it outlives this process; its log
    /// is the machine's `/var/log/sshd.log`) and waits until it answers.
    pub async fn start_sshd(&self, authorized_key: &str) -> Result<(), Error> {
        let mut args = self.prepare_sshd(authorized_key).await?;
        args.extend(["-E".to_owned(), "/var/log/sshd.log".to_owned()]);
        self.run("/usr/sbin/sshd", &args).await?;
        let deadline = Instant::now() + ANSWER_TIMEOUT;
        while !self.sshd_answers() {
            if Instant::now() > deadline {
                return Err(Error::failed(
                    &self.name,
                    format!("its sshd does not answer on {}:{PORT}", self.address),
                ));
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        Ok(())
    }

    /// The machine's host key as a `known_hosts` line (`ADDRESS ssh-ed25519 KEY`).
    pub fn known_host(&self) -> Result<String, Error> {
        let path = self.path(&format!("{HOST_KEY}.pub"));
        let text = std::fs::read_to_string(&path)
            .map_err(|e| Error::io(format!("{}: read its host key", self.name), e))?;
        let mut words = text.split_whitespace();
        match (words.next(), words.next()) {
            (Some(kind), Some(key)) => Ok(format!("{} {kind} {key}", self.address)),
            _ => Err(Error::failed(&self.name, "its host key is malformed")),
        }
    }

    /// Whether an SSH server answers on the machine's address: it sends its `SSH-2.0-`
    /// identification within two seconds.
    pub fn sshd_answers(&self) -> bool {
        let address = SocketAddr::from((self.address, PORT));
        let timeout = Duration::from_secs(2);
        let Ok(mut stream) = TcpStream::connect_timeout(&address, timeout) else {
            return false;
        };
        let mut banner = [0u8; 8];
        stream.set_read_timeout(Some(timeout)).is_ok()
            && stream.read_exact(&mut banner).is_ok()
            && banner == *b"SSH-2.0-"
    }
}
