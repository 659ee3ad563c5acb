//! The JWTs sessions present to the hub: cluster tokens (agents) and backend tokens
//! (controllers). Ed25519 (`EdDSA`) only; the verifier pins the algorithm, the audience and the
//! issuer, and needs nothing but the public key.

use jsonwebtoken::{Algorithm, DecodingKey, EncodingKey, Header, Validation};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use uuid::Uuid;

use crate::common::Id;

/// The `aud` every hub token carries.
pub const HUB_AUDIENCE: &str = "kubenest-hub";

/// Seconds of clock skew tolerated on `exp`.
const LEEWAY_SECONDS: u64 = 30;

/// Who a token speaks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum ClientType {
    /// A cluster's agent.
    Cluster,
    /// The management controllers.
    Backend,
}

/// The claims of a hub token.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct Claims {
    pub iss: String,
    pub aud: String,
    /// `cluster:{cluster_id}` or `backend:{name}`.
    pub sub: String,
    pub client_type: ClientType,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cluster_id: Option<Id>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub org_id: Option<Id>,
    /// Raised on rotation; the hub refuses versions below the cluster's floor.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub token_version: Option<u64>,
    pub iat: i64,
    /// Cluster tokens are long-lived (rotation revokes them); backend tokens expire.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exp: Option<i64>,
    pub jti: Uuid,
}

/// A verified identity.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Identity {
    Cluster {
        cluster_id: Id,
        org_id: Id,
        token_version: u64,
    },
    Backend {
        subject: String,
    },
}

impl Identity {
    /// Which kind of client this is.
    pub fn client_type(&self) -> ClientType {
        match self {
            Self::Cluster { .. } => ClientType::Cluster,
            Self::Backend { .. } => ClientType::Backend,
        }
    }
}

/// Why a token was refused. The text never contains the token.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TokenError {
    #[error("invalid key: {0}")]
    Key(String),
    #[error("token refused: {0}")]
    Invalid(String),
    #[error("token is for a {actual:?} client, not a {expected:?} client")]
    WrongClientType {
        expected: ClientType,
        actual: ClientType,
    },
    #[error("cluster token without {0}")]
    MissingClaim(&'static str),
}

/// Mints hub tokens with the control plane's Ed25519 private key.
pub struct TokenSigner {
    key: EncodingKey,
    issuer: String,
}

impl std::fmt::Debug for TokenSigner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TokenSigner")
            .field("issuer", &self.issuer)
            .finish_non_exhaustive()
    }
}

impl TokenSigner {
    /// From a PKCS#8 PEM Ed25519 private key.
    pub fn from_pem(private_key_pem: &[u8], issuer: impl Into<String>) -> Result<Self, TokenError> {
        let key = EncodingKey::from_ed_pem(private_key_pem)
            .map_err(|e| TokenError::Key(e.to_string()))?;
        Ok(Self {
            key,
            issuer: issuer.into(),
        })
    }

    /// A cluster token for an agent.
    pub fn cluster_token(
        &self,
        cluster_id: &Id,
        org_id: &Id,
        token_version: u64,
    ) -> Result<String, TokenError> {
        self.sign(&Claims {
            iss: self.issuer.clone(),
            aud: HUB_AUDIENCE.into(),
            sub: format!("cluster:{cluster_id}"),
            client_type: ClientType::Cluster,
            cluster_id: Some(cluster_id.clone()),
            org_id: Some(org_id.clone()),
            token_version: Some(token_version),
            iat: chrono::Utc::now().timestamp(),
            exp: None,
            jti: Uuid::new_v4(),
        })
    }

    /// A backend token for the controllers, valid for `ttl`.
    pub fn backend_token(
        &self,
        name: &str,
        ttl: std::time::Duration,
    ) -> Result<String, TokenError> {
        let now = chrono::Utc::now().timestamp();
        self.sign(&Claims {
            iss: self.issuer.clone(),
            aud: HUB_AUDIENCE.into(),
            sub: format!("backend:{name}"),
            client_type: ClientType::Backend,
            cluster_id: None,
            org_id: None,
            token_version: None,
            iat: now,
            exp: Some(now.saturating_add(i64::try_from(ttl.as_secs()).unwrap_or(i64::MAX))),
            jti: Uuid::new_v4(),
        })
    }

    /// Signs arbitrary claims (tests use it to craft bad tokens).
    pub fn sign(&self, claims: &Claims) -> Result<String, TokenError> {
        jsonwebtoken::encode(&Header::new(Algorithm::EdDSA), claims, &self.key)
            .map_err(|e| TokenError::Key(e.to_string()))
    }
}

/// Verifies hub tokens with the control plane's Ed25519 public key.
pub struct TokenVerifier {
    key: DecodingKey,
    validation: Validation,
}

impl std::fmt::Debug for TokenVerifier {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TokenVerifier").finish_non_exhaustive()
    }
}

impl TokenVerifier {
    /// From an SPKI PEM Ed25519 public key, accepting tokens of `issuer` for the hub.
    pub fn from_pem(public_key_pem: &[u8], issuer: &str) -> Result<Self, TokenError> {
        let key =
            DecodingKey::from_ed_pem(public_key_pem).map_err(|e| TokenError::Key(e.to_string()))?;
        let mut validation = Validation::new(Algorithm::EdDSA);
        // Pinned: the header's `alg` must be EdDSA; `none` and HMAC are refused outright.
        validation.algorithms = vec![Algorithm::EdDSA];
        validation.set_audience(&[HUB_AUDIENCE]);
        validation.set_issuer(&[issuer]);
        validation.set_required_spec_claims(&["iss", "aud", "sub"]);
        validation.validate_exp = true;
        validation.leeway = LEEWAY_SECONDS;
        Ok(Self { key, validation })
    }

    /// Verifies `token` and checks it is for `expected` clients.
    pub fn verify(&self, token: &str, expected: ClientType) -> Result<Identity, TokenError> {
        let data = jsonwebtoken::decode::<Claims>(token, &self.key, &self.validation)
            .map_err(|e| TokenError::Invalid(e.kind().to_string_safe()))?;
        let claims = data.claims;
        if claims.client_type != expected {
            return Err(TokenError::WrongClientType {
                expected,
                actual: claims.client_type,
            });
        }
        match claims.client_type {
            ClientType::Backend => Ok(Identity::Backend {
                subject: claims.sub,
            }),
            ClientType::Cluster => Ok(Identity::Cluster {
                cluster_id: claims
                    .cluster_id
                    .ok_or(TokenError::MissingClaim("cluster_id"))?,
                org_id: claims.org_id.ok_or(TokenError::MissingClaim("org_id"))?,
                token_version: claims
                    .token_version
                    .ok_or(TokenError::MissingClaim("token_version"))?,
            }),
        }
    }
}

/// jsonwebtoken's error kinds, described without echoing input.
trait SafeDescription {
    fn to_string_safe(&self) -> String;
}

impl SafeDescription for jsonwebtoken::errors::ErrorKind {
    fn to_string_safe(&self) -> String {
        use jsonwebtoken::errors::ErrorKind as K;
        match self {
            K::InvalidToken => "malformed token".into(),
            K::InvalidSignature => "bad signature".into(),
            K::InvalidAlgorithm | K::InvalidAlgorithmName => "algorithm not allowed".into(),
            K::ExpiredSignature => "expired".into(),
            K::InvalidAudience => "wrong audience".into(),
            K::InvalidIssuer => "wrong issuer".into(),
            K::MissingRequiredClaim(claim) => format!("missing claim {claim}"),
            K::ImmatureSignature => "not valid yet".into(),
            _ => "invalid token".into(),
        }
    }
}
