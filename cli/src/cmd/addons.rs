//! `kubenest addons` (standalone addon instances: Postgres, Redis, Kafka in a project) and
//! `kubenest catalog` (the addon definitions they are made from).

use std::path::PathBuf;

use clap::Subcommand;
use kubenest_api::addons::{
    AddonRollbackBody, DefinitionResponse, InstanceResponse, NewInstanceBody, PatchInstanceBody,
};
use kubenest_api::removal::RemovalResponse;
use serde_json::{Map, Value};

use super::{Global, Table, by_name, cell, is_id, opt, projects, read_document};
use crate::api;

#[derive(Debug, Subcommand)]
pub enum AddonsCommand {
    /// The organization's addons (or one project's).
    List {
        /// Only this project's addons (name or id).
        #[arg(long)]
        project: Option<String>,
    },
    /// One addon: phase, version, revisions, the Secret its connection details are in.
    Get { addon: String },
    /// Install an addon from the catalog into a project.
    Create {
        name: String,
        /// The project (name or id).
        #[arg(long)]
        project: String,
        /// The catalog entry, e.g. `postgres` (`kubenest catalog list`).
        #[arg(long)]
        definition: String,
        /// A chart version other than the catalog's pinned one.
        #[arg(long)]
        version: Option<String>,
        /// Values (YAML or JSON; `-` for standard input), checked against the definition's
        /// schema.
        #[arg(short = 'f', long = "values")]
        values: Option<PathBuf>,
    },
    /// Change an addon's values (replacing them) or chart version.
    Set {
        addon: String,
        #[arg(long)]
        version: Option<String>,
        #[arg(short = 'f', long = "values")]
        values: Option<PathBuf>,
    },
    /// Restore an earlier revision's chart and values.
    Rollback {
        addon: String,
        #[arg(long)]
        revision: i32,
    },
    /// Delete an addon and its data.
    Delete {
        addon: String,
        /// Admins: remove it from kubenest now, without its cluster's agent.
        #[arg(long)]
        force: bool,
    },
}

#[derive(Debug, Subcommand)]
pub enum CatalogCommand {
    /// What can be installed: each definition's chart and what it exports.
    List,
    /// One definition, with its default values and their schema.
    Get { definition: String },
}

/// The id of addon `addon` (an id, or a name in the organization).
async fn resolve(global: &Global, client: &mut api::Client, addon: &str) -> anyhow::Result<String> {
    if is_id(addon) {
        return Ok(addon.to_owned());
    }
    let org = global.org(client).await?;
    let addons: Vec<InstanceResponse> = client
        .get_as(&format!(
            "/api/v1/addon-instances?org={}",
            api::query_value(&org)
        ))
        .await?;
    let found = by_name(&addons, addon, "addon", &format!("organization {org}"))?;
    Ok(found.id.clone())
}

/// The values of a document the user wrote (`-f`): free-form (the definition's schema, which
/// the API checks them against, says what they hold), but a mapping.
fn values_of(path: &std::path::Path) -> anyhow::Result<Map<String, Value>> {
    match read_document(path)? {
        Value::Object(values) => Ok(values),
        _ => anyhow::bail!("{}: the values are a mapping (key: value)", path.display()),
    }
}

fn addon_table(addons: &[InstanceResponse]) -> Table {
    Table::rows(
        [
            "NAME",
            "PROJECT",
            "DEFINITION",
            "VERSION",
            "PHASE",
            "REVISION",
        ],
        addons,
        |a| {
            vec![
                cell(&a.name),
                cell(&a.project),
                cell(&a.definition),
                opt(&a.version),
                cell(&a.phase),
                opt(&a.revision),
            ]
        },
    )
}

fn one_addon(a: &InstanceResponse) -> Table {
    Table::fields(&[
        ("Name", cell(&a.name)),
        ("Id", cell(&a.id)),
        ("Project", cell(&a.project)),
        ("Definition", cell(&a.definition)),
        ("Version", opt(&a.version)),
        ("Phase", cell(&a.phase)),
        ("Message", cell(&a.message)),
        ("Revision", opt(&a.revision)),
        ("Export secret", opt(&a.export_secret)),
    ])
}

pub async fn run(global: &Global, command: AddonsCommand) -> anyhow::Result<()> {
    let mut client = global.client()?;
    match command {
        AddonsCommand::List { project } => {
            let org = global.org(&mut client).await?;
            let mut path = format!("/api/v1/addon-instances?org={}", api::query_value(&org));
            if let Some(project) = &project {
                let id = projects::resolve(global, &mut client, project).await?;
                path.push_str(&format!("&project_id={}", api::query_value(&id)));
            }
            let addons: Vec<InstanceResponse> = client.get_as(&path).await?;
            global.print(&addons, |a| addon_table(a));
        }
        AddonsCommand::Get { addon } => {
            let id = resolve(global, &mut client, &addon).await?;
            let addon: InstanceResponse = client
                .get_as(&format!("/api/v1/addon-instances/{id}"))
                .await?;
            global.print(&addon, one_addon);
        }
        AddonsCommand::Create {
            name,
            project,
            definition,
            version,
            values,
        } => {
            let project_id = projects::resolve(global, &mut client, &project).await?;
            let body = NewInstanceBody {
                project_id,
                name: name.clone(),
                definition,
                version,
                values: values
                    .as_deref()
                    .map(values_of)
                    .transpose()?
                    .unwrap_or_default(),
                progress_deadline_seconds: None,
            };
            let addon: InstanceResponse = client.post_as("/api/v1/addon-instances", &body).await?;
            global.done(
                &addon,
                &format!("addon {name} created: {}", cell(&addon.phase)),
            );
        }
        AddonsCommand::Set {
            addon,
            version,
            values,
        } => {
            if version.is_none() && values.is_none() {
                anyhow::bail!("nothing to change: give --version, -f VALUES or both");
            }
            let id = resolve(global, &mut client, &addon).await?;
            let body = PatchInstanceBody {
                version,
                values: values.as_deref().map(values_of).transpose()?,
            };
            let answer: InstanceResponse = client
                .patch_as(&format!("/api/v1/addon-instances/{id}"), &body)
                .await?;
            global.done(
                &answer,
                &format!("addon {addon} changed: {}", cell(&answer.phase)),
            );
        }
        AddonsCommand::Rollback { addon, revision } => {
            let id = resolve(global, &mut client, &addon).await?;
            let answer: InstanceResponse = client
                .post_as(
                    &format!("/api/v1/addon-instances/{id}/rollback"),
                    &AddonRollbackBody { revision },
                )
                .await?;
            global.done(
                &answer,
                &format!("addon {addon} rolled back to revision {revision}"),
            );
        }
        AddonsCommand::Delete { addon, force } => {
            let id = resolve(global, &mut client, &addon).await?;
            let query = if force { "?force=true" } else { "" };
            let answer: RemovalResponse = client
                .delete_as(&format!("/api/v1/addon-instances/{id}{query}"))
                .await?;
            let head = if force {
                format!("addon {addon} removed from kubenest")
            } else {
                format!("addon {addon} is being deleted")
            };
            global.done(&answer, &super::removal_message(&answer, &head));
        }
    }
    Ok(())
}

pub async fn catalog(global: &Global, command: CatalogCommand) -> anyhow::Result<()> {
    let mut client = global.client()?;
    match command {
        CatalogCommand::List => {
            let definitions: Vec<DefinitionResponse> =
                client.get_as("/api/v1/addon-definitions").await?;
            global.print(&definitions, |definitions| {
                Table::rows(
                    ["NAME", "DISPLAY NAME", "CHART", "VERSION", "EXPORTS"],
                    definitions,
                    |d| {
                        let exports = d.exports.keys().cloned().collect::<Vec<_>>().join(",");
                        vec![
                            cell(&d.name),
                            cell(&d.display_name),
                            cell(&d.chart_name),
                            cell(&d.chart_version),
                            exports,
                        ]
                    },
                )
            });
        }
        CatalogCommand::Get { definition } => {
            let found: DefinitionResponse = client
                .get_as(&format!(
                    "/api/v1/addon-definitions/{}",
                    api::query_value(&definition)
                ))
                .await?;
            global.print(&found, |d| {
                Table::fields(&[
                    ("Name", cell(&d.name)),
                    ("Display name", cell(&d.display_name)),
                    ("Chart", cell(&d.chart_name)),
                    ("Repository", cell(&d.chart_repository)),
                    ("Version", cell(&d.chart_version)),
                    (
                        "Default values",
                        serde_yaml::to_string(&d.default_values)
                            .unwrap_or_default()
                            .trim_end()
                            .replace('\n', "\n  "),
                    ),
                ])
            });
        }
    }
    Ok(())
}
