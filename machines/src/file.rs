//! The machines file: which machines a cluster is installed on and how to reach them over SSH.
//! `kubenest-dev machines up` writes one for its local machines; `kubenest install --machines
//! FILE` is to read it. Reading checks every field and names the one that is wrong.
//!
//! ```yaml
//! machines:
//!   - name: kn-machine-1
//!     address: 10.250.0.11
//!     ssh_port: 22
//!     ssh_user: root
//!     ssh_key_file: /var/lib/kubenest-machines/ssh/id_ed25519
//!     role: control-plane
//! known_hosts_file: /var/lib/kubenest-machines/ssh/known_hosts
//! ```

use std::net::IpAddr;
use std::path::PathBuf;

use serde::{Deserialize, Serialize};

/// The whole file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MachinesFile {
    pub machines: Vec<MachineEntry>,
    /// The machines' host keys (`known_hosts` format), when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub known_hosts_file: Option<PathBuf>,
}

/// One machine.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MachineEntry {
    pub name: String,
    pub address: IpAddr,
    pub ssh_port: u16,
    pub ssh_user: String,
    /// The private key's path (absolute).
    pub ssh_key_file: PathBuf,
    pub role: Role,
}

/// What a machine is in the cluster.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Role {
    ControlPlane,
    Worker,
}

/// What is wrong with a machines file; `field` is its path in the file (`machines[1].address`).
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum FileError {
    #[error("the machines file is not valid YAML of the expected shape: {0}")]
    Syntax(String),
    #[error("{field}: {reason}")]
    Field { field: String, reason: String },
}

fn field(path: String, reason: impl Into<String>) -> FileError {
    FileError::Field {
        field: path,
        reason: reason.into(),
    }
}

/// A name a machine may have: a DNS label (it becomes a hostname and a Node's name).
fn valid_name(name: &str) -> bool {
    (1..=63).contains(&name.len())
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && !name.starts_with('-')
        && !name.ends_with('-')
}

/// A user name sshd and `ssh user@host` accept without quoting, never read as a flag.
fn valid_user(user: &str) -> bool {
    (1..=32).contains(&user.len())
        && user
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_' || b == b'-')
        && !user.starts_with('-')
}

impl MachinesFile {
    /// Reads a machines file's text and checks it.
    pub fn parse(text: &str) -> Result<Self, FileError> {
        let file: Self =
            serde_yaml::from_str(text).map_err(|e| FileError::Syntax(e.to_string()))?;
        file.check()?;
        Ok(file)
    }

    /// The file as YAML.
    pub fn to_yaml(&self) -> Result<String, FileError> {
        serde_yaml::to_string(self).map_err(|e| FileError::Syntax(e.to_string()))
    }

    /// Every machine named once, with a DNS-label name, an address and port reachable, a user,
    /// an absolute key path, and one control plane at least.
    pub fn check(&self) -> Result<(), FileError> {
        if self.machines.is_empty() {
            return Err(field("machines".into(), "lists no machine"));
        }
        for (i, m) in self.machines.iter().enumerate() {
            let at = |name: &str| format!("machines[{i}].{name}");
            if !valid_name(&m.name) {
                return Err(field(
                    at("name"),
                    format!(
                        "{:?} is not a DNS label (a-z, 0-9, '-', at most 63)",
                        m.name
                    ),
                ));
            }
            if self.machines[..i].iter().any(|o| o.name == m.name) {
                return Err(field(at("name"), format!("{:?} is named twice", m.name)));
            }
            if m.address.is_unspecified() || m.address.is_multicast() {
                return Err(field(
                    at("address"),
                    format!("{} is no machine's", m.address),
                ));
            }
            if m.ssh_port == 0 {
                return Err(field(at("ssh_port"), "0 is no port"));
            }
            if !valid_user(&m.ssh_user) {
                return Err(field(
                    at("ssh_user"),
                    format!("{:?} is not a user name", m.ssh_user),
                ));
            }
            if !m.ssh_key_file.is_absolute() {
                return Err(field(at("ssh_key_file"), "must be an absolute path"));
            }
        }
        if let Some(path) = &self.known_hosts_file
            && !path.is_absolute()
        {
            return Err(field("known_hosts_file".into(), "must be an absolute path"));
        }
        if !self.machines.iter().any(|m| m.role == Role::ControlPlane) {
            return Err(field(
                "machines".into(),
                "no machine has the role control-plane",
            ));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const GOOD: &str = "\
machines:
  - name: kn-machine-1
    address: 10.250.0.11
    ssh_port: 22
    ssh_user: root
    ssh_key_file: /var/lib/kubenest-machines/ssh/id_ed25519
    role: control-plane
  - name: kn-machine-2
    address: 10.250.0.12
    ssh_port: 22
    ssh_user: root
    ssh_key_file: /var/lib/kubenest-machines/ssh/id_ed25519
    role: worker
";

    #[test]
    fn a_written_file_reads_back() {
        let file = MachinesFile::parse(GOOD).unwrap();
        assert_eq!(file.machines[1].role, Role::Worker);
        assert_eq!(MachinesFile::parse(&file.to_yaml().unwrap()).unwrap(), file);
    }

    fn error_of(from: &str, to: &str) -> FileError {
        MachinesFile::parse(&GOOD.replacen(from, to, 1)).unwrap_err()
    }

    fn field_of(error: FileError) -> String {
        match error {
            FileError::Field { field, .. } => field,
            FileError::Syntax(e) => panic!("a syntax error: {e}"),
        }
    }

    #[test]
    fn each_wrong_value_is_named_by_its_field() {
        let cases = [
            ("name: kn-machine-1", "name: '--oops'", "machines[0].name"),
            (
                "name: kn-machine-2",
                "name: kn-machine-1",
                "machines[1].name",
            ),
            (
                "address: 10.250.0.12",
                "address: 0.0.0.0",
                "machines[1].address",
            ),
            ("ssh_port: 22", "ssh_port: 0", "machines[0].ssh_port"),
            (
                "ssh_user: root",
                "ssh_user: '-oProxyCommand=x'",
                "machines[0].ssh_user",
            ),
            (
                "ssh_key_file: /var",
                "ssh_key_file: var",
                "machines[0].ssh_key_file",
            ),
            ("role: control-plane", "role: worker", "machines"),
        ];
        for (from, to, expected) in cases {
            assert_eq!(field_of(error_of(from, to)), expected, "{to}");
        }
    }

    #[test]
    fn an_unknown_field_or_role_or_a_bad_address_is_refused() {
        assert!(matches!(
            error_of("role: worker", "role: boss"),
            FileError::Syntax(_)
        ));
        assert!(matches!(
            error_of("ssh_port: 22", "ssh_port: 22\n    password: x"),
            FileError::Syntax(_)
        ));
        assert!(matches!(
            error_of("address: 10.250.0.11", "address: 10.250.0.300"),
            FileError::Syntax(_)
        ));
        assert_eq!(
            MachinesFile::parse("machines: []\n").unwrap_err(),
            field("machines".into(), "lists no machine")
        );
    }
}
