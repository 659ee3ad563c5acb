//! `kubenest apps`.
//!
//! `apps apply -f app.yaml` takes the API's App body in YAML or JSON — `name`, `components`,
//! optionally `progress_deadline_seconds` — with the project given as `project` (name or id),
//! `project_id` or `--project`. An App of that name in the project is changed (a new deployment
//! when anything differs), otherwise created.

use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, Subcommand};
use kubenest_api::apps::{AppList, AppResponse, DeploymentView, RollbackBody};
use kubenest_api::removal::RemovalResponse;

use super::{Global, cell, is_id, projects, read_document};
use crate::api;

mod apply;
mod diff;
mod logs;
mod secrets;
mod tables;
mod wait;
mod watch;

pub use apply::apply;
use apply::report_change;
use tables::*;
use wait::*;
pub use wait::{Progress, progress, wait_deleted, wait_running};

#[derive(Debug, Subcommand)]
pub enum AppsCommand {
    /// Create or change an App from a file (`-` for standard input).
    Apply {
        #[arg(short = 'f', long = "file")]
        file: PathBuf,
        /// The project (name or id), unless the file names it.
        #[arg(long)]
        project: Option<String>,
        #[command(flatten)]
        wait: WaitArgs,
    },
    /// What `apply -f` would change, as a unified diff (the API judges the change as a dry
    /// run); exit status 1 when there are differences.
    Diff {
        #[arg(short = 'f', long = "file")]
        file: PathBuf,
        /// The project (name or id), unless the file names it.
        #[arg(long)]
        project: Option<String>,
    },
    /// The organization's Apps (or one project's).
    List {
        /// Only this project's Apps (name or id).
        #[arg(long)]
        project: Option<String>,
        /// Only the Apps on this cluster (name or id).
        #[arg(long)]
        cluster: Option<String>,
        /// Only the Apps in this phase (Pending, Deploying, Running, Paused, Failed, Deleting).
        #[arg(long)]
        phase: Option<String>,
        /// After the list, a line for every change, from the live event stream.
        #[arg(short = 'w', long)]
        watch: bool,
    },
    /// One App: phase, components, sync and drift, conditions.
    Get {
        #[command(flatten)]
        app: AppArg,
        /// After the App, a line for every change, from the live event stream.
        #[arg(short = 'w', long)]
        watch: bool,
    },
    /// Every deployment of an App, newest first: who, when, what, the result.
    History(AppArg),
    /// Deploy an earlier deployment's spec again (a new deployment).
    Rollback {
        #[command(flatten)]
        app: AppArg,
        /// The deployment id to return to, or `previous` for the one before the latest.
        #[arg(long)]
        to: String,
        #[command(flatten)]
        wait: WaitArgs,
    },
    /// Deploy the current spec again (e.g. to pull a moving tag).
    Redeploy {
        #[command(flatten)]
        app: AppArg,
        #[command(flatten)]
        wait: WaitArgs,
    },
    /// Scale every workload to zero and hold changes until resumed.
    Pause(AppArg),
    /// Undo a pause.
    Resume {
        #[command(flatten)]
        app: AppArg,
        #[command(flatten)]
        wait: WaitArgs,
    },
    /// Container logs of a component, `pod/container line` (through the hub, never stored).
    Logs {
        #[command(flatten)]
        app: AppArg,
        /// The component (may be left out when the App has one workload).
        #[arg(short = 'c', long)]
        component: Option<String>,
        /// Keep printing new lines until interrupted or the pods end.
        #[arg(short = 'f', long)]
        follow: bool,
        /// Only lines newer than this, e.g. 30s, 10m, 2h.
        #[arg(long)]
        since: Option<String>,
        /// Only the last N lines of each container.
        #[arg(long)]
        tail: Option<u32>,
        /// The previous, terminated instance of each container.
        #[arg(long)]
        previous: bool,
    },
    /// A component's secret environment: `set -f FILE`, `delete`.
    Secret {
        #[command(subcommand)]
        command: secrets::SecretCommand,
    },
    /// A Git workload's repository credentials: `set`, `delete`.
    GitCredentials {
        #[command(subcommand)]
        command: secrets::GitCredentialsCommand,
    },
    /// Delete an App and everything it runs.
    Delete {
        #[command(flatten)]
        app: AppArg,
        /// Wait until the agent has removed it from the cluster.
        #[arg(long)]
        wait: bool,
        #[arg(long, default_value_t = 300)]
        timeout: u64,
        /// Admins: remove it from kubenest now, without its cluster's agent (for a cluster
        /// that will not come back); prints what may be left on the cluster.
        #[arg(long, conflicts_with = "wait")]
        force: bool,
    },
}

#[derive(Debug, Clone, Args)]
pub struct AppArg {
    /// The App (id, or name; with --project when several projects have one of that name).
    pub app: String,
    #[arg(long)]
    pub project: Option<String>,
}

#[derive(Debug, Clone, Args)]
pub struct WaitArgs {
    /// Wait until the agent reports the new revision Running (fails if it fails).
    #[arg(long)]
    pub wait: bool,
    /// Seconds to wait.
    #[arg(long, default_value_t = 300)]
    pub timeout: u64,
}

/// `apps list`'s selection.
#[derive(Debug, Clone, Default)]
pub struct Filters {
    pub project: Option<String>,
    pub cluster: Option<String>,
    pub phase: Option<String>,
}

/// All Apps visible in the organization (every page), optionally in one project.
async fn list(
    global: &Global,
    client: &mut api::Client,
    project_id: Option<&str>,
) -> anyhow::Result<Vec<AppResponse>> {
    let filters = project_id.map(|id| ("project_id", id.to_owned()));
    list_where(global, client, filters.into_iter().collect()).await
}

/// All Apps visible in the organization (every page) that pass the API's `filters`
/// (`project_id`, `cluster_id`, `phase`).
async fn list_where(
    global: &Global,
    client: &mut api::Client,
    filters: Vec<(&str, String)>,
) -> anyhow::Result<Vec<AppResponse>> {
    let org = global.org(client).await?;
    let mut items = Vec::new();
    let mut next: Option<String> = None;
    loop {
        let mut path = format!("/api/v1/apps?org={}&limit=500", api::query_value(&org));
        for (key, value) in &filters {
            path.push_str(&format!("&{key}={}", api::query_value(value)));
        }
        if let Some(token) = &next {
            path.push_str(&format!("&continue={}", api::query_value(token)));
        }
        let page: AppList = client.get_as(&path).await?;
        items.extend(page.items);
        match page.continue_token {
            Some(token) if !token.is_empty() => next = Some(token),
            _ => return Ok(items),
        }
    }
}

/// The id of the App `arg` names.
async fn resolve(
    global: &Global,
    client: &mut api::Client,
    arg: &AppArg,
) -> anyhow::Result<String> {
    if is_id(&arg.app) {
        return Ok(arg.app.clone());
    }
    let project_id = match &arg.project {
        Some(project) => Some(projects::resolve(global, client, project).await?),
        None => None,
    };
    let apps = list(global, client, project_id.as_deref()).await?;
    let matches: Vec<&AppResponse> = apps.iter().filter(|a| a.name == arg.app).collect();
    match matches.as_slice() {
        [one] => Ok(one.id.clone()),
        [] => Err(
            crate::exit::NotFound(format!("no App named {:?}{}", arg.app, in_project(arg))).into(),
        ),
        many => anyhow::bail!(
            "{} Apps are named {:?} (in projects {}): choose one with --project",
            many.len(),
            arg.app,
            many.iter()
                .map(|a| cell(&a.project))
                .collect::<Vec<_>>()
                .join(", ")
        ),
    }
}

/// The empty object the action routes (pause, resume, redeploy) take.
fn no_body() -> serde_json::Map<String, serde_json::Value> {
    serde_json::Map::new()
}

fn in_project(arg: &AppArg) -> String {
    arg.project
        .as_ref()
        .map(|p| format!(" in project {p}"))
        .unwrap_or_default()
}

pub async fn run(global: &Global, command: AppsCommand) -> anyhow::Result<()> {
    let mut client = global.client()?;
    match command {
        AppsCommand::Apply {
            file,
            project,
            wait,
        } => {
            let document = read_document(&file)?;
            let (app, before) = apply(global, &mut client, document, project.as_deref()).await?;
            report_change(global, &mut client, &app, before.as_ref(), &wait, "applied").await?;
        }
        AppsCommand::Secret { command } => secrets::secret(global, command).await?,
        AppsCommand::GitCredentials { command } => {
            secrets::git_credentials(global, command).await?;
        }
        AppsCommand::Diff { file, project } => {
            diff::run(global, &client, &file, project.as_deref()).await?;
        }
        AppsCommand::List {
            project,
            cluster,
            phase,
            watch,
        } => {
            let filters = Filters {
                project,
                cluster,
                phase,
            };
            watch::list(global, &mut client, filters, watch).await?;
        }
        AppsCommand::Get { app, watch } => {
            let id = resolve(global, &mut client, &app).await?;
            let events = if watch {
                let query = format!("app_id={}", api::query_value(&id));
                Some(watch::subscribe(&mut client, &query).await?)
            } else {
                None
            };
            let found: AppResponse = client.get_as(&format!("/api/v1/apps/{id}")).await?;
            global.print(&found, app_table);
            if let Some(events) = events {
                watch::watch(global, &mut client, events, &[found], |_| true).await?;
            }
        }
        AppsCommand::History(arg) => {
            let id = resolve(global, &mut client, &arg).await?;
            let history: Vec<DeploymentView> = client
                .get_as(&format!("/api/v1/apps/{id}/deployments"))
                .await?;
            global.print(&history, |h| history_table(h));
        }
        AppsCommand::Rollback { app, to, wait } => {
            let id = resolve(global, &mut client, &app).await?;
            let before: AppResponse = client.get_as(&format!("/api/v1/apps/{id}")).await?;
            let deployment = if to == "previous" {
                let history: Vec<DeploymentView> = client
                    .get_as(&format!("/api/v1/apps/{id}/deployments"))
                    .await?;
                history
                    .get(1)
                    .map(|d| d.id.clone())
                    .ok_or_else(|| anyhow::anyhow!("App {} has no earlier deployment", app.app))?
            } else {
                to
            };
            let answer: AppResponse = client
                .post_as(
                    &format!("/api/v1/apps/{id}/rollback"),
                    &RollbackBody {
                        deployment_id: deployment.clone(),
                    },
                )
                .await?;
            let verb = format!("rolled back to {deployment}");
            report_change(global, &mut client, &answer, Some(&before), &wait, &verb).await?;
        }
        AppsCommand::Redeploy { app, wait } => {
            // A redeploy keeps the revision and the App's deployment: its own history row says
            // when the agent has restarted the workloads.
            let id = resolve(global, &mut client, &app).await?;
            let known: Vec<DeploymentView> = client
                .get_as(&format!("/api/v1/apps/{id}/deployments"))
                .await?;
            let answer: AppResponse = client
                .post_as(&format!("/api/v1/apps/{id}/redeploy"), &no_body())
                .await?;
            if wait.wait && !client.dry_run() {
                let row = wait_new_deployment(
                    &mut client,
                    &id,
                    &known,
                    Duration::from_secs(wait.timeout),
                )
                .await?;
                global.done(
                    &row,
                    &format!("App {} redeployed: {}", app.app, cell(&row.message)),
                );
            } else {
                global.done(&answer, &format!("App {} redeploy requested", app.app));
            }
        }
        AppsCommand::Pause(arg) => {
            let id = resolve(global, &mut client, &arg).await?;
            let answer: AppResponse = client
                .post_as(&format!("/api/v1/apps/{id}/pause"), &no_body())
                .await?;
            global.done(&answer, &format!("App {} paused", arg.app));
        }
        AppsCommand::Resume { app, wait } => {
            let id = resolve(global, &mut client, &app).await?;
            let before: AppResponse = client.get_as(&format!("/api/v1/apps/{id}")).await?;
            let answer: AppResponse = client
                .post_as(&format!("/api/v1/apps/{id}/resume"), &no_body())
                .await?;
            report_change(
                global,
                &mut client,
                &answer,
                Some(&before),
                &wait,
                "resumed",
            )
            .await?;
        }
        AppsCommand::Logs {
            app,
            component,
            follow,
            since,
            tail,
            previous,
        } => {
            let id = resolve(global, &mut client, &app).await?;
            let args = logs::LogsArgs {
                component,
                follow,
                since,
                tail,
                previous,
            };
            logs::print(&mut client, &id, &args).await?;
        }
        AppsCommand::Delete {
            app,
            wait,
            timeout,
            force,
        } => {
            let id = resolve(global, &mut client, &app).await?;
            if force {
                let answer: RemovalResponse = client
                    .delete_as(&format!("/api/v1/apps/{id}?force=true"))
                    .await?;
                let head = format!("App {} removed from kubenest", app.app);
                global.done(&answer, &super::removal_message(&answer, &head));
                return Ok(());
            }
            let answer: RemovalResponse = client.delete_as(&format!("/api/v1/apps/{id}")).await?;
            if wait && !client.dry_run() {
                wait_deleted(&mut client, &id, Duration::from_secs(timeout)).await?;
                global.done(&answer, &format!("App {} deleted", app.app));
            } else {
                let head = format!("App {} is being deleted", app.app);
                global.done(&answer, &super::removal_message(&answer, &head));
            }
        }
    }
    Ok(())
}
