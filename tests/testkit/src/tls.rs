//! A CA for the servers a test runs beside its clusters (the image registry, the Git server),
//! and the serving certificates it issues: pods and nodes reach those servers on the host's
//! bridge address, off loopback, so passwords to them travel over TLS.

use std::net::IpAddr;
use std::path::{Path, PathBuf};

use rcgen::{
    BasicConstraints, CertificateParams, CertifiedIssuer, DnType, ExtendedKeyUsagePurpose, IsCa,
    KeyPair, KeyUsagePurpose,
};

use crate::Error;

/// A CA whose certificate a test hands to whatever must trust its servers.
pub struct ServerCa {
    issuer: CertifiedIssuer<'static, KeyPair>,
    dir: PathBuf,
    /// The CA certificate, PEM.
    pub pem: String,
    /// The CA certificate's file.
    pub path: PathBuf,
}

impl std::fmt::Debug for ServerCa {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServerCa")
            .field("path", &self.path)
            .finish_non_exhaustive()
    }
}

/// A serving certificate and its key, as files.
#[derive(Debug, Clone)]
pub struct ServingFiles {
    pub cert: PathBuf,
    pub key: PathBuf,
}

fn tls_err(what: &str) -> impl FnOnce(rcgen::Error) -> Error + '_ {
    move |e| Error::Pki(format!("{what}: {e}"))
}

impl ServerCa {
    /// A fresh CA (ECDSA P-256) whose files live in `dir`.
    pub fn generate(dir: &Path) -> Result<Self, Error> {
        std::fs::create_dir_all(dir).map_err(|e| Error::io("create the server CA's dir", e))?;
        let mut params = CertificateParams::new(Vec::<String>::new()).map_err(tls_err("ca"))?;
        params
            .distinguished_name
            .push(DnType::CommonName, "kubenest-test-servers-ca");
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
        let key = KeyPair::generate().map_err(tls_err("ca key"))?;
        let issuer = CertifiedIssuer::self_signed(params, key).map_err(tls_err("ca cert"))?;
        let pem = issuer.pem();
        let path = dir.join("ca.crt");
        std::fs::write(&path, &pem).map_err(|e| Error::io("write the server CA", e))?;
        Ok(Self {
            issuer,
            dir: dir.to_owned(),
            pem,
            path,
        })
    }

    /// A serving certificate for `name` on `ips` (and loopback), written as
    /// `serving/{name}.crt` and `.key` beside the CA's file.
    pub fn issue(&self, name: &str, ips: &[IpAddr]) -> Result<ServingFiles, Error> {
        let mut names = vec!["localhost".to_owned(), "127.0.0.1".to_owned()];
        names.extend(ips.iter().map(IpAddr::to_string));
        let mut params = CertificateParams::new(names).map_err(tls_err("serving"))?;
        params.distinguished_name.push(DnType::CommonName, name);
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
        params.key_usages = vec![
            KeyUsagePurpose::DigitalSignature,
            KeyUsagePurpose::KeyEncipherment,
        ];
        let key = KeyPair::generate().map_err(tls_err("serving key"))?;
        let cert = params
            .signed_by(&key, &self.issuer)
            .map_err(tls_err("serving cert"))?;
        // Beside, not in, the CA's folder: that folder is a trust directory (containers' cert
        // dirs take every `*.crt` in it as a CA and refuse a `*.key` without a client cert).
        let serving = self.dir.join("serving");
        std::fs::create_dir_all(&serving).map_err(|e| Error::io("serving cert dir", e))?;
        let files = ServingFiles {
            cert: serving.join(format!("{name}.crt")),
            key: serving.join(format!("{name}.key")),
        };
        std::fs::write(&files.cert, cert.pem()).map_err(|e| Error::io("write a cert", e))?;
        std::fs::write(&files.key, key.serialize_pem()).map_err(|e| Error::io("write a key", e))?;
        Ok(files)
    }
}
