//! Certificates for ingresses with `tls` and no `tls_secret`: one per ingress, for its host,
//! signed by the project's ingress CA (the Secret [`wire::INGRESS_CA_SECRET`] in its namespace,
//! set through the API), kept in the Secret `{app}-{component}-tls` that the Ingress names.
//!
//! A certificate is issued once and kept while it is still right: its annotations say which
//! host and which CA (a digest of the CA certificate) it was issued for and when it expires.
//! A new host, a new CA, or fewer than [`RENEW_BEFORE_DAYS`] days left issue a new one. The
//! Secret is rendered with the workload's objects (labelled as the App's, pruned with it), so
//! an unchanged certificate is an unchanged object and costs no write.
//!
//! The CA's key never leaves the cluster: kubenest's control plane only forwards it once,
//! when an admin sets it.

use base64::Engine as _;
use chrono::{DateTime, Datelike, Duration, Utc};
use kubenest_contracts as wire;
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use crate::apply::{Applier, ApplyError};

/// How long an issued certificate is valid.
pub const VALID_DAYS: i64 = 90;
/// A certificate with fewer days left than this is issued again.
pub const RENEW_BEFORE_DAYS: i64 = 30;

/// The annotations an issued certificate's Secret carries.
pub const HOST_ANNOTATION: &str = "kubenest.io/tls-host";
pub const CA_ANNOTATION: &str = "kubenest.io/tls-ca-sha256";
pub const NOT_AFTER_ANNOTATION: &str = "kubenest.io/tls-not-after";

/// A certificate for one host, as its Secret holds it.
#[derive(Clone, PartialEq, Eq)]
pub struct Issued {
    pub host: String,
    /// The leaf certificate then the CA's, PEM.
    pub chain_pem: String,
    pub key_pem: String,
    /// SHA-256 of the CA certificate's PEM, hex.
    pub ca_digest: String,
    pub not_after: DateTime<Utc>,
}

impl std::fmt::Debug for Issued {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never the key.
        f.debug_struct("Issued")
            .field("host", &self.host)
            .field("ca_digest", &self.ca_digest)
            .field("not_after", &self.not_after)
            .finish_non_exhaustive()
    }
}

/// The project's ingress CA, as read from its Secret.
pub struct Ca {
    cert_pem: String,
    key_pem: String,
}

impl std::fmt::Debug for Ca {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never the key.
        f.debug_struct("Ca")
            .field("digest", &self.digest())
            .finish_non_exhaustive()
    }
}

impl Ca {
    fn digest(&self) -> String {
        hex(&Sha256::digest(self.cert_pem.trim().as_bytes()))
    }
}

/// Why a certificate could not be had; said in the component's status.
pub fn missing_ca(namespace: &str) -> String {
    format!(
        "the ingress has tls and no tls_secret, and the project has no ingress CA (Secret {} \
         in namespace {namespace}): an admin sets one (PUT /api/v1/projects/{{id}}/ingress-ca), \
         or name a kubernetes.io/tls Secret of your own in tls_secret",
        wire::INGRESS_CA_SECRET
    )
}

/// The certificate for `host` in the Secret `secret` of `namespace`: the one there if it is
/// still right, else a new one from the project's CA; `Err(why)` when there is no usable CA.
pub async fn certificate(
    applier: &Applier,
    namespace: &str,
    secret: &str,
    host: &str,
    now: DateTime<Utc>,
) -> Result<Result<Issued, String>, ApplyError> {
    let Some(ca) = applier
        .get("v1", "Secret", namespace, wire::INGRESS_CA_SECRET)
        .await?
    else {
        return Ok(Err(missing_ca(namespace)));
    };
    let Some(ca) = read_ca(&ca) else {
        return Ok(Err(format!(
            "the project's ingress CA (Secret {}) holds no PEM tls.crt and tls.key",
            wire::INGRESS_CA_SECRET
        )));
    };
    let existing = applier.get("v1", "Secret", namespace, secret).await?;
    if let Some(kept) = existing.as_ref().and_then(read_issued)
        && still_right(&kept, host, &ca.digest(), now)
    {
        return Ok(Ok(kept));
    }
    Ok(issue(&ca, host, now))
}

/// Whether `kept` serves `host`, comes from the CA of `ca_digest` and has time left.
pub fn still_right(kept: &Issued, host: &str, ca_digest: &str, now: DateTime<Utc>) -> bool {
    kept.host == host
        && kept.ca_digest == ca_digest
        && kept.not_after - now > Duration::days(RENEW_BEFORE_DAYS)
}

fn data(secret: &Value, key: &str) -> Option<String> {
    let encoded = secret.pointer(&format!("/data/{}", key.replace('/', "~1")))?;
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(encoded.as_str()?)
        .ok()?;
    String::from_utf8(bytes).ok()
}

fn read_ca(secret: &Value) -> Option<Ca> {
    let cert_pem = data(secret, "tls.crt")?;
    let key_pem = data(secret, "tls.key")?;
    Some(Ca { cert_pem, key_pem })
}

fn read_issued(secret: &Value) -> Option<Issued> {
    let annotation = |key: &str| {
        secret
            .pointer("/metadata/annotations")?
            .get(key)?
            .as_str()
            .map(str::to_owned)
    };
    let not_after = DateTime::parse_from_rfc3339(&annotation(NOT_AFTER_ANNOTATION)?).ok()?;
    Some(Issued {
        host: annotation(HOST_ANNOTATION)?,
        chain_pem: data(secret, "tls.crt")?,
        key_pem: data(secret, "tls.key")?,
        ca_digest: annotation(CA_ANNOTATION)?,
        not_after: not_after.with_timezone(&Utc),
    })
}

/// A certificate for `host` signed by `ca`, valid from a day before `now` (clocks differ) for
/// [`VALID_DAYS`]; `Err(why)` when the CA cannot sign.
pub fn issue(ca: &Ca, host: &str, now: DateTime<Utc>) -> Result<Issued, String> {
    let unusable = |e: rcgen::Error| format!("the project's ingress CA cannot sign: {e}");
    let ca_key = rcgen::KeyPair::from_pem(&ca.key_pem).map_err(unusable)?;
    let issuer = rcgen::Issuer::from_ca_cert_pem(&ca.cert_pem, ca_key).map_err(unusable)?;
    let mut params = rcgen::CertificateParams::new(vec![host.to_owned()]).map_err(unusable)?;
    params
        .distinguished_name
        .push(rcgen::DnType::CommonName, host);
    params.extended_key_usages = vec![rcgen::ExtendedKeyUsagePurpose::ServerAuth];
    let day = |at: DateTime<Utc>| {
        let month = u8::try_from(at.month()).unwrap_or(1);
        let day = u8::try_from(at.day()).unwrap_or(1);
        rcgen::date_time_ymd(at.year(), month, day)
    };
    let not_after = now + Duration::days(VALID_DAYS);
    params.not_before = day(now - Duration::days(1));
    params.not_after = day(not_after);
    let key = rcgen::KeyPair::generate().map_err(unusable)?;
    let cert = params.signed_by(&key, &issuer).map_err(unusable)?;
    Ok(Issued {
        host: host.to_owned(),
        chain_pem: format!("{}{}\n", cert.pem(), ca.cert_pem.trim()),
        key_pem: key.serialize_pem(),
        ca_digest: ca.digest(),
        // What the certificate says: midnight of its last day.
        not_after: not_after
            .date_naive()
            .and_hms_opt(0, 0, 0)
            .map_or(not_after, |at| at.and_utc()),
    })
}

/// The Secret holding `issued`, named `name` in `namespace`, with the App's `labels`.
pub fn secret(name: &str, namespace: &str, labels: &Value, issued: &Issued) -> Value {
    let engine = base64::engine::general_purpose::STANDARD;
    json!({
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "labels": labels,
            "annotations": {
                HOST_ANNOTATION: issued.host,
                CA_ANNOTATION: issued.ca_digest,
                NOT_AFTER_ANNOTATION: issued.not_after.to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
            },
        },
        "type": "kubernetes.io/tls",
        "data": {
            "tls.crt": engine.encode(issued.chain_pem.as_bytes()),
            "tls.key": engine.encode(issued.key_pem.as_bytes()),
        },
    })
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ca() -> Ca {
        let key = rcgen::KeyPair::generate().unwrap();
        let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
        params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
        params
            .distinguished_name
            .push(rcgen::DnType::CommonName, "shop ingress CA");
        let cert = params.self_signed(&key).unwrap();
        Ca {
            cert_pem: cert.pem(),
            key_pem: key.serialize_pem(),
        }
    }

    #[test]
    fn an_issued_certificate_round_trips_through_its_secret_and_is_kept_while_right() {
        let ca = ca();
        let now = Utc::now();
        let issued = issue(&ca, "shop.example.test", now).unwrap();
        assert!(issued.chain_pem.matches("BEGIN CERTIFICATE").count() == 2);
        let labels = json!({"kubenest.io/app-id": "a1"});
        let secret = secret("shop-web-tls", "shop", &labels, &issued);
        assert_eq!(secret["type"], "kubernetes.io/tls");
        let read = read_issued(&secret).unwrap();
        assert_eq!(read, issued);
        assert!(still_right(&read, "shop.example.test", &ca.digest(), now));
        // Another host, another CA, or a month before expiry: issued again.
        assert!(!still_right(&read, "www.example.test", &ca.digest(), now));
        assert!(!still_right(
            &read,
            "shop.example.test",
            &self::ca().digest(),
            now
        ));
        let later = now + Duration::days(VALID_DAYS - RENEW_BEFORE_DAYS + 1);
        assert!(!still_right(
            &read,
            "shop.example.test",
            &ca.digest(),
            later
        ));
    }

    #[test]
    fn the_leaf_names_its_host_and_is_signed_by_the_ca_not_itself() {
        let ca = ca();
        let issued = issue(&ca, "shop.example.test", Utc::now()).unwrap();
        let leaf = issued
            .chain_pem
            .split("-----END CERTIFICATE-----")
            .next()
            .unwrap();
        let der = base64::engine::general_purpose::STANDARD
            .decode(
                leaf.lines()
                    .filter(|l| !l.starts_with("-----"))
                    .collect::<String>(),
            )
            .unwrap();
        let (_, leaf) = x509_parser::parse_x509_certificate(&der).unwrap();
        let names = leaf.subject_alternative_name().unwrap().unwrap();
        assert_eq!(
            names.value.general_names,
            vec![x509_parser::extensions::GeneralName::DNSName(
                "shop.example.test"
            )]
        );
        assert!(!leaf.is_ca(), "a leaf, not a CA");
        assert_eq!(leaf.issuer().to_string(), "CN=shop ingress CA");
        assert!(
            !format!("{issued:?}").contains("PRIVATE KEY"),
            "Debug never shows the key"
        );
    }

    #[test]
    fn a_key_that_is_not_a_key_is_said_not_panicked() {
        let broken = Ca {
            cert_pem: ca().cert_pem,
            key_pem: "not a key".into(),
        };
        let why = issue(&broken, "shop.example.test", Utc::now()).unwrap_err();
        assert!(why.contains("cannot sign"), "{why}");
    }
}
