//! What a project's ingress CA must be before it leaves for the cluster (pure): one PEM
//! CERTIFICATE that is a CA, valid now, and one PEM private key that rcgen can sign with and
//! whose public key is the certificate's. Refusals name the field and never quote the key.

use x509_parser::certificate::X509Certificate;

use crate::error::{ApiError, ApiResult};

/// The most PEM text either field takes (a 4096-bit RSA key is about 3.3 KiB).
pub const MAX_PEM_BYTES: usize = 16 * 1024;

/// The labels of the private keys taken: PKCS#8, SEC1 (EC) and PKCS#1 (RSA).
const KEY_LABELS: [&str; 3] = ["PRIVATE KEY", "EC PRIVATE KEY", "RSA PRIVATE KEY"];

/// A CA that passed every check, in canonical PEM (one block each, nothing around it).
pub struct CheckedCa {
    pub certificate: String,
    /// Goes to the cluster only; never logged, stored or echoed.
    pub private_key: String,
    pub about: Certificate,
}

impl std::fmt::Debug for CheckedCa {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CheckedCa")
            .field("about", &self.about)
            .field("private_key", &"[redacted]")
            .finish_non_exhaustive()
    }
}

/// What a CA certificate says of itself.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Certificate {
    /// The subject's distinguished name, e.g. `CN=Shop CA`.
    pub subject: String,
    /// RFC 3339.
    pub not_after: String,
}

/// The PEM blocks of `text` (text between blocks is ignored, as RFC 7468 allows), or why it is
/// no PEM. The reasons never quote the text.
fn blocks(text: &str) -> Result<Vec<pem::Pem>, String> {
    // The crate skips a BEGIN without its END; said here rather than "no PEM block".
    if text.matches("-----BEGIN ").count() > text.matches("-----END ").count() {
        return Err("a PEM block has no END line".into());
    }
    let found = pem::parse_many(text).map_err(|error| match error {
        pem::PemError::MismatchedTags(begin, end) => {
            format!("a BEGIN {begin} block ends with END {end}")
        }
        pem::PemError::InvalidData(_) => "the body of a PEM block is not base64".into(),
        pem::PemError::InvalidHeader(_) => "a PEM block has malformed headers".into(),
        _ => "malformed PEM".into(),
    })?;
    if let Some(block) = found.iter().find(|b| b.headers().iter().next().is_some()) {
        return Err(format!(
            "the {} block has headers (an encrypted legacy key?): give it unencrypted, e.g. \
             `openssl pkey -in key.pem`",
            block.tag()
        ));
    }
    Ok(found)
}

/// A block as PEM, with `\n` line ends.
fn encoded(block: &pem::Pem) -> String {
    pem::encode_config(
        block,
        pem::EncodeConfig::new().set_line_ending(pem::LineEnding::LF),
    )
}

/// The one block of `text`, or a 422 on `field` saying what is wrong with it.
fn one_block(field: &str, text: &str, what: &str) -> ApiResult<pem::Pem> {
    if text.len() > MAX_PEM_BYTES {
        return Err(ApiError::invalid(
            field,
            format!("at most {} KiB of PEM", MAX_PEM_BYTES / 1024),
        ));
    }
    let mut found = blocks(text).map_err(|why| ApiError::invalid(field, why))?;
    match found.len() {
        1 => Ok(found.remove(0)),
        0 => Err(ApiError::invalid(
            field,
            format!("no PEM block: give {what} as PEM (-----BEGIN ...-----)"),
        )),
        n => Err(ApiError::invalid(
            field,
            format!("{n} PEM blocks: give exactly one, {what}"),
        )),
    }
}

/// Seconds since the epoch as RFC 3339.
fn rfc3339(seconds: i64) -> String {
    chrono::DateTime::from_timestamp(seconds, 0)
        .map(|t| t.to_rfc3339_opts(chrono::SecondsFormat::Secs, true))
        .unwrap_or_else(|| seconds.to_string())
}

/// The certificate of `block`, or a 422 on `certificate`.
fn parse(block: &pem::Pem) -> ApiResult<X509Certificate<'_>> {
    let field = "certificate";
    if block.tag() != "CERTIFICATE" {
        return Err(ApiError::invalid(
            field,
            format!(
                "a {} block: the certificate is a CERTIFICATE block",
                block.tag()
            ),
        ));
    }
    match x509_parser::parse_x509_certificate(block.contents()) {
        Ok(([], certificate)) => Ok(certificate),
        Ok(_) => Err(ApiError::invalid(
            field,
            "the CERTIFICATE block has bytes after its certificate",
        )),
        Err(_) => Err(ApiError::invalid(
            field,
            "the CERTIFICATE block is not an X.509 certificate",
        )),
    }
}

/// What `certificate` says of itself.
fn about(certificate: &X509Certificate<'_>) -> Certificate {
    Certificate {
        subject: certificate.subject().to_string(),
        not_after: rfc3339(certificate.validity().not_after.timestamp()),
    }
}

/// A CA that can sign now: basicConstraints CA:TRUE, keyCertSign when it limits its key's
/// usage, and `now` (seconds since the epoch) within its validity.
fn check_ca(certificate: &X509Certificate<'_>, now: i64) -> ApiResult<()> {
    let field = "certificate";
    let ca = certificate
        .basic_constraints()
        .map_err(|_| ApiError::invalid(field, "its basicConstraints extension is malformed"))?
        .is_some_and(|constraints| constraints.value.ca);
    if !ca {
        return Err(ApiError::invalid(
            field,
            "not a CA certificate: its basicConstraints must say CA:TRUE to sign the \
             ingresses' certificates",
        ));
    }
    let usage = certificate
        .key_usage()
        .map_err(|_| ApiError::invalid(field, "its keyUsage extension is malformed"))?;
    if usage.is_some_and(|usage| !usage.value.key_cert_sign()) {
        return Err(ApiError::invalid(
            field,
            "its keyUsage lacks keyCertSign: it may not sign certificates",
        ));
    }
    let validity = certificate.validity();
    let (from, until) = (
        validity.not_before.timestamp(),
        validity.not_after.timestamp(),
    );
    if now < from {
        return Err(ApiError::invalid(
            field,
            format!("not valid yet: valid from {}", rfc3339(from)),
        ));
    }
    if now > until {
        return Err(ApiError::invalid(
            field,
            format!("expired: valid until {}", rfc3339(until)),
        ));
    }
    Ok(())
}

/// The key of `private_key` (canonical PKCS#8 PEM), checked against `certificate`'s public
/// key; 422s on `private_key` that never quote it.
fn check_key(private_key: &str, certificate: &X509Certificate<'_>) -> ApiResult<String> {
    let field = "private_key";
    let block = one_block(field, private_key, "the CA's private key")?;
    if !KEY_LABELS.contains(&block.tag()) {
        let why = if block.tag().contains("ENCRYPTED") {
            "an encrypted key: give it unencrypted, e.g. `openssl pkey -in key.pem`".to_owned()
        } else {
            format!(
                "a {} block: the key is a PRIVATE KEY, EC PRIVATE KEY or RSA PRIVATE KEY block",
                block.tag()
            )
        };
        return Err(ApiError::invalid(field, why));
    }
    let key = rcgen::KeyPair::from_pem(&encoded(&block)).map_err(|_| {
        let hint = if block.tag() == "PRIVATE KEY" {
            ""
        } else {
            "; give it as PKCS#8, e.g. `openssl pkcs8 -topk8 -nocrypt -in key.pem`"
        };
        ApiError::invalid(
            field,
            format!(
                "the {} block is no key kubenest can sign with (PKCS#8 ECDSA P-256 or \
                 P-384, Ed25519 or RSA){hint}",
                block.tag()
            ),
        )
    })?;
    use rcgen::PublicKeyData as _;
    let public = certificate.public_key();
    let same = public.raw == key.subject_public_key_info().as_slice()
        || public.subject_public_key.data.as_ref() == key.der_bytes();
    if !same {
        return Err(ApiError::invalid(
            field,
            "the key does not match the certificate: its public key is not the certificate's",
        ));
    }
    // As PKCS#8, whatever the PEM said: what the agent's issuer reads back.
    Ok(key.serialize_pem())
}

/// Checks a CA given as PEM (`certificate`, `private_key`) at time `now` (seconds since the
/// epoch).
pub fn check(certificate: &str, private_key: &str, now: i64) -> ApiResult<CheckedCa> {
    let block = one_block(
        "certificate",
        certificate,
        "the CA's own CERTIFICATE (no chain, no key)",
    )?;
    let parsed = parse(&block)?;
    check_ca(&parsed, now)?;
    let private_key = check_key(private_key, &parsed)?;
    Ok(CheckedCa {
        certificate: encoded(&block),
        private_key,
        about: about(&parsed),
    })
}

/// What a certificate kubenest stored (canonical PEM) says of itself; `None` if it is no
/// longer one (edited by hand).
pub fn describe(certificate: &str) -> Option<Certificate> {
    let block = blocks(certificate).ok()?.into_iter().next()?;
    let parsed = parse(&block).ok()?;
    Some(about(&parsed))
}

#[cfg(test)]
mod tests {
    use super::*;
    use rcgen::{
        BasicConstraints, CertificateParams, DnType, IsCa, KeyPair, KeyUsagePurpose, date_time_ymd,
    };

    const NOW: i64 = 1_800_000_000; // 2027-01-15

    fn ca(key: &KeyPair, is_ca: bool, years: (i32, i32)) -> String {
        let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
        params
            .distinguished_name
            .push(DnType::CommonName, "Shop ingress CA");
        if is_ca {
            params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
            params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
        }
        params.not_before = date_time_ymd(years.0, 1, 1);
        params.not_after = date_time_ymd(years.1, 1, 1);
        params.self_signed(key).unwrap().pem()
    }

    fn field(result: ApiResult<CheckedCa>) -> (String, String) {
        let error = result.unwrap_err();
        assert_eq!(error.status, 422, "{}", error.message);
        (error.field.unwrap_or_default(), error.message)
    }

    #[test]
    fn a_ca_with_its_key_is_taken_in_canonical_pem() {
        for algorithm in [&rcgen::PKCS_ECDSA_P256_SHA256, &rcgen::PKCS_ED25519] {
            let key = KeyPair::generate_for(algorithm).unwrap();
            let pem = ca(&key, true, (2025, 2035));
            let noisy = format!("Subject: the shop's CA\n{pem}\n");
            let checked = check(&noisy, &key.serialize_pem(), NOW).unwrap();
            assert_eq!(checked.certificate, pem.replace("\r\n", "\n"));
            assert_eq!(checked.about.subject, "CN=Shop ingress CA");
            assert_eq!(checked.about.not_after, "2035-01-01T00:00:00Z");
            assert_eq!(describe(&checked.certificate), Some(checked.about.clone()));
            assert!(!format!("{checked:?}").contains("PRIVATE"));
        }
    }

    #[test]
    fn what_is_no_usable_ca_is_refused_naming_the_field() {
        let key = KeyPair::generate().unwrap();
        let other = KeyPair::generate().unwrap();
        let good = ca(&key, true, (2025, 2035));
        let pem = key.serialize_pem();
        let cases = [
            (check("not pem", &pem, NOW), "certificate", "no PEM block"),
            (
                check(&format!("{good}{good}"), &pem, NOW),
                "certificate",
                "2 PEM blocks",
            ),
            (check(&pem, &pem, NOW), "certificate", "a PRIVATE KEY block"),
            (
                check(&good.replace("-----END CERTIFICATE-----", ""), &pem, NOW),
                "certificate",
                "no END line",
            ),
            (
                check(
                    "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n",
                    &pem,
                    NOW,
                ),
                "certificate",
                "not an X.509 certificate",
            ),
            (
                check(&ca(&key, false, (2025, 2035)), &pem, NOW),
                "certificate",
                "not a CA",
            ),
            (
                check(&ca(&key, true, (2020, 2021)), &pem, NOW),
                "certificate",
                "expired",
            ),
            (
                check(&ca(&key, true, (2030, 2035)), &pem, NOW),
                "certificate",
                "not valid yet",
            ),
            (
                check(&good, &other.serialize_pem(), NOW),
                "private_key",
                "does not match",
            ),
            (
                check(&good, &good, NOW),
                "private_key",
                "a CERTIFICATE block",
            ),
            (check(&good, "", NOW), "private_key", "no PEM block"),
            (
                check(
                    &good,
                    "-----BEGIN ENCRYPTED PRIVATE KEY-----\nAAAA\n-----END ENCRYPTED PRIVATE KEY-----",
                    NOW,
                ),
                "private_key",
                "encrypted",
            ),
            (
                check(
                    &good,
                    "-----BEGIN EC PRIVATE KEY-----\nMHcCAQEEIA==\n-----END EC PRIVATE KEY-----",
                    NOW,
                ),
                "private_key",
                "openssl pkcs8 -topk8",
            ),
            (
                check(&good, &"A".repeat(MAX_PEM_BYTES + 1), NOW),
                "private_key",
                "at most 16 KiB",
            ),
        ];
        let secret = pem.lines().nth(1).unwrap();
        for (result, want_field, want_reason) in cases {
            let (field, reason) = field(result);
            assert_eq!(field, want_field, "{reason}");
            assert!(reason.contains(want_reason), "{reason}");
            assert!(!reason.contains(secret), "the key is quoted: {reason}");
        }
    }
}
