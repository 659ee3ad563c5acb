//! Users and their password hashes. The API server hashes and verifies; this table only keeps
//! what it hands over. Each user has an immutable id (`migrations/0005_user_ids.sql`): the
//! memberships and access tokens name that, so a name deleted and created again starts with
//! nothing.

use chrono::{DateTime, Utc};
use sqlx::PgPool;
use uuid::Uuid;

use crate::error::StoreError;

/// A user.
#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow)]
pub struct User {
    pub username: String,
    /// argon2id, PHC string format.
    pub password_hash: String,
    pub platform_admin: bool,
    pub created_at: DateTime<Utc>,
    /// Immutable; what memberships and access tokens name.
    pub id: Uuid,
    /// A disabled user can neither log in, refresh nor use an access token.
    pub disabled_at: Option<DateTime<Utc>>,
    /// Access tokens carry the epoch they were issued in; raising it refuses them all.
    pub token_epoch: i32,
}

/// The `users` table.
#[derive(Debug, Clone)]
pub struct Users {
    pool: PgPool,
}

impl Users {
    pub(crate) fn new(pool: PgPool) -> Self {
        Self { pool }
    }

    /// Creates a platform administrator unless a user of that name exists; whether it did.
    pub async fn create_admin_if_absent(
        &self,
        username: &str,
        password_hash: &str,
    ) -> Result<bool, StoreError> {
        let done = sqlx::query(
            "INSERT INTO users (username, password_hash, platform_admin) VALUES ($1, $2, true)
             ON CONFLICT (username) DO NOTHING",
        )
        .bind(username)
        .bind(password_hash)
        .execute(&self.pool)
        .await?;
        Ok(done.rows_affected() == 1)
    }

    /// Creates a user; [`StoreError::UserExists`] if the name is taken.
    pub async fn create(
        &self,
        username: &str,
        password_hash: &str,
        platform_admin: bool,
    ) -> Result<User, StoreError> {
        Ok(sqlx::query_as(
            "INSERT INTO users (username, password_hash, platform_admin) VALUES ($1, $2, $3)
             RETURNING *",
        )
        .bind(username)
        .bind(password_hash)
        .bind(platform_admin)
        .fetch_one(&self.pool)
        .await?)
    }

    /// The user of that name, if any.
    pub async fn get(&self, username: &str) -> Result<Option<User>, StoreError> {
        Ok(sqlx::query_as("SELECT * FROM users WHERE username = $1")
            .bind(username)
            .fetch_optional(&self.pool)
            .await?)
    }

    /// The user of that id, if any.
    pub async fn by_id(&self, id: Uuid) -> Result<Option<User>, StoreError> {
        Ok(sqlx::query_as("SELECT * FROM users WHERE id = $1")
            .bind(id)
            .fetch_optional(&self.pool)
            .await?)
    }

    /// The users of these ids that exist, in no particular order.
    pub async fn by_ids(&self, ids: &[Uuid]) -> Result<Vec<User>, StoreError> {
        Ok(sqlx::query_as("SELECT * FROM users WHERE id = ANY($1)")
            .bind(ids)
            .fetch_all(&self.pool)
            .await?)
    }

    /// Disables (or enables again) a user. Disabling revokes every refresh token and refuses
    /// every access token issued so far, in one transaction; whether there was such a user.
    pub async fn set_disabled(&self, username: &str, disabled: bool) -> Result<bool, StoreError> {
        let mut tx = self.pool.begin().await?;
        let done = if disabled {
            sqlx::query(
                "UPDATE users SET disabled_at = COALESCE(disabled_at, now()),
                                  token_epoch = token_epoch + 1
                 WHERE username = $1",
            )
        } else {
            sqlx::query("UPDATE users SET disabled_at = NULL WHERE username = $1")
        }
        .bind(username)
        .execute(&mut *tx)
        .await?;
        if disabled {
            revoke_refresh_tokens(&mut tx, username).await?;
        }
        tx.commit().await?;
        Ok(done.rows_affected() == 1)
    }

    /// Every user, by name.
    pub async fn list(&self) -> Result<Vec<User>, StoreError> {
        Ok(sqlx::query_as("SELECT * FROM users ORDER BY username")
            .fetch_all(&self.pool)
            .await?)
    }

    /// Deletes a user and, with them, every refresh token; the deleted row, if there was one.
    pub async fn delete(&self, username: &str) -> Result<Option<User>, StoreError> {
        Ok(
            sqlx::query_as("DELETE FROM users WHERE username = $1 RETURNING *")
                .bind(username)
                .fetch_optional(&self.pool)
                .await?,
        )
    }

    /// Replaces a user's password hash, revokes every refresh token they hold and refuses every
    /// access token issued so far, in one transaction; whether there was such a user.
    pub async fn set_password_hash(
        &self,
        username: &str,
        password_hash: &str,
    ) -> Result<bool, StoreError> {
        let mut tx = self.pool.begin().await?;
        let done = sqlx::query(
            "UPDATE users SET password_hash = $2,
                              token_epoch = token_epoch + 1
             WHERE username = $1",
        )
        .bind(username)
        .bind(password_hash)
        .execute(&mut *tx)
        .await?;
        // A new password ends every session started with the old one.
        revoke_refresh_tokens(&mut tx, username).await?;
        tx.commit().await?;
        Ok(done.rows_affected() == 1)
    }
}

async fn revoke_refresh_tokens(
    tx: &mut sqlx::Transaction<'_, sqlx::Postgres>,
    username: &str,
) -> Result<(), StoreError> {
    sqlx::query(
        "UPDATE refresh_tokens SET revoked_at = now() WHERE username = $1 AND revoked_at IS NULL",
    )
    .bind(username)
    .execute(&mut **tx)
    .await?;
    Ok(())
}
