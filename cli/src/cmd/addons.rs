//! `kubenest addons` (standalone addon instances: Postgres, Redis, Kafka in a project) and
//! `kubenest catalog` (the addon definitions they are made from).

use std::path::PathBuf;

use clap::Subcommand;
use serde_json::{Value, json};

use super::{Global, Table, by_name, is_id, projects, read_document, text};
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
    let addons = client
        .get(&format!(
            "/api/v1/addon-instances?org={}",
            api::query_value(&org)
        ))
        .await?;
    let found = by_name(&addons, addon, "addon", &format!("organization {org}"))?;
    Ok(text(&found["id"]))
}

fn addon_table(addons: &Value) -> Table {
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
                text(&a["name"]),
                text(&a["project"]),
                text(&a["definition"]),
                text(&a["version"]),
                text(&a["phase"]),
                text(&a["revision"]),
            ]
        },
    )
}

fn one_addon(a: &Value) -> Table {
    Table::fields(&[
        ("Name", text(&a["name"])),
        ("Id", text(&a["id"])),
        ("Project", text(&a["project"])),
        ("Definition", text(&a["definition"])),
        ("Version", text(&a["version"])),
        ("Phase", text(&a["phase"])),
        ("Message", text(&a["message"])),
        ("Revision", text(&a["revision"])),
        ("Export secret", text(&a["export_secret"])),
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
            let addons = client.get(&path).await?;
            global.print(&addons, addon_table);
        }
        AddonsCommand::Get { addon } => {
            let id = resolve(global, &mut client, &addon).await?;
            let addon = client.get(&format!("/api/v1/addon-instances/{id}")).await?;
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
            let mut body = json!({"project_id": project_id, "name": name,
                "definition": definition});
            if let Some(version) = version {
                body["version"] = json!(version);
            }
            if let Some(values) = values {
                body["values"] = read_document(&values)?;
            }
            let addon = client.post("/api/v1/addon-instances", &body).await?;
            global.done(
                &addon,
                &format!("addon {name} created: {}", text(&addon["phase"])),
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
            let mut body = json!({});
            if let Some(version) = version {
                body["version"] = json!(version);
            }
            if let Some(values) = values {
                body["values"] = read_document(&values)?;
            }
            let answer = client
                .patch(&format!("/api/v1/addon-instances/{id}"), &body)
                .await?;
            global.done(
                &answer,
                &format!("addon {addon} changed: {}", text(&answer["phase"])),
            );
        }
        AddonsCommand::Rollback { addon, revision } => {
            let id = resolve(global, &mut client, &addon).await?;
            let answer = client
                .post(
                    &format!("/api/v1/addon-instances/{id}/rollback"),
                    &json!({"revision": revision}),
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
            let answer = client
                .delete(&format!("/api/v1/addon-instances/{id}{query}"))
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
            let definitions = client.get("/api/v1/addon-definitions").await?;
            global.print(&definitions, |definitions| {
                Table::rows(
                    ["NAME", "DISPLAY NAME", "CHART", "VERSION", "EXPORTS"],
                    definitions,
                    |d| {
                        let exports = d["exports"]
                            .as_object()
                            .map(|e| e.keys().cloned().collect::<Vec<_>>().join(","))
                            .unwrap_or_default();
                        vec![
                            text(&d["name"]),
                            text(&d["display_name"]),
                            text(&d["chart_name"]),
                            text(&d["chart_version"]),
                            exports,
                        ]
                    },
                )
            });
        }
        CatalogCommand::Get { definition } => {
            let found = client
                .get(&format!(
                    "/api/v1/addon-definitions/{}",
                    api::query_value(&definition)
                ))
                .await?;
            global.print(&found, |d| {
                Table::fields(&[
                    ("Name", text(&d["name"])),
                    ("Display name", text(&d["display_name"])),
                    ("Chart", text(&d["chart_name"])),
                    ("Repository", text(&d["chart_repository"])),
                    ("Version", text(&d["chart_version"])),
                    (
                        "Default values",
                        serde_yaml::to_string(&d["default_values"])
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
