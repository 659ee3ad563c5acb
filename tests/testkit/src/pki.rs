//! Per-cluster PKI: a CA, the API server's serving certificate, an admin client certificate in
//! `system:masters`, and the service-account signing key, written as PEM files. A cluster with
//! a real node also gets the kubelet's client certificate (its node identity) and serving
//! certificate, and the API server's certificate names the address pods reach it on.
//!
//! Every cluster also gets the identity its API server presents to admission webhooks: a CA of
//! its own (so no Kubernetes user's certificate passes for it), a client certificate it signed,
//! and the `AdmissionConfiguration` (`--admission-control-config-file`) whose webhook
//! kubeconfig presents that certificate to every webhook.

use std::path::{Path, PathBuf};

use rcgen::{
    BasicConstraints, CertificateParams, CertifiedIssuer, DnType, ExtendedKeyUsagePurpose, IsCa,
    KeyPair, KeyUsagePurpose,
};

use crate::Error;

/// Names the serving certificate is valid for: loopback plus the in-cluster service names and
/// the `kubernetes` Service's address (the first IP of the service range, 10.96.0.0/16).
const SERVING_NAMES: &[&str] = &[
    "localhost",
    "127.0.0.1",
    "::1",
    "10.0.0.1",
    "10.96.0.1",
    "kubernetes",
    "kubernetes.default",
    "kubernetes.default.svc",
    "kubernetes.default.svc.cluster.local",
];

/// The PEM files of one cluster, and the PEM text a kubeconfig embeds.
#[derive(Debug, Clone)]
pub struct Pki {
    pub ca_cert: PathBuf,
    pub serving_cert: PathBuf,
    pub serving_key: PathBuf,
    pub admin_cert: PathBuf,
    pub admin_key: PathBuf,
    pub service_account_key: PathBuf,
    pub service_account_pub: PathBuf,
    pub ca_pem: String,
    pub admin_cert_pem: String,
    pub admin_key_pem: String,
    /// The real node's certificates, when the cluster has one.
    pub node: Option<NodeCerts>,
    /// What the API server presents to admission webhooks.
    pub webhook_client: WebhookClient,
}

/// The client identity a cluster's API server presents to admission webhooks.
#[derive(Debug, Clone)]
pub struct WebhookClient {
    /// The CA that signed the certificate (PEM): what a webhook server verifies callers with.
    pub ca_pem: String,
    pub cert: PathBuf,
    pub key: PathBuf,
    /// The `AdmissionConfiguration` for `--admission-control-config-file`.
    pub admission_config: PathBuf,
}

/// Who a real node is: its name (`system:node:{name}` to the API server) and its IP.
#[derive(Debug, Clone)]
pub struct NodeIdentity {
    pub name: String,
    pub ip: std::net::IpAddr,
}

/// A real node's PEM files: the kubelet's client certificate (`system:node:{name}` in
/// `system:nodes`, which the Node authorizer and NodeRestriction know) and its serving
/// certificate for the node's name and IP (the API server dials it for logs and exec).
#[derive(Debug, Clone)]
pub struct NodeCerts {
    pub client_cert: PathBuf,
    pub client_key: PathBuf,
    pub client_cert_pem: String,
    pub client_key_pem: String,
    pub serving_cert: PathBuf,
    pub serving_key: PathBuf,
}

fn pki_err(what: &str) -> impl FnOnce(rcgen::Error) -> Error + '_ {
    move |e| Error::Pki(format!("{what}: {e}"))
}

impl Pki {
    /// Generates a fresh PKI (ECDSA P-256 throughout) into `dir`.
    pub fn generate(dir: &Path, cluster: &str) -> Result<Self, Error> {
        Self::generate_for(dir, cluster, None)
    }

    /// Like [`generate`](Self::generate), plus the certificates of a real node; the API
    /// server's certificate then also names the node's IP, which it serves on.
    pub fn generate_for(
        dir: &Path,
        cluster: &str,
        node: Option<&NodeIdentity>,
    ) -> Result<Self, Error> {
        let nodes: Vec<NodeIdentity> = node.cloned().into_iter().collect();
        let (mut pki, certs) = Self::generate_inner(dir, cluster, node.map(|n| n.ip), &nodes, "")?;
        pki.node = certs.into_iter().next();
        Ok(pki)
    }

    /// A PKI whose API server serves on `server_ip` too, with the certificates of several real
    /// nodes (files `{node}-kubelet*.{crt,key}`), in the order of `nodes`: the local machines'
    /// kubelets ([`crate::machines`]).
    pub fn generate_for_nodes(
        dir: &Path,
        cluster: &str,
        server_ip: std::net::IpAddr,
        nodes: &[NodeIdentity],
    ) -> Result<(Self, Vec<NodeCerts>), Error> {
        let (pki, certs) = Self::generate_inner(dir, cluster, Some(server_ip), nodes, "-")?;
        Ok((pki, certs))
    }

    /// The PKI, and the certificates of `nodes` (file names prefixed with the node's name and
    /// `separator` when it is not empty).
    fn generate_inner(
        dir: &Path,
        cluster: &str,
        server_ip: Option<std::net::IpAddr>,
        nodes: &[NodeIdentity],
        separator: &str,
    ) -> Result<(Self, Vec<NodeCerts>), Error> {
        std::fs::create_dir_all(dir).map_err(|e| Error::io("create pki dir", e))?;

        let mut ca_params = CertificateParams::new(Vec::<String>::new()).map_err(pki_err("ca"))?;
        ca_params
            .distinguished_name
            .push(DnType::CommonName, format!("kubenest-{cluster}-ca"));
        ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        ca_params.key_usages = vec![
            KeyUsagePurpose::KeyCertSign,
            KeyUsagePurpose::CrlSign,
            KeyUsagePurpose::DigitalSignature,
        ];
        let ca_key = KeyPair::generate().map_err(pki_err("ca key"))?;
        let ca = CertifiedIssuer::self_signed(ca_params, ca_key).map_err(pki_err("ca cert"))?;

        let mut names: Vec<String> = SERVING_NAMES.iter().map(|s| (*s).to_owned()).collect();
        names.extend(server_ip.map(|ip| ip.to_string()));
        let mut serving = CertificateParams::new(names).map_err(pki_err("serving"))?;
        serving
            .distinguished_name
            .push(DnType::CommonName, "kube-apiserver");
        serving.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
        serving.key_usages = vec![
            KeyUsagePurpose::DigitalSignature,
            KeyUsagePurpose::KeyEncipherment,
        ];
        let serving_key = KeyPair::generate().map_err(pki_err("serving key"))?;
        let serving_cert = serving
            .signed_by(&serving_key, &ca)
            .map_err(pki_err("serving"))?;

        let mut admin = CertificateParams::new(Vec::<String>::new()).map_err(pki_err("admin"))?;
        admin
            .distinguished_name
            .push(DnType::CommonName, "kubenest-admin");
        admin
            .distinguished_name
            .push(DnType::OrganizationName, "system:masters");
        admin.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
        admin.key_usages = vec![KeyUsagePurpose::DigitalSignature];
        let admin_key = KeyPair::generate().map_err(pki_err("admin key"))?;
        let admin_cert = admin.signed_by(&admin_key, &ca).map_err(pki_err("admin"))?;

        let sa_key = KeyPair::generate().map_err(pki_err("service-account key"))?;

        let write = |name: &str, pem: &str| -> Result<PathBuf, Error> {
            let path = dir.join(name);
            std::fs::write(&path, pem).map_err(|e| Error::io(format!("write {name}"), e))?;
            Ok(path)
        };
        let node_files = nodes
            .iter()
            .map(|identity| {
                let prefix = if separator.is_empty() {
                    String::new()
                } else {
                    format!("{}{separator}", identity.name)
                };
                let write_node = |name: &str, pem: &str| write(&format!("{prefix}{name}"), pem);
                node_certs(identity, &ca, &write_node)
            })
            .collect::<Result<Vec<_>, Error>>()?;
        let webhook_client = webhook_client(cluster, &write)?;
        let ca_pem = ca.pem();
        let admin_cert_pem = admin_cert.pem();
        let admin_key_pem = admin_key.serialize_pem();
        let pki = Self {
            ca_cert: write("ca.crt", &ca_pem)?,
            serving_cert: write("apiserver.crt", &serving_cert.pem())?,
            serving_key: write("apiserver.key", &serving_key.serialize_pem())?,
            admin_cert: write("admin.crt", &admin_cert_pem)?,
            admin_key: write("admin.key", &admin_key_pem)?,
            service_account_key: write("sa.key", &sa_key.serialize_pem())?,
            service_account_pub: write("sa.pub", &sa_key.public_key_pem())?,
            ca_pem,
            admin_cert_pem,
            admin_key_pem,
            node: None,
            webhook_client,
        };
        Ok((pki, node_files))
    }
}

/// The webhook client CA and certificate, and the admission configuration that presents the
/// certificate to every webhook (`name: '*'` in its kubeconfig).
fn webhook_client(
    cluster: &str,
    write: &dyn Fn(&str, &str) -> Result<PathBuf, Error>,
) -> Result<WebhookClient, Error> {
    let mut ca_params =
        CertificateParams::new(Vec::<String>::new()).map_err(pki_err("webhook client ca"))?;
    ca_params.distinguished_name.push(
        DnType::CommonName,
        format!("kubenest-{cluster}-webhook-client-ca"),
    );
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca_params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
    let ca_key = KeyPair::generate().map_err(pki_err("webhook client ca key"))?;
    let ca = CertifiedIssuer::self_signed(ca_params, ca_key)
        .map_err(pki_err("webhook client ca cert"))?;
    let mut client =
        CertificateParams::new(Vec::<String>::new()).map_err(pki_err("webhook client"))?;
    client
        .distinguished_name
        .push(DnType::CommonName, format!("kube-apiserver-{cluster}"));
    client.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
    client.key_usages = vec![KeyUsagePurpose::DigitalSignature];
    let key = KeyPair::generate().map_err(pki_err("webhook client key"))?;
    let certificate = client
        .signed_by(&key, &ca)
        .map_err(pki_err("webhook client"))?;
    // The kube-apiserver reads the files named in its configuration from wherever it runs.
    let absolute = |path: PathBuf| {
        std::path::absolute(&path).map_err(|e| Error::io("absolute webhook client path", e))
    };
    let cert = absolute(write("webhook-client.crt", &certificate.pem())?)?;
    let key = absolute(write("webhook-client.key", &key.serialize_pem())?)?;
    let kubeconfig = absolute(write(
        "webhook-kubeconfig.yaml",
        &format!(
            "apiVersion: v1
kind: Config
users:
- name: '*'
  user:
    client-certificate: {}
    client-key: {}
",
            cert.display(),
            key.display()
        ),
    )?)?;
    let plugin = |name: &str| {
        format!(
            "- name: {name}
  configuration:
    apiVersion: apiserver.config.k8s.io/v1
    kind: WebhookAdmissionConfiguration
    kubeConfigFile: {}
",
            kubeconfig.display()
        )
    };
    let admission_config = write(
        "admission.yaml",
        &format!(
            "apiVersion: apiserver.config.k8s.io/v1
kind: AdmissionConfiguration
plugins:
{}{}",
            plugin("ValidatingAdmissionWebhook"),
            plugin("MutatingAdmissionWebhook")
        ),
    )?;
    Ok(WebhookClient {
        ca_pem: ca.pem(),
        cert,
        key,
        admission_config,
    })
}

fn node_certs(
    node: &NodeIdentity,
    ca: &CertifiedIssuer<'_, KeyPair>,
    write: &dyn Fn(&str, &str) -> Result<PathBuf, Error>,
) -> Result<NodeCerts, Error> {
    let mut client = CertificateParams::new(Vec::<String>::new()).map_err(pki_err("kubelet"))?;
    client
        .distinguished_name
        .push(DnType::CommonName, format!("system:node:{}", node.name));
    client
        .distinguished_name
        .push(DnType::OrganizationName, "system:nodes");
    client.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
    client.key_usages = vec![KeyUsagePurpose::DigitalSignature];
    let client_key = KeyPair::generate().map_err(pki_err("kubelet key"))?;
    let client_cert = client
        .signed_by(&client_key, ca)
        .map_err(pki_err("kubelet"))?;

    let names = vec![node.name.clone(), node.ip.to_string()];
    let mut serving = CertificateParams::new(names).map_err(pki_err("kubelet serving"))?;
    serving
        .distinguished_name
        .push(DnType::CommonName, node.name.clone());
    serving.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
    serving.key_usages = vec![
        KeyUsagePurpose::DigitalSignature,
        KeyUsagePurpose::KeyEncipherment,
    ];
    let serving_key = KeyPair::generate().map_err(pki_err("kubelet serving key"))?;
    let serving_cert = serving
        .signed_by(&serving_key, ca)
        .map_err(pki_err("kubelet serving"))?;

    let client_cert_pem = client_cert.pem();
    let client_key_pem = client_key.serialize_pem();
    Ok(NodeCerts {
        client_cert: write("kubelet-client.crt", &client_cert_pem)?,
        client_key: write("kubelet-client.key", &client_key_pem)?,
        client_cert_pem,
        client_key_pem,
        serving_cert: write("kubelet.crt", &serving_cert.pem())?,
        serving_key: write("kubelet.key", &serving_key.serialize_pem())?,
    })
}
