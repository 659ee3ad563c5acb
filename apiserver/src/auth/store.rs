//! Users, refresh-token families and failed logins in PostgreSQL: every replica reads and
//! writes the same rows, so two replicas behind one address behave as one.

use argon2::password_hash::{PasswordHash, PasswordHasher, PasswordVerifier, SaltString};
use argon2::{Algorithm, Argon2, Params, Version};
use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use rand::RngCore;
use sha2::{Digest, Sha256};
use sqlx::PgPool;
use uuid::Uuid;

/// How long a refresh token lives.
pub const REFRESH_TTL: chrono::Duration = chrono::Duration::days(7);
/// Failed logins counted per user and per address.
pub const FAILURE_WINDOW: chrono::Duration = chrono::Duration::minutes(15);
pub const MAX_FAILURES_PER_USER: i64 = 5;
pub const MAX_FAILURES_PER_ADDRESS: i64 = 20;

/// A user.
#[derive(Debug, Clone, sqlx::FromRow)]
pub struct User {
    pub username: String,
    pub password_hash: String,
    pub platform_admin: bool,
    pub created_at: chrono::DateTime<chrono::Utc>,
}

/// What a refresh attempt found.
#[derive(Debug, PartialEq, Eq)]
pub enum Refresh {
    /// The token was current: here is its successor, for `username`.
    Rotated {
        username: String,
        platform_admin: bool,
        token: String,
    },
    /// Unknown, expired or revoked.
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

/// The users and sessions store.
#[derive(Debug, Clone)]
pub struct Store {
    pool: PgPool,
    /// A hash to verify against when the user does not exist, so timing does not tell.
    decoy: String,
}

impl Store {
    pub fn new(pool: PgPool) -> Result<Self, argon2::password_hash::Error> {
        Ok(Self {
            pool,
            decoy: hash_password("decoy password for unknown users")?,
        })
    }

    pub fn pool(&self) -> &PgPool {
        &self.pool
    }

    /// Creates the bootstrap administrator unless a user of that name exists.
    pub async fn bootstrap_admin(&self, username: &str, password: &str) -> anyhow::Result<bool> {
        let hash = hash_password(password).map_err(|e| anyhow::anyhow!("{e}"))?;
        let done = sqlx::query(
            "INSERT INTO users (username, password_hash, platform_admin) VALUES ($1, $2, true)
             ON CONFLICT (username) DO NOTHING",
        )
        .bind(username)
        .bind(hash)
        .execute(&self.pool)
        .await?;
        Ok(done.rows_affected() == 1)
    }

    pub async fn create_user(
        &self,
        username: &str,
        password: &str,
        platform_admin: bool,
    ) -> Result<User, sqlx::Error> {
        let hash = hash_password(password).map_err(|e| sqlx::Error::Protocol(e.to_string()))?;
        sqlx::query_as(
            "INSERT INTO users (username, password_hash, platform_admin) VALUES ($1, $2, $3)
             RETURNING *",
        )
        .bind(username)
        .bind(hash)
        .bind(platform_admin)
        .fetch_one(&self.pool)
        .await
    }

    pub async fn user(&self, username: &str) -> Result<Option<User>, sqlx::Error> {
        sqlx::query_as("SELECT * FROM users WHERE username = $1")
            .bind(username)
            .fetch_optional(&self.pool)
            .await
    }

    pub async fn users(&self) -> Result<Vec<User>, sqlx::Error> {
        sqlx::query_as("SELECT * FROM users ORDER BY username")
            .fetch_all(&self.pool)
            .await
    }

    /// Deletes a user and, with them, every refresh token.
    pub async fn delete_user(&self, username: &str) -> Result<bool, sqlx::Error> {
        let done = sqlx::query("DELETE FROM users WHERE username = $1")
            .bind(username)
            .execute(&self.pool)
            .await?;
        Ok(done.rows_affected() == 1)
    }

    pub async fn set_password(&self, username: &str, password: &str) -> Result<bool, sqlx::Error> {
        let hash = hash_password(password).map_err(|e| sqlx::Error::Protocol(e.to_string()))?;
        let mut tx = self.pool.begin().await?;
        let done = sqlx::query("UPDATE users SET password_hash = $2 WHERE username = $1")
            .bind(username)
            .bind(hash)
            .execute(&mut *tx)
            .await?;
        // A new password ends every session started with the old one.
        sqlx::query(
            "UPDATE refresh_tokens SET revoked_at = now() WHERE username = $1 AND revoked_at IS NULL",
        )
        .bind(username)
        .execute(&mut *tx)
        .await?;
        tx.commit().await?;
        Ok(done.rows_affected() == 1)
    }

    /// Seconds until another attempt is allowed, if `username` or `address` failed too often.
    pub async fn login_blocked(
        &self,
        username: &str,
        address: &str,
    ) -> Result<Option<u64>, sqlx::Error> {
        let since = chrono::Utc::now() - FAILURE_WINDOW;
        let (by_user, by_address, oldest): (i64, i64, Option<chrono::DateTime<chrono::Utc>>) =
            sqlx::query_as(
                "SELECT count(*) FILTER (WHERE username = $1),
                        count(*) FILTER (WHERE address = $2),
                        min(at)
                 FROM login_failures WHERE at > $3 AND (username = $1 OR address = $2)",
            )
            .bind(username)
            .bind(address)
            .bind(since)
            .fetch_one(&self.pool)
            .await?;
        if by_user < MAX_FAILURES_PER_USER && by_address < MAX_FAILURES_PER_ADDRESS {
            return Ok(None);
        }
        let free_at = oldest.unwrap_or_else(chrono::Utc::now) + FAILURE_WINDOW;
        let secs = (free_at - chrono::Utc::now()).num_seconds().max(1);
        Ok(Some(u64::try_from(secs).unwrap_or(1)))
    }

    /// The user if `password` is theirs; records a failure otherwise.
    pub async fn check_login(
        &self,
        username: &str,
        password: &str,
        address: &str,
    ) -> Result<Option<User>, sqlx::Error> {
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
            sqlx::query("DELETE FROM login_failures WHERE username = $1")
                .bind(username)
                .execute(&self.pool)
                .await?;
            return Ok(user);
        }
        sqlx::query("INSERT INTO login_failures (username, address) VALUES ($1, $2)")
            .bind(username)
            .bind(address)
            .execute(&self.pool)
            .await?;
        sqlx::query("DELETE FROM login_failures WHERE at < now() - interval '1 day'")
            .execute(&self.pool)
            .await?;
        Ok(None)
    }

    /// Starts a refresh-token family for a fresh login; returns its first token.
    pub async fn start_family(&self, username: &str) -> Result<String, sqlx::Error> {
        let token = new_token();
        sqlx::query(
            "INSERT INTO refresh_tokens (token_hash, family_id, username, expires_at)
             VALUES ($1, $2, $3, $4)",
        )
        .bind(digest(&token))
        .bind(Uuid::new_v4())
        .bind(username)
        .bind(chrono::Utc::now() + REFRESH_TTL)
        .execute(&self.pool)
        .await?;
        Ok(token)
    }

    /// Uses `token` once: issues its successor, or revokes its family when it was used before.
    pub async fn refresh(&self, token: &str) -> Result<Refresh, sqlx::Error> {
        let mut tx = self.pool.begin().await?;
        let row: Option<(Uuid, String, bool, bool, bool, bool)> = sqlx::query_as(
            "SELECT t.family_id, t.username, u.platform_admin, t.used_at IS NOT NULL,
                    t.revoked_at IS NOT NULL, t.expires_at < now()
             FROM refresh_tokens t JOIN users u ON u.username = t.username
             WHERE t.token_hash = $1 FOR UPDATE OF t",
        )
        .bind(digest(token))
        .fetch_optional(&mut *tx)
        .await?;
        let Some((family, username, platform_admin, used, revoked, expired)) = row else {
            return Ok(Refresh::Invalid);
        };
        if revoked || expired {
            return Ok(Refresh::Invalid);
        }
        if used {
            sqlx::query("UPDATE refresh_tokens SET revoked_at = now() WHERE family_id = $1")
                .bind(family)
                .execute(&mut *tx)
                .await?;
            tx.commit().await?;
            tracing::warn!(%username, %family, "refresh token reused: family revoked");
            return Ok(Refresh::Reused);
        }
        sqlx::query("UPDATE refresh_tokens SET used_at = now() WHERE token_hash = $1")
            .bind(digest(token))
            .execute(&mut *tx)
            .await?;
        let next = new_token();
        sqlx::query(
            "INSERT INTO refresh_tokens (token_hash, family_id, username, expires_at)
             VALUES ($1, $2, $3, $4)",
        )
        .bind(digest(&next))
        .bind(family)
        .bind(&username)
        .bind(chrono::Utc::now() + REFRESH_TTL)
        .execute(&mut *tx)
        .await?;
        tx.commit().await?;
        Ok(Refresh::Rotated {
            username,
            platform_admin,
            token: next,
        })
    }

    /// Revokes the family of `token` (logout).
    pub async fn revoke_family_of(&self, token: &str) -> Result<(), sqlx::Error> {
        sqlx::query(
            "UPDATE refresh_tokens SET revoked_at = now()
             WHERE family_id = (SELECT family_id FROM refresh_tokens WHERE token_hash = $1)",
        )
        .bind(digest(token))
        .execute(&self.pool)
        .await?;
        Ok(())
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
