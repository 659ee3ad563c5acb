//! Access tokens: Ed25519-signed JWTs, 30 minutes, audience `kubenest-api`. Verification pins
//! the algorithm (EdDSA only: `alg: none` and HMAC confusion are refused), the issuer and the
//! audience, and requires `exp`, `iat`, `sub`; a leeway of 30 s absorbs clock skew.

use jsonwebtoken::{Algorithm, DecodingKey, EncodingKey, Header, Validation};
use serde::{Deserialize, Serialize};

/// The audience of access tokens: the REST API and nothing else (the hub refuses them).
pub const AUDIENCE: &str = "kubenest-api";
/// How long an access token lives.
pub const ACCESS_TTL: chrono::Duration = chrono::Duration::minutes(30);

/// What an access token says.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AccessClaims {
    pub sub: String,
    pub iss: String,
    pub aud: String,
    pub iat: i64,
    pub exp: i64,
    pub jti: String,
    /// The user is a platform administrator (when issued; requests read the current flag).
    #[serde(default)]
    pub adm: bool,
    /// The user's immutable id: a user deleted and created again under the same name is
    /// another id, so the old tokens do not speak for the new user.
    pub uid: uuid::Uuid,
    /// The user's token epoch when issued; a changed password or a disabled account raises it.
    pub epo: i32,
}

/// Who a token is issued to.
#[derive(Debug, Clone, Copy)]
pub struct Subject<'a> {
    pub username: &'a str,
    pub id: uuid::Uuid,
    pub token_epoch: i32,
    pub platform_admin: bool,
}

impl<'a> From<&'a kubenest_store::User> for Subject<'a> {
    fn from(user: &'a kubenest_store::User) -> Self {
        Self {
            username: &user.username,
            id: user.id,
            token_epoch: user.token_epoch,
            platform_admin: user.platform_admin,
        }
    }
}

/// Signs and verifies access tokens.
pub struct AccessTokens {
    encoding: EncodingKey,
    decoding: DecodingKey,
    issuer: String,
}

impl std::fmt::Debug for AccessTokens {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AccessTokens")
            .field("issuer", &self.issuer)
            .finish_non_exhaustive()
    }
}

/// Why a key or token is refused.
#[derive(Debug, thiserror::Error)]
pub enum TokenError {
    #[error("key: {0}")]
    Key(String),
    #[error("{0}")]
    Invalid(String),
}

impl AccessTokens {
    /// From an Ed25519 private key in PKCS#8 PEM.
    pub fn from_pem(private_key_pem: &str, issuer: impl Into<String>) -> Result<Self, TokenError> {
        let pair = rcgen::KeyPair::from_pem(private_key_pem)
            .map_err(|e| TokenError::Key(e.to_string()))?;
        if pair.algorithm() != &rcgen::PKCS_ED25519 {
            return Err(TokenError::Key(
                "the API signing key must be Ed25519".into(),
            ));
        }
        let encoding = EncodingKey::from_ed_pem(private_key_pem.as_bytes())
            .map_err(|e| TokenError::Key(e.to_string()))?;
        let decoding = DecodingKey::from_ed_pem(pair.public_key_pem().as_bytes())
            .map_err(|e| TokenError::Key(e.to_string()))?;
        Ok(Self {
            encoding,
            decoding,
            issuer: issuer.into(),
        })
    }

    /// A fresh access token for `user`, and when it expires.
    pub fn issue(&self, user: Subject<'_>) -> Result<(String, i64), TokenError> {
        let now = chrono::Utc::now().timestamp();
        let claims = AccessClaims {
            sub: user.username.to_owned(),
            iss: self.issuer.clone(),
            aud: AUDIENCE.to_owned(),
            iat: now,
            exp: now + ACCESS_TTL.num_seconds(),
            jti: uuid::Uuid::new_v4().to_string(),
            adm: user.platform_admin,
            uid: user.id,
            epo: user.token_epoch,
        };
        let token = jsonwebtoken::encode(&Header::new(Algorithm::EdDSA), &claims, &self.encoding)
            .map_err(|e| TokenError::Invalid(e.to_string()))?;
        Ok((token, claims.exp))
    }

    /// The claims of a valid token.
    pub fn verify(&self, token: &str) -> Result<AccessClaims, TokenError> {
        let mut validation = Validation::new(Algorithm::EdDSA);
        validation.algorithms = vec![Algorithm::EdDSA];
        validation.set_audience(&[AUDIENCE]);
        validation.set_issuer(&[&self.issuer]);
        validation.set_required_spec_claims(&["exp", "iat", "sub", "iss", "aud"]);
        // `uid` and `epo` are required by the claims' type: older tokens are refused.
        validation.leeway = 30;
        jsonwebtoken::decode::<AccessClaims>(token, &self.decoding, &validation)
            .map(|data| data.claims)
            .map_err(|e| TokenError::Invalid(e.to_string()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use base64::Engine;
    use base64::engine::general_purpose::URL_SAFE_NO_PAD;

    fn ada(admin: bool) -> Subject<'static> {
        Subject {
            username: "ada",
            id: uuid::Uuid::nil(),
            token_epoch: 1,
            platform_admin: admin,
        }
    }

    fn key() -> String {
        rcgen::KeyPair::generate_for(&rcgen::PKCS_ED25519)
            .unwrap()
            .serialize_pem()
    }

    #[test]
    fn a_token_verifies_with_its_key_issuer_and_audience_only() {
        let tokens = AccessTokens::from_pem(&key(), "kubenest").unwrap();
        let (token, _) = tokens.issue(ada(false)).unwrap();
        assert_eq!(tokens.verify(&token).unwrap().sub, "ada");
        let other_key = AccessTokens::from_pem(&key(), "kubenest").unwrap();
        assert!(other_key.verify(&token).is_err());
        let other_issuer = AccessTokens {
            issuer: "someone-else".into(),
            ..AccessTokens::from_pem(&key(), "x").unwrap()
        };
        assert!(other_issuer.verify(&token).is_err());
    }

    #[test]
    fn alg_none_is_refused() {
        let tokens = AccessTokens::from_pem(&key(), "kubenest").unwrap();
        let (token, _) = tokens.issue(ada(true)).unwrap();
        let payload = token.split('.').nth(1).unwrap();
        let header = URL_SAFE_NO_PAD.encode(br#"{"alg":"none","typ":"JWT"}"#);
        assert!(tokens.verify(&format!("{header}.{payload}.")).is_err());
    }

    #[test]
    fn an_ecdsa_key_is_not_an_api_key() {
        let ecdsa = rcgen::KeyPair::generate_for(&rcgen::PKCS_ECDSA_P256_SHA256).unwrap();
        assert!(AccessTokens::from_pem(&ecdsa.serialize_pem(), "kubenest").is_err());
    }
}
