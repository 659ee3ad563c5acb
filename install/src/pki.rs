//! The `pki` stage: the cluster's certificate authorities and certificates, in kubeadm's layout
//! under `/etc/kubernetes/pki` (the layout operators know), made once where the install runs
//! and kept in its state folder, then handed to each machine as its roles need them. Running it
//! again reuses every authority and key (a cluster keeps its identity), makes certificates only
//! for machines that are new or whose address changed, and copies nothing that is in place.
//!
//! ECDSA P-256 throughout (rcgen). Keys are written and copied with mode 0600.

use std::collections::BTreeMap;
use std::io::Write as _;
use std::os::unix::fs::OpenOptionsExt as _;
use std::path::{Path, PathBuf};
use std::time::Duration;

use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
    KeyUsagePurpose,
};
use sha2::{Digest, Sha256};

use crate::files::{self, Pushed, Remote, Wanted};
use crate::machines::{Machine, MachinesFile, Role};
use crate::ssh::Ssh;
use crate::stage::{FailureCode, Stage, StageFailure};

/// The stage's deadline for one machine.
pub const DEADLINE: Duration = Duration::from_secs(60);

/// How long an authority is valid (kubeadm's ten years), and a certificate it signs (a year).
pub const AUTHORITY_DAYS: i64 = 3650;
pub const CERTIFICATE_DAYS: i64 = 365;

/// The address of the `kubernetes` Service (the first of the service range 10.96.0.0/16).
pub const SERVICE_IP: &str = "10.96.0.1";

const REMOTE: Remote = Remote {
    folders: &[
        ("", "/etc/kubernetes/pki"),
        ("etcd", "/etc/kubernetes/pki/etcd"),
    ],
    list: "sh -c 'mkdir -p -m 0700 /etc/kubernetes/pki/etcd && cd /etc/kubernetes/pki && \
           find . -type f -exec sha256sum {} +'",
};

/// The three authorities: name (file stem) and common name.
const AUTHORITIES: [(&str, &str); 3] = [
    ("ca", "kubernetes"),
    ("front-proxy-ca", "front-proxy-ca"),
    ("etcd/ca", "etcd-ca"),
];

/// The cluster-wide client certificates: file stem, the authority that signs it, common name,
/// organization.
const CLIENTS: [(&str, &str, &str, Option<&str>); 7] = [
    (
        "apiserver-kubelet-client",
        "ca",
        "kube-apiserver-kubelet-client",
        Some("system:masters"),
    ),
    (
        "front-proxy-client",
        "front-proxy-ca",
        "front-proxy-client",
        None,
    ),
    (
        "apiserver-etcd-client",
        "etcd/ca",
        "kube-apiserver-etcd-client",
        None,
    ),
    ("admin", "ca", "kubernetes-admin", Some("system:masters")),
    (
        "controller-manager",
        "ca",
        "system:kube-controller-manager",
        None,
    ),
    ("scheduler", "ca", "system:kube-scheduler", None),
    ("kube-proxy", "ca", "system:kube-proxy", None),
];

/// What a control plane machine gets of the cluster-wide files (its own certificates too).
const CONTROL_PLANE_FILES: [&str; 20] = [
    "ca.crt",
    "ca.key",
    "front-proxy-ca.crt",
    "front-proxy-ca.key",
    "etcd/ca.crt",
    "etcd/ca.key",
    "sa.key",
    "sa.pub",
    "apiserver-kubelet-client.crt",
    "apiserver-kubelet-client.key",
    "front-proxy-client.crt",
    "front-proxy-client.key",
    "apiserver-etcd-client.crt",
    "apiserver-etcd-client.key",
    "controller-manager.crt",
    "controller-manager.key",
    "scheduler.crt",
    "scheduler.key",
    "kube-proxy.crt",
    "kube-proxy.key",
];

/// What every other machine gets: the CA to trust and kube-proxy's identity.
const NODE_FILES: [&str; 3] = ["ca.crt", "kube-proxy.crt", "kube-proxy.key"];

/// The cluster's PKI as kept in the install's state folder: `cluster/` for what the whole
/// cluster shares, `machines/NAME/` for each control plane machine's own.
#[derive(Debug, Clone)]
pub struct ClusterPki {
    dir: PathBuf,
}

fn failure(message: impl Into<String>) -> StageFailure {
    StageFailure::new(Stage::Pki, FailureCode::Configuration, message)
}

fn rcgen_failure(what: &str) -> impl FnOnce(rcgen::Error) -> StageFailure + '_ {
    move |e| failure(format!("{what}: {e}"))
}

/// Writes `text` to `path` (mode 0600 for a key), making folders.
fn write(path: &Path, text: &str, key: bool) -> Result<(), StageFailure> {
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent)
            .map_err(|e| failure(format!("{}: {e}", parent.display())))?;
    }
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(if key { 0o600 } else { 0o644 })
        .open(path)
        .map_err(|e| failure(format!("{}: {e}", path.display())))?;
    file.write_all(text.as_bytes())
        .map_err(|e| failure(format!("{}: {e}", path.display())))
}

fn read(path: &Path) -> Result<String, StageFailure> {
    std::fs::read_to_string(path).map_err(|e| failure(format!("{}: {e}", path.display())))
}

/// An authority's parameters, rebuilt the same way every time from its common name: what signs
/// with it later needs only these and its key.
fn authority_params(common_name: &str) -> Result<CertificateParams, StageFailure> {
    let mut params =
        CertificateParams::new(Vec::<String>::new()).map_err(rcgen_failure(common_name))?;
    params
        .distinguished_name
        .push(DnType::CommonName, common_name);
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    params.key_usages = vec![
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::CrlSign,
        KeyUsagePurpose::DigitalSignature,
    ];
    params.not_after = time::OffsetDateTime::now_utc() + time::Duration::days(AUTHORITY_DAYS);
    Ok(params)
}

impl ClusterPki {
    /// Makes what is missing of the cluster's PKI in `dir` for the machines of `file`, reusing
    /// everything already there.
    pub fn ensure(dir: &Path, file: &MachinesFile) -> Result<Self, StageFailure> {
        let pki = Self {
            dir: dir.to_owned(),
        };
        let cluster = dir.join("cluster");
        for (stem, common_name) in AUTHORITIES {
            let cert = cluster.join(format!("{stem}.crt"));
            if cert.is_file() {
                continue;
            }
            let key = KeyPair::generate().map_err(rcgen_failure(stem))?;
            let signed = authority_params(common_name)?
                .self_signed(&key)
                .map_err(rcgen_failure(stem))?;
            write(
                &cluster.join(format!("{stem}.key")),
                &key.serialize_pem(),
                true,
            )?;
            write(&cert, &signed.pem(), false)?;
        }
        if !cluster.join("sa.key").is_file() {
            let key = KeyPair::generate().map_err(rcgen_failure("sa"))?;
            write(&cluster.join("sa.pub"), &key.public_key_pem(), false)?;
            write(&cluster.join("sa.key"), &key.serialize_pem(), true)?;
        }
        for (stem, authority, common_name, organization) in CLIENTS {
            if cluster.join(format!("{stem}.crt")).is_file() {
                continue;
            }
            let mut params =
                CertificateParams::new(Vec::<String>::new()).map_err(rcgen_failure(stem))?;
            params
                .distinguished_name
                .push(DnType::CommonName, common_name);
            if let Some(organization) = organization {
                params
                    .distinguished_name
                    .push(DnType::OrganizationName, organization);
            }
            params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
            pki.sign(&cluster, stem, authority, params)?;
        }
        let addresses: Vec<&str> = file
            .with_role(Role::ControlPlane)
            .map(|m| m.address.as_str())
            .collect();
        for machine in file.with_role(Role::ControlPlane) {
            pki.ensure_machine(machine, &addresses)?;
        }
        Ok(pki)
    }

    /// Signs `params` with `authority` into `dir/{stem}.crt` and `.key`.
    fn sign(
        &self,
        dir: &Path,
        stem: &str,
        authority: &str,
        mut params: CertificateParams,
    ) -> Result<(), StageFailure> {
        let cluster = self.dir.join("cluster");
        let common_name = AUTHORITIES
            .iter()
            .find(|(s, _)| *s == authority)
            .map(|(_, cn)| *cn)
            .ok_or_else(|| failure(format!("no authority {authority}")))?;
        let authority_key = KeyPair::from_pem(&read(&cluster.join(format!("{authority}.key")))?)
            .map_err(rcgen_failure(authority))?;
        let issuer = Issuer::new(authority_params(common_name)?, authority_key);
        params.key_usages = vec![
            KeyUsagePurpose::DigitalSignature,
            KeyUsagePurpose::KeyEncipherment,
        ];
        params.not_after = time::OffsetDateTime::now_utc() + time::Duration::days(CERTIFICATE_DAYS);
        let key = KeyPair::generate().map_err(rcgen_failure(stem))?;
        let cert = params
            .signed_by(&key, &issuer)
            .map_err(rcgen_failure(stem))?;
        write(&dir.join(format!("{stem}.key")), &key.serialize_pem(), true)?;
        write(&dir.join(format!("{stem}.crt")), &cert.pem(), false)
    }

    /// A control plane machine's own certificates: the API server's serving certificate for
    /// every control plane address, etcd's server and peer certificates for its own. Made
    /// again when the names they must hold changed.
    fn ensure_machine(
        &self,
        machine: &Machine,
        control_planes: &[&str],
    ) -> Result<(), StageFailure> {
        let dir = self.dir.join("machines").join(&machine.name);
        let mut apiserver_names: Vec<String> = [
            "kubernetes",
            "kubernetes.default",
            "kubernetes.default.svc",
            "kubernetes.default.svc.cluster.local",
            "localhost",
            "127.0.0.1",
            SERVICE_IP,
        ]
        .iter()
        .map(|s| (*s).to_owned())
        .collect();
        apiserver_names.push(machine.name.clone());
        apiserver_names.extend(control_planes.iter().map(|a| (*a).to_owned()));
        apiserver_names.dedup();
        let etcd_names: Vec<String> = vec![
            "localhost".to_owned(),
            "127.0.0.1".to_owned(),
            machine.name.clone(),
            machine.address.clone(),
        ];
        let record = format!("{}\n{}\n", apiserver_names.join(","), etcd_names.join(","));
        let names_file = dir.join("names");
        if std::fs::read_to_string(&names_file).is_ok_and(|r| r == record) {
            return Ok(());
        }
        let server = |names: &[String], client: bool| -> Result<CertificateParams, StageFailure> {
            let mut params =
                CertificateParams::new(names.to_vec()).map_err(rcgen_failure(&machine.name))?;
            params
                .distinguished_name
                .push(DnType::CommonName, machine.name.as_str());
            params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
            if client {
                params
                    .extended_key_usages
                    .push(ExtendedKeyUsagePurpose::ClientAuth);
            }
            Ok(params)
        };
        let mut apiserver = server(&apiserver_names, false)?;
        apiserver.distinguished_name = rcgen::DistinguishedName::new();
        apiserver
            .distinguished_name
            .push(DnType::CommonName, "kube-apiserver");
        self.sign(&dir, "apiserver", "ca", apiserver)?;
        self.sign(&dir, "etcd/server", "etcd/ca", server(&etcd_names, true)?)?;
        self.sign(&dir, "etcd/peer", "etcd/ca", server(&etcd_names, true)?)?;
        write(&names_file, &record, false)
    }

    /// The files `machine` holds under `/etc/kubernetes/pki`, by path there.
    pub fn files_for(&self, machine: &Machine) -> Result<Vec<Wanted>, StageFailure> {
        let cluster = self.dir.join("cluster");
        let mut files: Vec<(String, PathBuf)> = Vec::new();
        if machine.roles.contains(&Role::ControlPlane) {
            files.extend(
                CONTROL_PLANE_FILES
                    .iter()
                    .map(|f| ((*f).to_owned(), cluster.join(f))),
            );
            let own = self.dir.join("machines").join(&machine.name);
            for f in [
                "apiserver.crt",
                "apiserver.key",
                "etcd/server.crt",
                "etcd/server.key",
                "etcd/peer.crt",
                "etcd/peer.key",
            ] {
                files.push((f.to_owned(), own.join(f)));
            }
        } else {
            files.extend(
                NODE_FILES
                    .iter()
                    .map(|f| ((*f).to_owned(), cluster.join(f))),
            );
        }
        files
            .into_iter()
            .map(|(path, local)| {
                let bytes = std::fs::read(&local)
                    .map_err(|e| failure(format!("{}: {e}", local.display())))?;
                Ok(Wanted {
                    path,
                    sha256: format!("{:x}", Sha256::digest(&bytes)),
                    size: bytes.len() as u64,
                    local,
                })
            })
            .collect()
    }

    /// An HTTPS client that trusts the etcd CA only and presents the API server's etcd client
    /// certificate: what asks a member after its health.
    pub fn etcd_client(&self) -> Result<reqwest::Client, String> {
        self.client("etcd/ca.crt", "apiserver-etcd-client")
    }

    /// An HTTPS client that trusts the cluster CA only and presents the cluster admin's
    /// certificate: what asks the API server after its readiness.
    pub fn admin_client(&self) -> Result<reqwest::Client, String> {
        self.client("ca.crt", "admin")
    }

    fn client(&self, ca: &str, identity: &str) -> Result<reqwest::Client, String> {
        let cluster = self.dir.join("cluster");
        let read =
            |name: &str| std::fs::read(cluster.join(name)).map_err(|e| format!("{name}: {e}"));
        let mut pem = read(&format!("{identity}.crt"))?;
        pem.extend(read(&format!("{identity}.key"))?);
        reqwest::Client::builder()
            .use_rustls_tls()
            .tls_built_in_root_certs(false)
            .add_root_certificate(
                reqwest::Certificate::from_pem(&read(ca)?).map_err(|e| e.to_string())?,
            )
            .identity(reqwest::Identity::from_pem(&pem).map_err(|e| e.to_string())?)
            .timeout(Duration::from_secs(5))
            .build()
            .map_err(|e| e.to_string())
    }

    /// A kubeconfig for the cluster-wide client certificate `stem` (`controller-manager`,
    /// `scheduler`, `admin`, `kube-proxy`) to reach the API server at `server`, its
    /// certificates embedded: a secret.
    pub fn kubeconfig(&self, stem: &str, server: &str) -> Result<String, StageFailure> {
        use base64::Engine as _;
        let cluster = self.dir.join("cluster");
        let encoded = |name: &str| -> Result<String, StageFailure> {
            Ok(base64::engine::general_purpose::STANDARD.encode(read(&cluster.join(name))?))
        };
        Ok(format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: kubernetes\n  cluster:\n    \
             server: {server}\n    certificate-authority-data: {ca}\nusers:\n- name: {stem}\n  \
             user:\n    client-certificate-data: {cert}\n    client-key-data: {key}\n\
             contexts:\n- name: {stem}\n  context: {{cluster: kubernetes, user: {stem}}}\n\
             current-context: {stem}\n",
            ca = encoded("ca.crt")?,
            cert = encoded(&format!("{stem}.crt"))?,
            key = encoded(&format!("{stem}.key"))?,
        ))
    }

    /// The cluster CA's certificate (PEM), for kubeconfigs and for users to trust.
    pub fn ca_pem(&self) -> Result<String, StageFailure> {
        read(&self.dir.join("cluster/ca.crt"))
    }
}

/// Runs the pki stage on every machine at once: what each copied and kept, by name.
pub async fn push(
    pki: &ClusterPki,
    file: &MachinesFile,
    known_hosts: &Path,
) -> Result<BTreeMap<String, Pushed>, StageFailure> {
    let pushes = file.machines.iter().map(|machine| async move {
        let ssh = Ssh::to(machine, known_hosts);
        let wanted = pki.files_for(machine)?;
        files::sync(Stage::Pki, &ssh, &REMOTE, &wanted, DEADLINE)
            .await
            .map(|pushed| (machine.name.clone(), pushed))
    });
    futures::future::join_all(pushes)
        .await
        .into_iter()
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn machines() -> MachinesFile {
        MachinesFile::parse(
            "machines:
  - {name: cp1, address: 10.0.0.11, key_file: /k, roles: [control-plane]}
  - {name: w1, address: 10.0.0.12, key_file: /k, roles: [worker]}
",
        )
        .unwrap()
    }

    #[test]
    fn a_second_run_keeps_every_authority_and_a_new_address_gets_new_certificates() {
        let dir = tempfile::tempdir().unwrap();
        let file = machines();
        let pki = ClusterPki::ensure(dir.path(), &file).unwrap();
        let ca = pki.ca_pem().unwrap();
        let serving = std::fs::read(dir.path().join("machines/cp1/apiserver.crt")).unwrap();
        ClusterPki::ensure(dir.path(), &file).unwrap();
        assert_eq!(pki.ca_pem().unwrap(), ca);
        assert_eq!(
            std::fs::read(dir.path().join("machines/cp1/apiserver.crt")).unwrap(),
            serving
        );
        let mut moved = file.clone();
        moved.machines[0].address = "10.0.0.21".into();
        ClusterPki::ensure(dir.path(), &moved).unwrap();
        assert_eq!(pki.ca_pem().unwrap(), ca);
        assert_ne!(
            std::fs::read(dir.path().join("machines/cp1/apiserver.crt")).unwrap(),
            serving
        );
        let mode = |p: &str| {
            use std::os::unix::fs::PermissionsExt as _;
            std::fs::metadata(dir.path().join(p))
                .unwrap()
                .permissions()
                .mode()
                & 0o777
        };
        assert_eq!(mode("cluster/ca.key"), 0o600);
        assert_eq!(mode("machines/cp1/etcd/server.key"), 0o600);
        assert_eq!(mode("cluster/ca.crt"), 0o644);
    }

    #[test]
    fn a_worker_gets_the_ca_and_kube_proxy_only() {
        let dir = tempfile::tempdir().unwrap();
        let file = machines();
        let pki = ClusterPki::ensure(dir.path(), &file).unwrap();
        let worker: Vec<String> = pki
            .files_for(&file.machines[1])
            .unwrap()
            .into_iter()
            .map(|w| w.path)
            .collect();
        assert_eq!(worker, NODE_FILES);
        let control_plane = pki.files_for(&file.machines[0]).unwrap();
        assert!(control_plane.iter().any(|w| w.path == "etcd/server.key"));
        assert_eq!(control_plane.len(), CONTROL_PLANE_FILES.len() + 6);
    }
}
