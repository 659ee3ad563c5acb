//! The keys, certificates and kubeconfigs a system's programs are started with, written under
//! its run directory with owner-only permissions where they are secret.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use anyhow::Context as _;

/// The signing keys of a system, as files under `{dir}/keys`. One key signs cluster and backend
/// tokens (controllers; the API server's hub session); the hubs verify with its public half. The
/// API server signs access tokens with its own.
pub(super) struct Keys {
    pub signing: PathBuf,
    pub public: PathBuf,
    pub api: PathBuf,
}

impl Keys {
    pub(super) fn generate(dir: &Path) -> anyhow::Result<Self> {
        let keys = dir.join("keys");
        std::fs::create_dir_all(&keys)?;
        let signing = rcgen::KeyPair::generate_for(&rcgen::PKCS_ED25519)?;
        let files = Self {
            signing: keys.join("signing.pem"),
            public: keys.join("signing.pub"),
            api: keys.join("api-signing.pem"),
        };
        write_private(&files.signing, &signing.serialize_pem())?;
        std::fs::write(&files.public, signing.public_key_pem())?;
        let api = rcgen::KeyPair::generate_for(&rcgen::PKCS_ED25519)?;
        write_private(&files.api, &api.serialize_pem())?;
        Ok(files)
    }
}

pub(super) fn write_private(path: &Path, contents: &str) -> anyhow::Result<()> {
    use std::io::Write as _;
    use std::os::unix::fs::OpenOptionsExt as _;
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(path)
        .with_context(|| format!("write {}", path.display()))?;
    file.write_all(contents.as_bytes())?;
    Ok(())
}

/// A self-signed certificate for the API at `address` (its IP as the subject name), written
/// under `dir`; returns the certificate and key files.
pub(super) fn api_certificate(
    dir: &Path,
    address: SocketAddr,
) -> anyhow::Result<(PathBuf, PathBuf)> {
    certificate(dir, "api-tls", address)
}

/// The Kubernetes user the API server acts as (the chart's service account).
pub const API_USER: &str = "system:serviceaccount:kubenest-system:kubenest-apiserver";
/// The Kubernetes user the controllers act as.
pub const CONTROLLERS_USER: &str = "system:serviceaccount:kubenest-system:kubenest-controllers";

/// A copy of the admin kubeconfig that impersonates `user` (keeping the admin's powers, as
/// `system:masters`), written as `{name}.kubeconfig` in `dir`.
pub(super) fn identity_kubeconfig(
    admin: &Path,
    dir: &Path,
    name: &str,
    user: &str,
) -> anyhow::Result<PathBuf> {
    let mut config = kube::config::Kubeconfig::read_from(admin)?;
    for entry in &mut config.auth_infos {
        if let Some(auth) = entry.auth_info.as_mut() {
            auth.impersonate = Some(user.to_owned());
            auth.impersonate_groups = Some(vec!["system:masters".to_owned()]);
        }
    }
    let path = dir.join(format!("{name}.kubeconfig"));
    write_private(&path, &serde_json::to_string_pretty(&config)?)?;
    Ok(path)
}

/// A self-signed serving certificate for `address`, in `dir/{name}/tls.{crt,key}`.
pub(super) fn certificate(
    dir: &Path,
    name: &str,
    address: SocketAddr,
) -> anyhow::Result<(PathBuf, PathBuf)> {
    let key = rcgen::KeyPair::generate()?;
    let cert = rcgen::CertificateParams::new(vec![address.ip().to_string()])?.self_signed(&key)?;
    let home = dir.join(name);
    std::fs::create_dir_all(&home)?;
    let (cert_file, key_file) = (home.join("tls.crt"), home.join("tls.key"));
    std::fs::write(&cert_file, cert.pem())?;
    write_private(&key_file, &key.serialize_pem())?;
    Ok((cert_file, key_file))
}
