//! `kubenest users` (platform administrators: create, list, disable, enable, delete) and
//! `kubenest password` (change your own, or as an administrator anyone's).

use clap::{Args, Subcommand};
use kubenest_api::users::{NewUserBody, PasswordBody, UserView};

use super::{Global, Table, cell};
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
            let users: Vec<UserView> = client.get_as("/api/v1/users").await?;
            global.print(&users, |users| {
                Table::rows(
                    ["USERNAME", "ID", "PLATFORM ADMIN", "DISABLED", "CREATED"],
                    users,
                    |u| {
                        vec![
                            cell(&u.username),
                            cell(&u.id),
                            u.platform_admin.to_string(),
                            u.disabled.to_string(),
                            cell(&u.created_at),
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
            let body = NewUserBody {
                username: username.clone(),
                password: password.read()?,
                platform_admin,
            };
            let user: UserView = client.post_as("/api/v1/users", &body).await?;
            global.done(
                &user,
                &format!("user {username} created (id {})", cell(&user.id)),
            );
        }
        UsersCommand::Disable { username } => {
            let user: UserView = client
                .post_as(
                    &format!("{}/disable", path(&username)),
                    &serde_json::Map::new(),
                )
                .await?;
            global.done(&user, &format!("user {username} disabled"));
        }
        UsersCommand::Enable { username } => {
            let user: UserView = client
                .post_as(
                    &format!("{}/enable", path(&username)),
                    &serde_json::Map::new(),
                )
                .await?;
            global.done(&user, &format!("user {username} enabled"));
        }
        UsersCommand::Delete { username } => {
            // 204: no answer to read.
            let answer: () = client.delete_as(&path(&username)).await?;
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
    let body = PasswordBody {
        password: password.clone(),
    };
    // 204: no answer to read.
    let () = client
        .put_as(
            &format!("/api/v1/users/{}/password", api::query_value(&user)),
            &body,
        )
        .await?;
    if user == me {
        let mut fresh = api::Client::with_ca(client.base(), client.ca_file())?;
        let session = fresh.login(&me, &password).await?;
        session.save(&global.session_path()?)?;
    }
    /// What `-o json` prints: the API answers a password change with no body.
    #[derive(serde::Serialize)]
    struct Changed<'a> {
        user: &'a str,
    }
    global.done(
        &Changed { user: &user },
        &format!("password of {user} changed"),
    );
    Ok(())
}
