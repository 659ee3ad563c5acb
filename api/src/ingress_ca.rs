//! A project's ingress CA.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// A CA for the project's ingresses.
#[derive(Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct IngressCaBody {
    /// The CA's certificate: one PEM `CERTIFICATE` block, basicConstraints CA:TRUE, valid now.
    #[schemars(length(max = 16384))]
    pub certificate: String,
    /// Its private key: one PEM `PRIVATE KEY`, `EC PRIVATE KEY` or `RSA PRIVATE KEY` block,
    /// unencrypted. Never stored or echoed by kubenest.
    #[schemars(length(max = 16384))]
    pub private_key: String,
}

/// The project's ingress CA (never its key).
#[derive(Debug, Serialize, Deserialize, JsonSchema)]
pub struct IngressCaResponse {
    pub project: String,
    /// The `kubernetes.io/tls` Secret in the project's namespace.
    pub secret: String,
    /// The CA's certificate, PEM.
    pub certificate: String,
    /// Its subject, e.g. `CN=Shop CA`.
    pub subject: String,
    /// When it expires (RFC 3339).
    pub not_after: String,
}

/// A removed ingress CA.
#[derive(Debug, Serialize, Deserialize, JsonSchema)]
pub struct IngressCaRemoved {
    pub project: String,
    /// The Secret removed from the project's namespace.
    pub secret: String,
}

/// The private key never reaches a log.
impl std::fmt::Debug for IngressCaBody {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("IngressCaBody")
            .field("certificate", &self.certificate)
            .field("private_key", &"[redacted]")
            .finish()
    }
}
