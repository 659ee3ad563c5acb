//! `kubenest members list|add|remove`: roles at organization scope (the default: inviting a
//! user to the organization), or on one cluster (`--cluster`) or project (`--project`). Changing
//! members needs the admin role at that scope.

use clap::{Args, Subcommand, ValueEnum};
use reqwest::Method;
use serde_json::{Value, json};

use super::{Global, Table, clusters, projects, text};
use crate::api;

/// A kubenest role.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Role {
    Admin,
    Member,
    Viewer,
}

impl Role {
    fn as_str(self) -> &'static str {
        match self {
            Self::Admin => "admin",
            Self::Member => "member",
            Self::Viewer => "viewer",
        }
    }
}

/// Where the roles are bound (the organization unless one of these is given).
#[derive(Debug, Args)]
pub struct Scope {
    /// A cluster of the organization (id or name).
    #[arg(long, global = true, conflicts_with = "project")]
    pub cluster: Option<String>,
    /// A project of the organization (id or name).
    #[arg(long, global = true)]
    pub project: Option<String>,
}

#[derive(Debug, Args)]
pub struct MembersArgs {
    #[command(flatten)]
    pub scope: Scope,
    #[command(subcommand)]
    pub command: MembersCommand,
}

#[derive(Debug, Subcommand)]
pub enum MembersCommand {
    /// The members at the scope and their roles.
    List,
    /// Give a user a role at the scope (replacing the one they had there).
    Add { user: String, role: Role },
    /// Take a user's role at the scope away.
    Remove { user: String },
}

/// The members' API path and how to read the members list at that scope.
async fn scope_paths(
    global: &Global,
    client: &mut api::Client,
    scope: &Scope,
) -> anyhow::Result<(String, String, &'static str)> {
    if let Some(cluster) = &scope.cluster {
        let id = clusters::resolve(global, client, cluster).await?;
        return Ok((
            format!("/api/v1/clusters/{id}/members"),
            format!("/api/v1/clusters/{id}"),
            "/members",
        ));
    }
    if let Some(project) = &scope.project {
        let id = projects::resolve(global, client, project).await?;
        return Ok((
            format!("/api/v1/projects/{id}/members"),
            format!("/api/v1/projects/{id}"),
            "/members",
        ));
    }
    let org = global.org(client).await?;
    let members = format!("/api/v1/orgs/{org}/members");
    Ok((members.clone(), members, ""))
}

fn table(members: &Value) -> Table {
    Table::rows(["USER", "ROLE", "USER ID"], members, |m| {
        vec![text(&m["user"]), text(&m["role"]), text(&m["user_id"])]
    })
}

pub async fn run(global: &Global, args: MembersArgs) -> anyhow::Result<()> {
    let mut client = global.client()?;
    let (path, read, pointer) = scope_paths(global, &mut client, &args.scope).await?;
    match args.command {
        MembersCommand::List => {
            let answer = client.get(&read).await?;
            let members = answer.pointer(pointer).cloned().unwrap_or(Value::Null);
            global.print(&members, table);
        }
        MembersCommand::Add { user, role } => {
            let members = client
                .call(
                    Method::PUT,
                    &path,
                    Some(&json!({"user": user, "role": role.as_str()})),
                )
                .await?;
            global.done(&members, &format!("{user} is {} there", role.as_str()));
        }
        MembersCommand::Remove { user } => {
            let members = client
                .delete(&format!("{path}/{}", api::query_value(&user)))
                .await?;
            global.done(&members, &format!("{user} removed"));
        }
    }
    Ok(())
}
