//! Refresh-token families. Only a token's SHA-256 is stored (the API server makes and digests
//! the tokens). Each login starts a family; a refresh uses one token and adds the next of the
//! same family. A token used twice means it was stolen: the whole family is revoked.

use chrono::{DateTime, Utc};
use sqlx::PgPool;
use uuid::Uuid;

use crate::error::StoreError;

/// What using a refresh token found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Rotation {
    /// The token was current: it is used now and its successor stored, for `username`.
    Rotated {
        username: String,
        platform_admin: bool,
    },
    /// Unknown, expired or revoked, or its user is disabled.
    Invalid,
    /// Already used once: its whole family is now revoked.
    Reused { username: String, family: Uuid },
}

/// The `refresh_tokens` table.
#[derive(Debug, Clone)]
pub struct RefreshTokens {
    pool: PgPool,
}

impl RefreshTokens {
    pub(crate) fn new(pool: PgPool) -> Self {
        Self { pool }
    }

    /// Starts a family for a fresh login of `username` with its first token's digest.
    pub async fn start_family(
        &self,
        token_hash: &[u8],
        username: &str,
        expires_at: DateTime<Utc>,
    ) -> Result<(), StoreError> {
        sqlx::query(
            "INSERT INTO refresh_tokens (token_hash, family_id, username, expires_at)
             VALUES ($1, $2, $3, $4)",
        )
        .bind(token_hash)
        .bind(Uuid::new_v4())
        .bind(username)
        .bind(expires_at)
        .execute(&self.pool)
        .await?;
        Ok(())
    }

    /// Uses the token digested as `used` once, in one transaction: stores `next` as its
    /// successor, or revokes its family when it was used before.
    pub async fn rotate(
        &self,
        used: &[u8],
        next: &[u8],
        next_expires_at: DateTime<Utc>,
    ) -> Result<Rotation, StoreError> {
        let mut tx = self.pool.begin().await?;
        let row: Option<(Uuid, String, bool, bool, bool, bool)> = sqlx::query_as(
            "SELECT t.family_id, t.username, u.platform_admin, t.used_at IS NOT NULL,
                    t.revoked_at IS NOT NULL, t.expires_at < now()
             FROM refresh_tokens t JOIN users u ON u.username = t.username
             WHERE t.token_hash = $1 AND u.disabled_at IS NULL FOR UPDATE OF t",
        )
        .bind(used)
        .fetch_optional(&mut *tx)
        .await?;
        let Some((family, username, platform_admin, was_used, revoked, expired)) = row else {
            return Ok(Rotation::Invalid);
        };
        if revoked || expired {
            return Ok(Rotation::Invalid);
        }
        if was_used {
            sqlx::query("UPDATE refresh_tokens SET revoked_at = now() WHERE family_id = $1")
                .bind(family)
                .execute(&mut *tx)
                .await?;
            tx.commit().await?;
            return Ok(Rotation::Reused { username, family });
        }
        sqlx::query("UPDATE refresh_tokens SET used_at = now() WHERE token_hash = $1")
            .bind(used)
            .execute(&mut *tx)
            .await?;
        sqlx::query(
            "INSERT INTO refresh_tokens (token_hash, family_id, username, expires_at)
             VALUES ($1, $2, $3, $4)",
        )
        .bind(next)
        .bind(family)
        .bind(&username)
        .bind(next_expires_at)
        .execute(&mut *tx)
        .await?;
        tx.commit().await?;
        Ok(Rotation::Rotated {
            username,
            platform_admin,
        })
    }

    /// Revokes the family of the token digested as `token_hash` (logout).
    pub async fn revoke_family_of(&self, token_hash: &[u8]) -> Result<(), StoreError> {
        sqlx::query(
            "UPDATE refresh_tokens SET revoked_at = now()
             WHERE family_id = (SELECT family_id FROM refresh_tokens WHERE token_hash = $1)",
        )
        .bind(token_hash)
        .execute(&self.pool)
        .await?;
        Ok(())
    }
}
