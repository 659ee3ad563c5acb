//! The machines file `kubenest install --machines FILE` reads (and `kubenest-dev machines up`
//! writes, with the machines' host keys in `known_hosts`): every machine's name, address, SSH port, user and key, and its roles. Checked as a
//! door: every value that will reach `ssh`'s command line is refused, naming its field, unless
//! it can only be what it says.
//!
//! ```yaml
//! machines:
//!   - name: machine-1
//!     address: 10.250.0.11
//!     port: 22
//!     user: root
//!     key_file: /var/lib/kubenest-machines/id_ed25519
//!     roles: [control-plane]
//!   - name: machine-2
//!     address: 10.250.0.12
//!     key_file: /var/lib/kubenest-machines/id_ed25519
//!     roles: [worker]
//! ```

use std::collections::BTreeSet;
use std::net::IpAddr;
use std::path::PathBuf;

use crate::names;
use serde::{Deserialize, Serialize};

/// The most machines one file may list.
pub const MAX_MACHINES: usize = 200;

/// A machines file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MachinesFile {
    pub machines: Vec<Machine>,
    /// The machines' host keys (`known_hosts` format, an absolute path), when they are known:
    /// SSH then holds to them from the first connection.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub known_hosts: Option<PathBuf>,
}

/// One machine and how to reach it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Machine {
    /// Its name, which becomes its node's name: a DNS label.
    pub name: String,
    /// An IP address or a DNS name.
    pub address: String,
    #[serde(default = "default_port")]
    pub port: u16,
    #[serde(default = "default_user")]
    pub user: String,
    /// The private key SSH logs in with, by absolute path.
    pub key_file: PathBuf,
    pub roles: Vec<Role>,
}

fn default_port() -> u16 {
    22
}

fn default_user() -> String {
    "root".to_owned()
}

/// What a machine runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Role {
    /// etcd, the API server, the controller manager and the scheduler (and a kubelet).
    ControlPlane,
    /// A kubelet for workloads.
    Worker,
}

/// A value of the file refused: which field and why.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{field}: {reason}")]
pub struct FileError {
    /// The field's path: `machines[1].address`.
    pub field: String,
    pub reason: String,
}

fn refuse(field: impl Into<String>, reason: impl Into<String>) -> FileError {
    FileError {
        field: field.into(),
        reason: reason.into(),
    }
}

impl MachinesFile {
    /// Reads and checks a machines file's text.
    pub fn parse(text: &str) -> Result<Self, FileError> {
        let file: MachinesFile = serde_yaml::from_str(text).map_err(|e| {
            let field = e
                .location()
                .map(|l| format!("line {}", l.line()))
                .unwrap_or_else(|| "machines".to_owned());
            refuse(field, e.to_string())
        })?;
        file.check()?;
        Ok(file)
    }

    /// Every rule of the file, the first broken one named.
    pub fn check(&self) -> Result<(), FileError> {
        if self.machines.is_empty() {
            return Err(refuse("machines", "lists no machine"));
        }
        if self.known_hosts.as_ref().is_some_and(|k| !k.is_absolute()) {
            return Err(refuse("known_hosts", "is an absolute path"));
        }
        if self.machines.len() > MAX_MACHINES {
            return Err(refuse(
                "machines",
                format!("lists {}, at most {MAX_MACHINES}", self.machines.len()),
            ));
        }
        let mut seen = BTreeSet::new();
        for (i, machine) in self.machines.iter().enumerate() {
            machine.check(&format!("machines[{i}]"))?;
            if !seen.insert(machine.name.as_str()) {
                return Err(refuse(
                    format!("machines[{i}].name"),
                    format!("{} names two machines", machine.name),
                ));
            }
        }
        if !self
            .machines
            .iter()
            .any(|m| m.roles.contains(&Role::ControlPlane))
        {
            return Err(refuse(
                "machines",
                "no machine has the control-plane role: a cluster needs one",
            ));
        }
        Ok(())
    }

    /// The file's YAML text.
    pub fn to_yaml(&self) -> Result<String, serde_yaml::Error> {
        serde_yaml::to_string(self)
    }

    /// The machines with `role`.
    pub fn with_role(&self, role: Role) -> impl Iterator<Item = &Machine> {
        self.machines
            .iter()
            .filter(move |m| m.roles.contains(&role))
    }
}

impl Machine {
    fn check(&self, at: &str) -> Result<(), FileError> {
        if !names::is_dns_label(&self.name) {
            return Err(refuse(
                format!("{at}.name"),
                "is a DNS label: lowercase letters, digits and '-', at most 63",
            ));
        }
        if self.address.parse::<IpAddr>().is_err() && !names::is_dns_subdomain(&self.address) {
            return Err(refuse(
                format!("{at}.address"),
                "is an IP address or a DNS name",
            ));
        }
        if self.port == 0 {
            return Err(refuse(format!("{at}.port"), "is from 1 to 65535"));
        }
        let user_ok = self.user.len() <= 32
            && self
                .user
                .chars()
                .next()
                .is_some_and(|c| c.is_ascii_lowercase() || c == '_')
            && self
                .user
                .chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_' || c == '-');
        if !user_ok {
            return Err(refuse(
                format!("{at}.user"),
                "is a Unix account name: a lowercase letter or '_', then letters, digits, '_' or '-'",
            ));
        }
        if !self.key_file.is_absolute() {
            return Err(refuse(format!("{at}.key_file"), "is an absolute path"));
        }
        if self.roles.is_empty() {
            return Err(refuse(
                format!("{at}.roles"),
                "names control-plane, worker or both",
            ));
        }
        let unique: BTreeSet<_> = self.roles.iter().collect();
        if unique.len() != self.roles.len() {
            return Err(refuse(format!("{at}.roles"), "names a role twice"));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const GOOD: &str = "machines:
  - {name: m1, address: 10.250.0.11, key_file: /k, roles: [control-plane]}
  - {name: m2, address: node-2.example.com, port: 2222, user: admin, key_file: /k, roles: [worker]}
";

    #[test]
    fn a_good_file_reads_with_its_defaults() {
        let file = MachinesFile::parse(GOOD).unwrap();
        assert_eq!(file.machines[0].port, 22);
        assert_eq!(file.machines[0].user, "root");
        assert_eq!(file.machines[1].port, 2222);
        assert_eq!(file.with_role(Role::Worker).count(), 1);
    }

    #[test]
    fn every_bad_value_is_refused_naming_its_field() {
        let cases = [
            ("name: m1", "name: -m1", "machines[0].name"),
            (
                "address: 10.250.0.11",
                "address: -oProxyCommand=x",
                "machines[0].address",
            ),
            (
                "address: 10.250.0.11",
                "address: 'a b'",
                "machines[0].address",
            ),
            (
                "key_file: /k, roles: [c",
                "key_file: k, roles: [c",
                "machines[0].key_file",
            ),
            ("user: admin", "user: -l", "machines[1].user"),
            ("user: admin", "user: Adm", "machines[1].user"),
            ("port: 2222", "port: 0", "machines[1].port"),
            ("roles: [worker]", "roles: []", "machines[1].roles"),
            (
                "roles: [worker]",
                "roles: [worker, worker]",
                "machines[1].roles",
            ),
            ("name: m2", "name: m1", "machines[1].name"),
            ("roles: [control-plane]", "roles: [worker]", "machines"),
        ];
        for (from, to, field) in cases {
            assert!(GOOD.contains(from), "{from}");
            let text = GOOD.replacen(from, to, 1);
            let refused = MachinesFile::parse(&text).unwrap_err();
            assert_eq!(refused.field, field, "{to}: {refused}");
        }
        let unknown = GOOD.replacen("port: 2222", "prot: 2222", 1);
        assert!(
            MachinesFile::parse(&unknown)
                .unwrap_err()
                .reason
                .contains("prot")
        );
        assert_eq!(
            MachinesFile::parse("machines: []").unwrap_err().field,
            "machines"
        );
    }
}
