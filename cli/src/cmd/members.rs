//! `kubenest members list|add|remove`: roles at organization scope (the default: inviting a
//! user to the organization), or on one cluster (`--cluster`) or project (`--project`). Changing
//! members needs the admin role at that scope.

use clap::{Args, Subcommand, ValueEnum};
use kubenest_api::clusters::ClusterResponse;
use kubenest_api::members::{self as api_members, MemberBody, MemberView};
use kubenest_api::projects::ProjectResponse;

use super::{Global, Table, cell, clusters, opt, projects, word};
use crate::api;

/// A kubenest role.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Role {
    Admin,
    Member,
    Viewer,
}

impl Role {
    /// The role as the API types say it.
    fn api(self) -> api_members::Role {
        match self {
            Self::Admin => api_members::Role::Admin,
            Self::Member => api_members::Role::Member,
            Self::Viewer => api_members::Role::Viewer,
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

/// Where the members of a scope are read: an organization answers its list, a cluster and a
/// project answer themselves, members included.
enum Read {
    Org(String),
    Cluster(String),
    Project(String),
}

impl Read {
    async fn members(&self, client: &mut api::Client) -> anyhow::Result<Vec<MemberView>> {
        Ok(match self {
            Self::Org(path) => client.get_as(path).await?,
            Self::Cluster(path) => client.get_as::<ClusterResponse>(path).await?.members,
            Self::Project(path) => client.get_as::<ProjectResponse>(path).await?.members,
        })
    }
}

/// The members' API path and where the members list at that scope is read.
async fn scope_paths(
    global: &Global,
    client: &mut api::Client,
    scope: &Scope,
) -> anyhow::Result<(String, Read)> {
    if let Some(cluster) = &scope.cluster {
        let id = clusters::resolve(global, client, cluster).await?;
        return Ok((
            format!("/api/v1/clusters/{id}/members"),
            Read::Cluster(format!("/api/v1/clusters/{id}")),
        ));
    }
    if let Some(project) = &scope.project {
        let id = projects::resolve(global, client, project).await?;
        return Ok((
            format!("/api/v1/projects/{id}/members"),
            Read::Project(format!("/api/v1/projects/{id}")),
        ));
    }
    let org = global.org(client).await?;
    let members = format!("/api/v1/orgs/{org}/members");
    Ok((members.clone(), Read::Org(members)))
}

fn table(members: &[MemberView]) -> Table {
    Table::rows(["USER", "ROLE", "USER ID"], members, |m| {
        vec![cell(&m.user), word(m.role), opt(&m.user_id)]
    })
}

pub async fn run(global: &Global, args: MembersArgs) -> anyhow::Result<()> {
    let mut client = global.client()?;
    let (path, read) = scope_paths(global, &mut client, &args.scope).await?;
    match args.command {
        MembersCommand::List => {
            let members = read.members(&mut client).await?;
            global.print(&members, |m| table(m));
        }
        MembersCommand::Add { user, role } => {
            let body = MemberBody {
                user: user.clone(),
                role: role.api(),
            };
            let members: Vec<MemberView> = client.put_as(&path, &body).await?;
            global.done(&members, &format!("{user} is {} there", word(role.api())));
        }
        MembersCommand::Remove { user } => {
            let members: Vec<MemberView> = client
                .delete_as(&format!("{path}/{}", api::query_value(&user)))
                .await?;
            global.done(&members, &format!("{user} removed"));
        }
    }
    Ok(())
}
