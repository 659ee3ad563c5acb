//! `kubenest users` (platform administrators: create, list, disable, enable, delete) and
//! `kubenest password` (change your own, or as an administrator anyone's).

use clap::{Args, Subcommand};
use reqwest::Method;
use serde_json::json;

use super::{Global, Table, text};
use crate::api;

#[derive(Debug, Subcommand)]
pub enum UsersCommand {
    /// Every user, with their immutable id (what memberships bind).
    List,
    /// Create a user; the password comes from standard input or KUBENEST_NEW_PASSWORD.
    Create {
        username: String,
        /// Make them a platform administrator.
        #[arg(long)]
        platform_admin: bool,
        #[command(flatten)]
        password: NewPassword,
    },
    /// Disable a user: no login, their sessions and access tokens end; memberships stay.
    Disable { username: String },
    /// Enable a disabled user again.
    Enable { username: String },
    /// Delete a user with every membership and session they hold. A user created later under
    /// the same name starts with nothing.
    Delete { username: String },
}

/// Where a new password comes from.
#[derive(Debug, Args)]
pub struct NewPassword {
    /// Read the new password from standard input (otherwise from KUBENEST_NEW_PASSWORD).
    #[arg(long)]
    pub password_stdin: bool,
}

impl NewPassword {
    fn read(&self) -> anyhow::Result<String> {
        super::secret_input(
            self.password_stdin,
            "KUBENEST_NEW_PASSWORD",
            "the new password",
        )
    }
}

#[derive(Debug, Args)]
pub struct PasswordArgs {
    /// Whose password (platform administrators; default: yours).
    #[arg(long)]
    pub user: Option<String>,
    #[command(flatten)]
    pub password: NewPassword,
}

pub async fn run(global: &Global, command: UsersCommand) -> anyhow::Result<()> {
    let mut client = global.client()?;
    let path = |name: &str| format!("/api/v1/users/{}", api::query_value(name));
    match command {
        UsersCommand::List => {
            let users = client.get("/api/v1/users").await?;
            global.print(&users, |users| {
                Table::rows(
                    ["USERNAME", "ID", "PLATFORM ADMIN", "DISABLED", "CREATED"],
                    users,
                    |u| {
                        vec![
                            text(&u["username"]),
                            text(&u["id"]),
                            text(&u["platform_admin"]),
                            text(&u["disabled"]),
                            text(&u["created_at"]),
                        ]
                    },
                )
            });
        }
        UsersCommand::Create {
            username,
            platform_admin,
            password,
        } => {
            let body = json!({
                "username": username,
                "password": password.read()?,
                "platform_admin": platform_admin,
            });
            let user = client.post("/api/v1/users", &body).await?;
            global.done(
                &user,
                &format!("user {username} created (id {})", text(&user["id"])),
            );
        }
        UsersCommand::Disable { username } => {
            let user = client
                .post(&format!("{}/disable", path(&username)), &json!({}))
                .await?;
            global.done(&user, &format!("user {username} disabled"));
        }
        UsersCommand::Enable { username } => {
            let user = client
                .post(&format!("{}/enable", path(&username)), &json!({}))
                .await?;
            global.done(&user, &format!("user {username} enabled"));
        }
        UsersCommand::Delete { username } => {
            let answer = client.delete(&path(&username)).await?;
            global.done(
                &answer,
                &format!("user {username} deleted with their memberships and sessions"),
            );
        }
    }
    Ok(())
}

/// Changes a password. Your own change ends every session of yours, this one too, so the CLI
/// logs in again with the new password and keeps that session.
pub async fn password(global: &Global, args: PasswordArgs) -> anyhow::Result<()> {
    let mut client = global.client()?;
    let me = client
        .session()
        .map(|s| s.username.clone())
        .unwrap_or_default();
    let user = args.user.clone().unwrap_or_else(|| me.clone());
    let password = args.password.read()?;
    client
        .call(
            Method::PUT,
            &format!("/api/v1/users/{}/password", api::query_value(&user)),
            Some(&json!({ "password": password })),
        )
        .await?;
    if user == me {
        let mut fresh = api::Client::with_ca(client.base(), client.ca_file())?;
        let session = fresh.login(&me, &password).await?;
        session.save(&global.session_path()?)?;
    }
    global.done(
        &json!({"user": user}),
        &format!("password of {user} changed"),
    );
    Ok(())
}
