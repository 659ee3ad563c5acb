//! The token matrix: only a correctly signed EdDSA token of the right issuer, audience and client
//! type is accepted.

use std::time::Duration;

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD as B64;
use jsonwebtoken::{Algorithm, EncodingKey, Header};
use kubenest_contracts::{
    Claims, ClientType, HUB_AUDIENCE, Id, Identity, TokenError, TokenSigner, TokenVerifier,
};

const ISSUER: &str = "kubenest-test";

fn keypair() -> (String, String) {
    let key = rcgen::KeyPair::generate_for(&rcgen::PKCS_ED25519).unwrap();
    (key.serialize_pem(), key.public_key_pem())
}

struct Keys {
    signer: TokenSigner,
    verifier: TokenVerifier,
    public_pem: String,
}

fn keys() -> Keys {
    let (private, public) = keypair();
    Keys {
        signer: TokenSigner::from_pem(private.as_bytes(), ISSUER).unwrap(),
        verifier: TokenVerifier::from_pem(public.as_bytes(), ISSUER).unwrap(),
        public_pem: public,
    }
}

fn claims(client_type: ClientType) -> Claims {
    let now = chrono::Utc::now().timestamp();
    Claims {
        iss: ISSUER.into(),
        aud: HUB_AUDIENCE.into(),
        sub: "cluster:c1".into(),
        client_type,
        cluster_id: Some(Id::from("c1")),
        org_id: Some(Id::from("acme")),
        token_version: Some(1),
        iat: now,
        exp: Some(now + 600),
        jti: uuid::Uuid::new_v4(),
    }
}

fn refused(result: Result<Identity, TokenError>) -> TokenError {
    result.expect_err("token was accepted")
}

#[test]
fn valid_cluster_and_backend_tokens_are_accepted() {
    let k = keys();
    let token = k
        .signer
        .cluster_token(&Id::from("c1"), &Id::from("acme"), 3)
        .unwrap();
    assert_eq!(
        k.verifier.verify(&token, ClientType::Cluster).unwrap(),
        Identity::Cluster {
            cluster_id: Id::from("c1"),
            org_id: Id::from("acme"),
            token_version: 3
        }
    );
    let token = k
        .signer
        .backend_token("controllers", Duration::from_secs(60))
        .unwrap();
    assert_eq!(
        k.verifier.verify(&token, ClientType::Backend).unwrap(),
        Identity::Backend {
            subject: "backend:controllers".into()
        }
    );
}

#[test]
fn an_expired_token_is_refused() {
    let k = keys();
    let mut c = claims(ClientType::Backend);
    c.exp = Some(chrono::Utc::now().timestamp() - 3600);
    let token = k.signer.sign(&c).unwrap();
    let error = refused(k.verifier.verify(&token, ClientType::Backend));
    assert_eq!(error, TokenError::Invalid("expired".into()));
}

#[test]
fn wrong_audience_and_wrong_issuer_are_refused() {
    let k = keys();
    let mut c = claims(ClientType::Cluster);
    c.aud = "kubenest-api".into();
    let error = refused(
        k.verifier
            .verify(&k.signer.sign(&c).unwrap(), ClientType::Cluster),
    );
    assert_eq!(error, TokenError::Invalid("wrong audience".into()));

    let mut c = claims(ClientType::Cluster);
    c.iss = "someone-else".into();
    let error = refused(
        k.verifier
            .verify(&k.signer.sign(&c).unwrap(), ClientType::Cluster),
    );
    assert_eq!(error, TokenError::Invalid("wrong issuer".into()));
}

#[test]
fn alg_none_is_refused() {
    let k = keys();
    let header = B64.encode(br#"{"alg":"none","typ":"JWT"}"#);
    let payload = B64.encode(serde_json::to_vec(&claims(ClientType::Backend)).unwrap());
    for token in [
        format!("{header}.{payload}."),
        format!("{header}.{payload}"),
    ] {
        refused(k.verifier.verify(&token, ClientType::Backend));
    }
}

#[test]
fn hs256_signed_with_the_public_key_bytes_is_refused() {
    let k = keys();
    let key = EncodingKey::from_secret(k.public_pem.as_bytes()).unwrap();
    let token = jsonwebtoken::encode(
        &Header::new(Algorithm::HS256),
        &claims(ClientType::Backend),
        &key,
    )
    .unwrap();
    let error = refused(k.verifier.verify(&token, ClientType::Backend));
    assert_eq!(error, TokenError::Invalid("algorithm not allowed".into()));
}

#[test]
fn a_tampered_payload_is_refused() {
    let k = keys();
    let token = k
        .signer
        .cluster_token(&Id::from("c1"), &Id::from("acme"), 1)
        .unwrap();
    let parts: Vec<&str> = token.split('.').collect();
    let mut c: Claims = serde_json::from_slice(&B64.decode(parts[1]).unwrap()).unwrap();
    c.token_version = Some(99);
    c.cluster_id = Some(Id::from("someone-elses-cluster"));
    let forged = format!(
        "{}.{}.{}",
        parts[0],
        B64.encode(serde_json::to_vec(&c).unwrap()),
        parts[2]
    );
    let error = refused(k.verifier.verify(&forged, ClientType::Cluster));
    assert_eq!(error, TokenError::Invalid("bad signature".into()));
}

#[test]
fn a_token_signed_by_another_key_is_refused() {
    let k = keys();
    let other = keys();
    let token = other
        .signer
        .cluster_token(&Id::from("c1"), &Id::from("acme"), 1)
        .unwrap();
    let error = refused(k.verifier.verify(&token, ClientType::Cluster));
    assert_eq!(error, TokenError::Invalid("bad signature".into()));
}

#[test]
fn cluster_and_backend_tokens_are_not_interchangeable() {
    let k = keys();
    let cluster = k
        .signer
        .cluster_token(&Id::from("c1"), &Id::from("acme"), 1)
        .unwrap();
    let backend = k
        .signer
        .backend_token("controllers", Duration::from_secs(60))
        .unwrap();
    assert_eq!(
        refused(k.verifier.verify(&cluster, ClientType::Backend)),
        TokenError::WrongClientType {
            expected: ClientType::Backend,
            actual: ClientType::Cluster
        }
    );
    assert_eq!(
        refused(k.verifier.verify(&backend, ClientType::Cluster)),
        TokenError::WrongClientType {
            expected: ClientType::Cluster,
            actual: ClientType::Backend
        }
    );
}

#[test]
fn a_cluster_token_without_its_claims_is_refused() {
    let k = keys();
    let mut c = claims(ClientType::Cluster);
    c.token_version = None;
    let error = refused(
        k.verifier
            .verify(&k.signer.sign(&c).unwrap(), ClientType::Cluster),
    );
    assert_eq!(error, TokenError::MissingClaim("token_version"));
}

#[test]
fn garbage_is_refused() {
    let k = keys();
    for token in ["", "a.b.c", "not a token", "...."] {
        refused(k.verifier.verify(token, ClientType::Cluster));
    }
}
