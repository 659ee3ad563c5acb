//! Users, refresh-token families and failed logins: the password hashing, the token minting and
//! the limits, over the tables of `kubenest-store`. Every replica reads and writes the same rows,
//! so two replicas behind one address behave as one.
//!
//! Failed logins lock a user out only at the address they failed from (and an address that
//! fails for many users): were a user's failures counted across addresses, anyone could keep
//! anyone out by failing on purpose.

use argon2::password_hash::{PasswordHash, PasswordHasher, PasswordVerifier, SaltString};
use argon2::{Algorithm, Argon2, Params, Version};
use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use kubenest_store::{Database, LoginFailures, RefreshTokens, Rotation, StoreError, User, Users};
use rand::RngCore;
use sha2::{Digest, Sha256};

/// How long a refresh token lives.
pub const REFRESH_TTL: chrono::Duration = chrono::Duration::days(7);
/// How far back failed logins count.
pub const FAILURE_WINDOW: chrono::Duration = chrono::Duration::minutes(15);
/// Failures for one user from one address before that user is refused there.
pub const MAX_FAILURES_PER_USER_AND_ADDRESS: i64 = 5;
/// Failures from one address, for any users, before every login from it is refused.
pub const MAX_FAILURES_PER_ADDRESS: i64 = 20;

/// What a refresh attempt found.
#[derive(Debug, PartialEq, Eq)]
pub enum Refresh {
    /// The token was current: here is its successor, for `user`.
    Rotated { user: Box<User>, token: String },
    /// Unknown, expired or revoked, or its user is disabled.
    Invalid,
    /// Already used once: its whole family is now revoked.
    Reused,
}

fn argon2() -> Argon2<'static> {
    // OWASP's argon2id baseline: 19 MiB, 2 passes, 1 lane.
    let params = Params::new(19 * 1024, 2, 1, None).unwrap_or_default();
    Argon2::new(Algorithm::Argon2id, Version::V0x13, params)
}

/// An argon2id hash of `password` (PHC string).
pub fn hash_password(password: &str) -> Result<String, argon2::password_hash::Error> {
    let mut salt = [0u8; 16];
    rand::rng().fill_bytes(&mut salt);
    let salt = SaltString::encode_b64(&salt)?;
    Ok(argon2()
        .hash_password(password.as_bytes(), &salt)?
        .to_string())
}

/// Whether `password` matches `hash`.
pub fn verify_password(password: &str, hash: &str) -> bool {
    PasswordHash::new(hash)
        .map(|parsed| {
            argon2()
                .verify_password(password.as_bytes(), &parsed)
                .is_ok()
        })
        .unwrap_or(false)
}

fn digest(token: &str) -> Vec<u8> {
    Sha256::digest(token.as_bytes()).to_vec()
}

fn new_token() -> String {
    let mut bytes = [0u8; 32];
    rand::rng().fill_bytes(&mut bytes);
    URL_SAFE_NO_PAD.encode(bytes)
}

/// What managing an account can fail with.
#[derive(Debug, thiserror::Error)]
pub enum AccountError {
    /// The password could not be hashed.
    #[error("hashing a password: {0}")]
    Hash(argon2::password_hash::Error),
    /// The store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// Users and sessions.
#[derive(Debug, Clone)]
pub struct Accounts {
    users: Users,
    refresh_tokens: RefreshTokens,
    login_failures: LoginFailures,
    /// A hash to verify against when the user does not exist, so timing does not tell.
    decoy: String,
}

impl Accounts {
    /// The accounts kept in `database`.
    pub fn new(database: &Database) -> Result<Self, argon2::password_hash::Error> {
        Ok(Self {
            users: database.users(),
            refresh_tokens: database.refresh_tokens(),
            login_failures: database.login_failures(),
            decoy: hash_password("decoy password for unknown users")?,
        })
    }

    /// Creates the bootstrap administrator unless a user of that name exists.
    pub async fn bootstrap_admin(&self, username: &str, password: &str) -> anyhow::Result<bool> {
        let hash = hash_password(password).map_err(|e| anyhow::anyhow!("{e}"))?;
        Ok(self.users.create_admin_if_absent(username, &hash).await?)
    }

    /// Creates a user; [`StoreError::UserExists`] if the name is taken.
    pub async fn create_user(
        &self,
        username: &str,
        password: &str,
        platform_admin: bool,
    ) -> Result<User, AccountError> {
        let hash = hash_password(password).map_err(AccountError::Hash)?;
        Ok(self.users.create(username, &hash, platform_admin).await?)
    }

    /// The user of that name, if any.
    pub async fn user(&self, username: &str) -> Result<Option<User>, StoreError> {
        self.users.get(username).await
    }

    /// The user of that id, if any.
    pub async fn user_by_id(&self, id: uuid::Uuid) -> Result<Option<User>, StoreError> {
        self.users.by_id(id).await
    }

    /// The users of these ids that exist.
    pub async fn users_by_ids(&self, ids: &[uuid::Uuid]) -> Result<Vec<User>, StoreError> {
        self.users.by_ids(ids).await
    }

    /// Every user, by name.
    pub async fn users(&self) -> Result<Vec<User>, StoreError> {
        self.users.list().await
    }

    /// Deletes a user and, with them, every refresh token; the deleted user, if there was one.
    pub async fn delete_user(&self, username: &str) -> Result<Option<User>, StoreError> {
        self.users.delete(username).await
    }

    /// Disables a user (their sessions and access tokens end) or enables them again.
    pub async fn set_disabled(&self, username: &str, disabled: bool) -> Result<bool, StoreError> {
        self.users.set_disabled(username, disabled).await
    }

    /// Sets a user's password and ends every session started with the old one.
    pub async fn set_password(&self, username: &str, password: &str) -> Result<bool, AccountError> {
        let hash = hash_password(password).map_err(AccountError::Hash)?;
        Ok(self.users.set_password_hash(username, &hash).await?)
    }

    /// Seconds until another attempt is allowed, if `username` failed too often from
    /// `address`, or anyone did.
    pub async fn login_blocked(
        &self,
        username: &str,
        address: &str,
    ) -> Result<Option<u64>, StoreError> {
        let now = chrono::Utc::now();
        let failures = self
            .login_failures
            .since(username, address, now - FAILURE_WINDOW)
            .await?;
        let free_at = [
            (failures.by_pair, MAX_FAILURES_PER_USER_AND_ADDRESS),
            (failures.by_address, MAX_FAILURES_PER_ADDRESS),
        ]
        .into_iter()
        .filter(|(tally, max)| tally.count >= *max)
        .map(|(tally, _)| tally.oldest.unwrap_or(now) + FAILURE_WINDOW)
        .max();
        Ok(free_at.map(|at| u64::try_from((at - now).num_seconds().max(1)).unwrap_or(1)))
    }

    /// The user if `password` is theirs, and their failures from `address` are forgotten;
    /// records a failure from `address` otherwise.
    pub async fn check_login(
        &self,
        username: &str,
        password: &str,
        address: &str,
    ) -> Result<Option<User>, StoreError> {
        let user = self.user(username).await?;
        let hash = user
            .as_ref()
            .map_or(self.decoy.as_str(), |u| &u.password_hash);
        let matches = {
            let (password, hash) = (password.to_owned(), hash.to_owned());
            tokio::task::spawn_blocking(move || verify_password(&password, &hash))
                .await
                .unwrap_or(false)
        };
        if matches && user.is_some() {
            self.login_failures.clear(username, address).await?;
            return Ok(user);
        }
        self.login_failures.record(username, address).await?;
        Ok(None)
    }

    /// Starts a refresh-token family for a fresh login; returns its first token.
    pub async fn start_family(&self, username: &str) -> Result<String, StoreError> {
        let token = new_token();
        self.refresh_tokens
            .start_family(&digest(&token), username, chrono::Utc::now() + REFRESH_TTL)
            .await?;
        Ok(token)
    }

    /// Uses `token` once: issues its successor, or revokes its family when it was used before.
    pub async fn refresh(&self, token: &str) -> Result<Refresh, StoreError> {
        let next = new_token();
        let rotation = self
            .refresh_tokens
            .rotate(
                &digest(token),
                &digest(&next),
                chrono::Utc::now() + REFRESH_TTL,
            )
            .await?;
        Ok(match rotation {
            Rotation::Rotated { username, .. } => match self.users.get(&username).await? {
                Some(user) => Refresh::Rotated {
                    user: Box::new(user),
                    token: next,
                },
                // Deleted since the rotation began: its tokens went with it.
                None => Refresh::Invalid,
            },
            Rotation::Invalid => Refresh::Invalid,
            Rotation::Reused { username, family } => {
                tracing::warn!(%username, %family, "refresh token reused: family revoked");
                Refresh::Reused
            }
        })
    }

    /// Revokes the family of `token` (logout).
    pub async fn revoke_family_of(&self, token: &str) -> Result<(), StoreError> {
        self.refresh_tokens.revoke_family_of(&digest(token)).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn passwords_hash_with_argon2id_and_verify() {
        let hash = hash_password("correct horse").unwrap();
        assert!(hash.starts_with("$argon2id$v=19$m=19456,t=2,p=1$"));
        assert!(verify_password("correct horse", &hash));
        assert!(!verify_password("battery staple", &hash));
        assert!(!verify_password("correct horse", "not a hash"));
    }
}
