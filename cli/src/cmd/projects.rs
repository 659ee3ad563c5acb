//! `kubenest projects`.

use clap::Subcommand;
use std::collections::BTreeMap;

use kubenest_api::fences::ProjectUsageResponse;
use kubenest_api::projects::{NewProjectBody, ProjectResponse};
use kubenest_api::registry::{
    RegistryAccount, RegistryCredentialsBody, RegistryCredentialsResponse,
};
use kubenest_api::removal::RemovalResponse;

use super::ingress_ca::{self, IngressCaCommand};
use super::{Global, Table, by_name, cell, clusters, is_id, json_of, opt, word};
use crate::api;

#[derive(Debug, Subcommand)]
pub enum ProjectsCommand {
    /// Create a project: a namespace on one cluster.
    Create {
        name: String,
        /// The cluster (name or id).
        #[arg(long)]
        cluster: String,
        /// The namespace on the cluster (default: the project's name).
        #[arg(long)]
        namespace: Option<String>,
    },
    /// The organization's projects.
    List,
    /// One project.
    Get { project: String },
    /// Set the project's registry credentials (admins): its pods pull and its builds push
    /// with them. They replace earlier ones; kubenest never stores the password.
    RegistryLogin {
        project: String,
        /// The registry, `host` or `host:port`.
        #[arg(long)]
        server: String,
        #[arg(long)]
        username: String,
        /// Read the password from standard input (otherwise from KUBENEST_REGISTRY_PASSWORD).
        #[arg(long)]
        password_stdin: bool,
    },
    /// Remove the project's registry credentials (admins).
    RegistryLogout { project: String },
    /// The project's ingress CA: the certificates of its ingresses with `tls` and no
    /// `tls_secret` are issued from it.
    IngressCa {
        #[command(subcommand)]
        command: IngressCaCommand,
    },
    /// Set the project's quota, default limits and network isolation, all three at once
    /// (organization admins); prints what it uses against them. Without flags: no quota, no
    /// defaults, isolated.
    Fences(super::fences::FencesArgs),
    /// What the project uses against its quota.
    Usage { project: String },
    /// Delete a project (refused while Apps or addons remain in it).
    Delete {
        project: String,
        /// Admins: remove the project and everything in it from kubenest now, without its
        /// cluster's agent (for a cluster that will not come back); prints what may be left.
        #[arg(long)]
        force: bool,
    },
}

/// The id of `project` (an id, or a name in the organization).
pub async fn resolve(
    global: &Global,
    client: &mut api::Client,
    project: &str,
) -> anyhow::Result<String> {
    if is_id(project) {
        return Ok(project.to_owned());
    }
    let org = global.org(client).await?;
    let projects: Vec<ProjectResponse> = client
        .get_as(&format!("/api/v1/orgs/{org}/projects"))
        .await?;
    let found = by_name(
        &projects,
        project,
        "project",
        &format!("organization {org}"),
    )?;
    Ok(found.id.clone())
}

pub async fn run(global: &Global, command: ProjectsCommand) -> anyhow::Result<()> {
    let mut client = global.client()?;
    match command {
        ProjectsCommand::Create {
            name,
            cluster,
            namespace,
        } => {
            let org = global.org(&mut client).await?;
            let cluster_id = clusters::resolve(global, &mut client, &cluster).await?;
            let body = NewProjectBody {
                name: name.clone(),
                cluster_id,
                namespace,
                registry_secret: None,
                progress_deadline_seconds: None,
                pod_security: None,
                fences: None,
            };
            let project: ProjectResponse = client
                .post_as(&format!("/api/v1/orgs/{org}/projects"), &body)
                .await?;
            global.done(
                &project,
                &format!(
                    "project {name} created ({}), namespace {} on {cluster}: {}",
                    cell(&project.id),
                    cell(&project.namespace),
                    cell(&project.phase)
                ),
            );
        }
        ProjectsCommand::List => {
            let org = global.org(&mut client).await?;
            let projects: Vec<ProjectResponse> = client
                .get_as(&format!("/api/v1/orgs/{org}/projects"))
                .await?;
            global.print(&projects, |projects| {
                Table::rows(
                    ["NAME", "ID", "CLUSTER", "NAMESPACE", "PHASE"],
                    projects,
                    |p| {
                        vec![
                            cell(&p.name),
                            cell(&p.id),
                            cell(&p.cluster),
                            cell(&p.namespace),
                            cell(&p.phase),
                        ]
                    },
                )
            });
        }
        ProjectsCommand::Get { project } => {
            let id = resolve(global, &mut client, &project).await?;
            let project: ProjectResponse = client.get_as(&format!("/api/v1/projects/{id}")).await?;
            global.print(&project, project_table);
        }
        ProjectsCommand::RegistryLogin {
            project,
            server,
            username,
            password_stdin,
        } => {
            let password = super::secret_input(
                password_stdin,
                "KUBENEST_REGISTRY_PASSWORD",
                "the registry password",
            )?;
            let id = resolve(global, &mut client, &project).await?;
            let body = RegistryCredentialsBody {
                registries: BTreeMap::from([(
                    server.clone(),
                    RegistryAccount { username, password },
                )]),
            };
            let answer: RegistryCredentialsResponse = client
                .put_as(
                    &format!("/api/v1/projects/{id}/registry-credentials"),
                    &body,
                )
                .await?;
            global.done(
                &answer,
                &format!(
                    "project {project} pulls and pushes with its credentials for {server} (Secret {})",
                    cell(&answer.secret)
                ),
            );
        }
        ProjectsCommand::RegistryLogout { project } => {
            let id = resolve(global, &mut client, &project).await?;
            let answer: RegistryCredentialsResponse = client
                .delete_as(&format!("/api/v1/projects/{id}/registry-credentials"))
                .await?;
            global.done(
                &answer,
                &format!("project {project} has no registry credentials now"),
            );
        }
        ProjectsCommand::IngressCa { command } => {
            let id = resolve(global, &mut client, command.project()).await?;
            ingress_ca::run(global, &mut client, &id, command).await?;
        }
        ProjectsCommand::Fences(args) => {
            let id = resolve(global, &mut client, &args.project).await?;
            super::fences::set(global, &mut client, &id, &args).await?;
        }
        ProjectsCommand::Usage { project } => {
            let id = resolve(global, &mut client, &project).await?;
            let usage: ProjectUsageResponse = client
                .get_as(&format!("/api/v1/projects/{id}/usage"))
                .await?;
            global.print(&usage, super::fences::usage_table);
        }
        ProjectsCommand::Delete { project, force } => {
            let id = resolve(global, &mut client, &project).await?;
            let (path, head) = if force {
                (
                    format!("/api/v1/projects/{id}?force=true"),
                    format!("project {project} removed from kubenest"),
                )
            } else {
                (
                    format!("/api/v1/projects/{id}"),
                    format!("project {project} is being deleted"),
                )
            };
            let answer: RemovalResponse = client.delete_as(&path).await?;
            global.done(&answer, &super::removal_message(&answer, &head));
        }
    }
    Ok(())
}

fn project_table(project: &ProjectResponse) -> Table {
    Table::fields(&[
        ("Name", cell(&project.name)),
        ("Id", cell(&project.id)),
        ("Organization", cell(&project.org)),
        ("Cluster", cell(&project.cluster)),
        ("Namespace", cell(&project.namespace)),
        ("Phase", cell(&project.phase)),
        ("Message", cell(&project.message)),
        ("Registry secret", opt(&project.registry_secret)),
        ("Ingress CA", project.ingress_ca.to_string()),
        (
            "Network",
            opt(&project.fences.network.as_ref().map(|n| word(n.isolation))),
        ),
        (
            "Quota",
            match &project.fences.quota {
                None => "none".to_owned(),
                Some(quota) => json_of(quota),
            },
        ),
    ])
}
