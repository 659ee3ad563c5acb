//! `kubenest templates`.
//!
//! `templates create -f` takes the API's template body (`name`, `scope`, `description`,
//! `parameters`, `components`) in YAML or JSON, with `project` / `cluster` (names or ids) for
//! the template's place when its scope is `project` or `cluster`.

use std::path::PathBuf;

use clap::Subcommand;
use std::collections::BTreeMap;

use kubenest_api::apps::AppResponse;
use kubenest_api::templates::{
    self as api_templates, DeployBody, FromAppBody, FromChartBody, Scope, TemplateChart,
    TemplateResponse,
};
use serde_json::{Map, Value, json};

use super::{Global, Table, by_name, cell, clusters, is_id, projects, read_document, text, word};
use crate::api;

#[derive(Debug, Subcommand)]
pub enum TemplatesCommand {
    /// The templates you can use (the organization's and global ones).
    List,
    /// One template: its parameters and components.
    Get { template: String },
    /// Create a template from a file (`-` for standard input).
    Create {
        #[arg(short = 'f', long = "file")]
        file: PathBuf,
    },
    /// Make a template of an App's components.
    FromApp {
        /// The App's id.
        app_id: String,
        #[command(flatten)]
        placement: Placement,
    },
    /// Make a template of any Helm chart: one Helm workload, a slot for each of its values.
    FromChart {
        /// The chart repository (`https://…`) or OCI registry path (`oci://…`).
        repository: String,
        /// The chart's name.
        chart: String,
        /// Its exact version.
        #[arg(long)]
        version: String,
        #[command(flatten)]
        placement: Placement,
    },
    /// Print a template as portable JSON (for `templates import`).
    Export { template: String },
    /// Import an exported template.
    Import {
        #[arg(short = 'f', long = "file")]
        file: PathBuf,
        #[command(flatten)]
        placement: Placement,
    },
    /// Deploy a template as a new App: `--param key=value` for each parameter.
    Deploy {
        template: String,
        /// The project (name or id) the App goes to.
        #[arg(long)]
        project: String,
        /// The new App's name.
        #[arg(long)]
        name: String,
        #[arg(long = "param", value_parser = parse_param)]
        params: Vec<(String, String)>,
    },
    /// Delete a template.
    Delete { template: String },
}

/// A new template's name and place, as `from-app`, `from-chart` and `import` take them.
#[derive(Debug, clap::Args)]
pub struct Placement {
    /// The new template's name.
    #[arg(long)]
    name: String,
    /// project, cluster or global.
    #[arg(long, default_value = "project", value_parser = parse_scope)]
    scope: Scope,
    /// The project (name or id) of a project-scoped template.
    #[arg(long)]
    project: Option<String>,
    /// The cluster (name or id) of a cluster-scoped template.
    #[arg(long)]
    cluster: Option<String>,
}

/// A scope as the API spells it.
fn parse_scope(s: &str) -> Result<Scope, String> {
    serde_json::from_value(Value::String(s.to_owned()))
        .map_err(|_| format!("{s:?} is none of project, cluster or global"))
}

fn parse_param(s: &str) -> Result<(String, String), String> {
    let (key, value) = s
        .split_once('=')
        .ok_or_else(|| format!("{s:?} is not key=value"))?;
    Ok((key.to_owned(), value.to_owned()))
}

async fn resolve(
    global: &Global,
    client: &mut api::Client,
    template: &str,
) -> anyhow::Result<String> {
    if is_id(template) {
        return Ok(template.to_owned());
    }
    let org = global.org(client).await?;
    let templates: Vec<TemplateResponse> = client
        .get_as(&format!("/api/v1/templates?org={}", api::query_value(&org)))
        .await?;
    let found = by_name(
        &templates,
        template,
        "template",
        &format!("organization {org}"),
    )?;
    Ok(found.id.clone())
}

/// A new template's name and scope, and the ids of its place.
async fn place(
    global: &Global,
    client: &mut api::Client,
    placement: &Placement,
) -> anyhow::Result<api_templates::Placement> {
    let project_id = match &placement.project {
        Some(project) => Some(projects::resolve(global, client, project).await?),
        None => None,
    };
    let cluster_id = match &placement.cluster {
        Some(cluster) => Some(clusters::resolve(global, client, cluster).await?),
        None => None,
    };
    Ok(api_templates::Placement {
        name: placement.name.clone(),
        scope: placement.scope,
        project_id,
        cluster_id,
        description: None,
    })
}

/// Turns the `project` / `cluster` names of a template file's place into the API's ids. The
/// file is the user's own and goes to the API as written otherwise, so the API names any field
/// at fault.
async fn resolve_place(
    global: &Global,
    client: &mut api::Client,
    body: &mut Map<String, Value>,
) -> anyhow::Result<()> {
    if let Some(project) = body.remove("project").map(|p| text(&p)) {
        let id = projects::resolve(global, client, &project).await?;
        body.insert("project_id".into(), json!(id));
    }
    if let Some(cluster) = body.remove("cluster").map(|c| text(&c)) {
        let id = clusters::resolve(global, client, &cluster).await?;
        body.insert("cluster_id".into(), json!(id));
    }
    Ok(())
}

pub async fn run(global: &Global, command: TemplatesCommand) -> anyhow::Result<()> {
    let mut client = global.client()?;
    match command {
        TemplatesCommand::List => {
            let org = global.org(&mut client).await?;
            let templates: Vec<TemplateResponse> = client
                .get_as(&format!("/api/v1/templates?org={}", api::query_value(&org)))
                .await?;
            global.print(&templates, |templates| {
                Table::rows(
                    ["NAME", "ID", "SCOPE", "VALID", "PARAMETERS", "DESCRIPTION"],
                    templates,
                    |t| {
                        let parameters: Vec<&str> =
                            t.parameters.iter().map(|p| p.name.as_str()).collect();
                        vec![
                            cell(&t.name),
                            cell(&t.id),
                            word(t.scope),
                            t.valid.to_string(),
                            parameters.join(","),
                            cell(&t.description),
                        ]
                    },
                )
            });
        }
        TemplatesCommand::Get { template } => {
            let id = resolve(global, &mut client, &template).await?;
            let template: TemplateResponse =
                client.get_as(&format!("/api/v1/templates/{id}")).await?;
            global.print(&template, template_table);
        }
        TemplatesCommand::Create { file } => {
            let mut document = read_document(&file)?;
            let body = document
                .as_object_mut()
                .ok_or_else(|| anyhow::anyhow!("a template file is a mapping"))?;
            resolve_place(global, &mut client, body).await?;
            let created: TemplateResponse = client.post_as("/api/v1/templates", &document).await?;
            global.done(
                &created,
                &format!(
                    "template {} created ({})",
                    cell(&created.name),
                    cell(&created.id)
                ),
            );
        }
        TemplatesCommand::FromApp { app_id, placement } => {
            let body = FromAppBody {
                app_id,
                at: place(global, &mut client, &placement).await?,
            };
            let name = placement.name;
            let created: TemplateResponse =
                client.post_as("/api/v1/templates/from-app", &body).await?;
            global.done(
                &created,
                &format!("template {name} created ({})", cell(&created.id)),
            );
        }
        TemplatesCommand::FromChart {
            repository,
            chart,
            version,
            placement,
        } => {
            let body = FromChartBody {
                at: place(global, &mut client, &placement).await?,
                chart: TemplateChart {
                    repository,
                    name: chart.clone(),
                    version: version.clone(),
                },
            };
            let name = placement.name;
            let created: TemplateResponse = client
                .post_as("/api/v1/templates/from-chart", &body)
                .await?;
            let slots = created.parameters.len();
            global.done(
                &created,
                &format!(
                    "template {name} created ({}) from {chart} {version}: {slots} slots",
                    cell(&created.id)
                ),
            );
        }
        TemplatesCommand::Export { template } => {
            let id = resolve(global, &mut client, &template).await?;
            // The export is the template resource's own shape, printed for `import` as it came.
            let exported: Value = client
                .get_as(&format!("/api/v1/templates/{id}/export"))
                .await?;
            super::emit(&format!("{}\n", serde_json::to_string_pretty(&exported)?));
        }
        TemplatesCommand::Import { file, placement } => {
            /// The import body: the place, and the exported template the user gives, as
            /// written (the API reads it and names the field at fault).
            #[derive(serde::Serialize)]
            struct ImportBody {
                #[serde(flatten)]
                at: api_templates::Placement,
                template: Value,
            }
            let body = ImportBody {
                template: read_document(&file)?,
                at: place(global, &mut client, &placement).await?,
            };
            let name = placement.name;
            let created: TemplateResponse =
                client.post_as("/api/v1/templates/import", &body).await?;
            global.done(
                &created,
                &format!("template {name} imported ({})", cell(&created.id)),
            );
        }
        TemplatesCommand::Deploy {
            template,
            project,
            name,
            params,
        } => {
            let id = resolve(global, &mut client, &template).await?;
            let project_id = projects::resolve(global, &mut client, &project).await?;
            let parameters: BTreeMap<String, Value> = params
                .into_iter()
                .map(|(k, v)| (k, Value::String(v)))
                .collect();
            let body = DeployBody {
                project_id,
                name: name.clone(),
                parameters,
            };
            let app: AppResponse = client
                .post_as(&format!("/api/v1/templates/{id}/deploy"), &body)
                .await?;
            global.done(
                &app,
                &format!(
                    "App {name} created from {template} ({}): {}",
                    cell(&app.id),
                    cell(&app.phase)
                ),
            );
        }
        TemplatesCommand::Delete { template } => {
            let id = resolve(global, &mut client, &template).await?;
            // 204: no answer to read.
            let answer: () = client.delete_as(&format!("/api/v1/templates/{id}")).await?;
            global.done(&answer, &format!("template {template} deleted"));
        }
    }
    Ok(())
}

fn template_table(template: &TemplateResponse) -> Table {
    let mut table = Table::fields(&[
        ("Name", cell(&template.name)),
        ("Id", cell(&template.id)),
        ("Scope", word(template.scope)),
        ("Valid", template.valid.to_string()),
        ("Message", cell(&template.message)),
        ("Description", cell(&template.description)),
    ]);
    for parameter in &template.parameters {
        table.push(vec![
            format!("Parameter {}:", cell(&parameter.name)),
            format!(
                "{}{}{} {}",
                word(parameter.type_),
                if parameter.required { ", required" } else { "" },
                match &parameter.default {
                    None => String::new(),
                    Some(d) => format!(", default {}", cell(d)),
                },
                cell(&parameter.description)
            ),
        ]);
    }
    // A template's components are free-form (any string may be a `${slot}`): only their name
    // and type are shown.
    for component in &template.components {
        let field = |key: &str| component.get(key).map_or_else(|| "-".into(), text);
        table.push(vec![format!("Component {}:", field("name")), field("type")]);
    }
    table
}
