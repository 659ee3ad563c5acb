//! The user commands over the REST API: `login`, `logout`, `orgs`, `clusters`, `projects`,
//! `apps`, `templates`, `alerts`, `audit`, `users`, `members`, `password`. Each prints a table for people or, with `-o json`, the API's JSON for
//! scripts. Objects are named by id or by name (names are looked up in the organization, and an
//! App's name in its project).

mod addons;
mod alerts;
mod apps;
mod audit;
mod clusters;
mod context;
mod fences;
mod ingress_ca;
mod listed;
mod members;
mod output;
mod projects;
mod table;
mod templates;
mod users;

use std::io::Read as _;
use std::path::PathBuf;

use anyhow::Context as _;
use clap::{Args, Subcommand};
use kubenest_api::orgs::{NewOrgBody, OrgResponse, PatchOrgBody};
use serde::Serialize;
use serde_json::Value;

use crate::api::{self, Session};
pub use apps::{AppsCommand, Progress, progress, wait_deleted, wait_running};
pub use clusters::ClustersCommand;
pub use listed::Listed;
pub use output::{DryRun, Output, emit, removal_message};
pub use projects::ProjectsCommand;
pub use table::Table;
pub use templates::TemplatesCommand;

/// Options every API command takes.
#[derive(Debug, Clone, Args)]
pub struct Global {
    /// The kubenest API (default: the one you logged in to).
    #[arg(long, global = true, env = "KUBENEST_API")]
    pub api: Option<String>,
    /// The organization names are looked up in (default: your only one).
    #[arg(long, global = true, env = "KUBENEST_ORG")]
    pub org: Option<String>,
    /// Output format.
    #[arg(short, long, global = true, value_enum, default_value_t = Output::Table)]
    pub output: Output,
    /// A CA certificate (PEM) to trust for an https API besides the public roots; `login`
    /// keeps it with the session.
    #[arg(long, global = true, env = "KUBENEST_CA_FILE")]
    pub ca_file: Option<PathBuf>,
    /// A login session file to use instead of a context.
    #[arg(long, global = true, env = "KUBENEST_SESSION")]
    pub session: Option<PathBuf>,
    /// The context to use instead of the current one (`kubenest context list`).
    #[arg(long, global = true, env = "KUBENEST_CONTEXT")]
    pub context: Option<String>,
    /// `server`: send changes as a dry run (`?dryRun=true`): the API judges them as it would
    /// and keeps nothing; the answer is what the change would give.
    #[arg(long, global = true, value_enum, default_value_t = DryRun::None)]
    pub dry_run: DryRun,
}

impl Global {
    /// `--session`, else `--context`'s, else the current context's, else the session of a
    /// login made before contexts.
    pub(crate) fn session_path(&self) -> anyhow::Result<PathBuf> {
        if let Some(path) = &self.session {
            return Ok(path.clone());
        }
        match self.context.clone().or_else(context::current) {
            Some(name) => context::path_of(&name),
            None => Ok(Session::default_path()),
        }
    }

    /// A client with the stored session (its API address overridden by `--api`).
    pub fn client(&self) -> anyhow::Result<api::Client> {
        let path = self.session_path()?;
        let session = Session::load(&path)?.ok_or(api::ApiError::NotLoggedIn)?;
        if let Some(api) = &self.api
            && api.trim_end_matches('/') != session.api
        {
            anyhow::bail!(
                "the stored session is for {}, not {api}: run `kubenest login --api {api}`",
                session.api
            );
        }
        let mut session = session;
        if let Some(ca) = &self.ca_file {
            session.ca_file = Some(ca.clone());
        }
        let mut client = api::Client::from_session(session, Some(path))?;
        client.set_dry_run(self.dry_run == DryRun::Server);
        Ok(client)
    }

    /// `--org`, else the context's organization, else the caller's only organization.
    pub async fn org(&self, client: &mut api::Client) -> anyhow::Result<String> {
        if let Some(org) = self
            .org
            .clone()
            .or_else(|| client.session().and_then(|s| s.org.clone()))
        {
            return Ok(org);
        }
        let orgs: Vec<OrgResponse> = client.get_as("/api/v1/orgs").await?;
        let names: Vec<&str> = orgs.iter().map(|o| o.name.as_str()).collect();
        match names.as_slice() {
            [one] => Ok((*one).to_owned()),
            [] => anyhow::bail!(
                "you belong to no organization; create one with `kubenest orgs create`"
            ),
            many => anyhow::bail!(
                "you belong to several organizations ({}): choose one with --org or KUBENEST_ORG",
                many.join(", ")
            ),
        }
    }
}

/// The API commands.
#[derive(Debug, Subcommand)]
pub enum ApiCommand {
    /// Log in and keep the session for the next commands.
    Login(LoginArgs),
    /// End the session (its refresh tokens stop working everywhere).
    Logout,
    /// Organizations.
    Orgs {
        #[command(subcommand)]
        command: OrgsCommand,
    },
    /// Clusters: register, list, inspect, rotate their token.
    Clusters {
        #[command(subcommand)]
        command: ClustersCommand,
    },
    /// Projects: a namespace on a cluster that Apps deploy into.
    Projects {
        #[command(subcommand)]
        command: ProjectsCommand,
    },
    /// Apps: apply, inspect, history, rollback, pause, resume, delete.
    Apps {
        #[command(subcommand)]
        command: AppsCommand,
    },
    /// Standalone addons (Postgres, Redis, Kafka in a project): create, change, roll back.
    Addons {
        #[command(subcommand)]
        command: addons::AddonsCommand,
    },
    /// The addon catalog: what `addons create --definition` can install.
    Catalog {
        #[command(subcommand)]
        command: addons::CatalogCommand,
    },
    /// Stack templates: reusable Apps with parameters.
    Templates {
        #[command(subcommand)]
        command: TemplatesCommand,
    },
    /// Alerts: silent clusters and Apps past their progress deadline; `ack ID` acknowledges.
    Alerts(alerts::AlertsArgs),
    /// The audit log (organization admins): every mutation by REST, kubectl or GitOps.
    Audit(audit::AuditArgs),
    /// Users (platform administrators): create, list, disable, enable, delete.
    Users {
        #[command(subcommand)]
        command: users::UsersCommand,
    },
    /// Members and their roles at organization, cluster or project scope.
    Members(members::MembersArgs),
    /// Change your password (or, as a platform administrator, anyone's).
    Password(users::PasswordArgs),
    /// Contexts: several APIs, users and organizations; `use NAME` switches.
    Context {
        #[command(subcommand)]
        command: context::ContextCommand,
    },
    /// A completion script for a shell: `source <(kubenest completion bash)`.
    Completion {
        #[arg(value_enum)]
        shell: clap_complete::Shell,
    },
}

#[derive(Debug, Args)]
pub struct LoginArgs {
    /// User name.
    #[arg(short, long, env = "KUBENEST_USER")]
    pub username: String,
    /// Read the password from standard input (otherwise from KUBENEST_PASSWORD).
    #[arg(long)]
    pub password_stdin: bool,
}

#[derive(Debug, Subcommand)]
pub enum OrgsCommand {
    /// The organizations you belong to.
    List,
    /// Create an organization (platform admins).
    Create {
        name: String,
        /// Human-readable name (default: the name).
        #[arg(long)]
        display_name: Option<String>,
    },
    /// Set the CPU and memory requests all the organization's projects may hold across its
    /// clusters (organization admins); neither amount: no budget.
    Budget(fences::BudgetArgs),
    /// What the organization uses against its budgets: in all, per cluster, per project.
    Usage,
}

/// Runs an API command.
pub async fn run(global: &Global, command: ApiCommand) -> anyhow::Result<()> {
    match command {
        ApiCommand::Login(args) => login(global, args).await,
        ApiCommand::Logout => {
            let mut client = global.client()?;
            client.logout().await?;
            let path = global.session_path()?;
            let _ = std::fs::remove_file(&path);
            println!("logged out");
            Ok(())
        }
        ApiCommand::Orgs { command } => orgs(global, command).await,
        ApiCommand::Clusters { command } => clusters::run(global, command).await,
        ApiCommand::Projects { command } => projects::run(global, command).await,
        ApiCommand::Apps { command } => apps::run(global, command).await,
        ApiCommand::Templates { command } => templates::run(global, command).await,
        ApiCommand::Addons { command } => addons::run(global, command).await,
        ApiCommand::Catalog { command } => addons::catalog(global, command).await,
        ApiCommand::Alerts(args) => alerts::run(global, args).await,
        ApiCommand::Audit(args) => audit::run(global, args).await,
        ApiCommand::Users { command } => users::run(global, command).await,
        ApiCommand::Members(args) => members::run(global, args).await,
        ApiCommand::Password(args) => users::password(global, args).await,
        ApiCommand::Context { command } => context::run(global, command),
        ApiCommand::Completion { shell } => {
            let mut command = <crate::Cli as clap::CommandFactory>::command();
            let mut script = Vec::new();
            clap_complete::generate(shell, &mut command, "kubenest", &mut script);
            emit(&String::from_utf8_lossy(&script));
            Ok(())
        }
    }
}

/// A password the CLI is given: standard input (one line; its line end dropped) when
/// `from_stdin`, otherwise environment variable `variable`, never an argument (which `ps` and
/// shell histories show). `what` names it in the error.
pub(crate) fn secret_input(from_stdin: bool, variable: &str, what: &str) -> anyhow::Result<String> {
    if from_stdin {
        let mut value = String::new();
        std::io::stdin().read_to_string(&mut value)?;
        return Ok(value.trim_end_matches(['\r', '\n']).to_owned());
    }
    std::env::var(variable).map_err(|_| {
        anyhow::anyhow!("give {what} on standard input (--password-stdin) or in {variable}")
    })
}

async fn login(global: &Global, args: LoginArgs) -> anyhow::Result<()> {
    let api = global
        .api
        .clone()
        .context("which API? pass --api http://host:port or set KUBENEST_API")?;
    let password = secret_input(args.password_stdin, "KUBENEST_PASSWORD", "the password")?;
    let mut client = api::Client::with_ca(&api, global.ca_file.as_deref())?;
    let mut session = client.login(&args.username, &password).await?;
    session.org = global.org.clone();
    // Into the session file named, else into a context (the one named, or one named after
    // the user and the API), which becomes the current one.
    if let Some(path) = &global.session {
        session.save(path)?;
        println!(
            "logged in to {} as {} (session in {})",
            session.api,
            session.username,
            path.display()
        );
        return Ok(());
    }
    let name = global
        .context
        .clone()
        .unwrap_or_else(|| context::default_name(&session.api, &session.username));
    session.save(&context::path_of(&name)?)?;
    context::set_current(&name)?;
    println!(
        "logged in to {} as {} (context {name}, now current)",
        session.api, session.username
    );
    Ok(())
}

async fn orgs(global: &Global, command: OrgsCommand) -> anyhow::Result<()> {
    let mut client = global.client()?;
    match command {
        OrgsCommand::List => {
            let orgs: Vec<OrgResponse> = client.get_as("/api/v1/orgs").await?;
            global.print(&orgs, |orgs| {
                Table::rows(["NAME", "DISPLAY NAME", "ROLE", "NAMESPACE"], orgs, |o| {
                    vec![
                        cell(&o.name),
                        cell(&o.display_name),
                        opt(&o.role.map(word)),
                        opt(&o.namespace),
                    ]
                })
            });
        }
        OrgsCommand::Create { name, display_name } => {
            let body = NewOrgBody {
                display_name: display_name.unwrap_or_else(|| name.clone()),
                name: name.clone(),
                members: Vec::new(),
                verification: None,
            };
            let org: OrgResponse = client.post_as("/api/v1/orgs", &body).await?;
            global.done(&org, &format!("organization {name} created"));
        }
        OrgsCommand::Budget(args) => {
            let org = global.org(&mut client).await?;
            let body = args.body();
            let budget = (body.cpu.is_some() || body.memory.is_some()).then_some(body);
            let change = PatchOrgBody {
                verification: None,
                budget: Some(budget),
            };
            let answer: OrgResponse = client
                .patch_as(&format!("/api/v1/orgs/{org}"), &change)
                .await?;
            global.done(
                &answer,
                &format!("organization {org}'s budget: {}", json_of(&answer.budget)),
            );
        }
        OrgsCommand::Usage => {
            let org = global.org(&mut client).await?;
            let usage: kubenest_api::fences::OrgUsageResponse =
                client.get_as(&format!("/api/v1/orgs/{org}/usage")).await?;
            global.print(&usage, fences::org_usage_table);
        }
    }
    Ok(())
}

/// A JSON value as a table cell: strings bare, null as `-`.
pub fn text(value: &Value) -> String {
    match value {
        Value::Null => "-".into(),
        Value::String(s) if s.is_empty() => "-".into(),
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// Whether `s` is an object id (a UUID) rather than a name.
pub fn is_id(s: &str) -> bool {
    uuid::Uuid::parse_str(s).is_ok()
}

/// A text as a table cell: empty as `-`.
pub fn cell(value: &str) -> String {
    if value.is_empty() {
        "-".into()
    } else {
        value.to_owned()
    }
}

/// An optional value as a table cell: none (or empty) as `-`.
pub fn opt(value: &Option<impl ToString>) -> String {
    value
        .as_ref()
        .map_or_else(|| "-".into(), |v| cell(&v.to_string()))
}

/// A value as the API spells it (`admin` for a role, `isolated` for an isolation).
pub fn word(value: impl Serialize) -> String {
    text(&serde_json::to_value(value).unwrap_or_default())
}

/// A value as its JSON text (`null` when absent), as the answer shows it.
pub fn json_of(value: &impl Serialize) -> String {
    serde_json::to_value(value).unwrap_or_default().to_string()
}

/// The one item of `items` whose name is `name`, or an error naming what was looked for.
pub fn by_name<'a, T: Listed>(
    items: &'a [T],
    name: &str,
    what: &str,
    scope: &str,
) -> anyhow::Result<&'a T> {
    let matches: Vec<&T> = items.iter().filter(|i| i.name() == name).collect();
    match matches.as_slice() {
        [one] => Ok(one),
        [] => Err(crate::exit::NotFound(format!("no {what} named {name:?} in {scope}")).into()),
        _ => anyhow::bail!("several {what}s are named {name:?} in {scope}: use the id"),
    }
}

/// Reads a YAML or JSON document from a file, or from standard input for `-`.
pub fn read_document(path: &std::path::Path) -> anyhow::Result<Value> {
    let text = if path.as_os_str() == "-" {
        let mut text = String::new();
        std::io::stdin().read_to_string(&mut text)?;
        text
    } else {
        std::fs::read_to_string(path).with_context(|| format!("read {}", path.display()))?
    };
    serde_yaml::from_str(&text).with_context(|| format!("{} is not YAML or JSON", path.display()))
}
