//! `kubenest templates`.
//!
//! `templates create -f` takes the API's template body (`name`, `scope`, `description`,
//! `parameters`, `components`) in YAML or JSON, with `project` / `cluster` (names or ids) for
//! the template's place when its scope is `project` or `cluster`.

use std::path::PathBuf;

use clap::Subcommand;
use serde_json::{Map, Value, json};

use super::{Global, Table, by_name, clusters, is_id, projects, read_document, text};
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
    #[arg(long, default_value = "project")]
    scope: String,
    /// The project (name or id) of a project-scoped template.
    #[arg(long)]
    project: Option<String>,
    /// The cluster (name or id) of a cluster-scoped template.
    #[arg(long)]
    cluster: Option<String>,
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
    let templates = client
        .get(&format!("/api/v1/templates?org={}", api::query_value(&org)))
        .await?;
    Ok(text(
        &by_name(
            &templates,
            template,
            "template",
            &format!("organization {org}"),
        )?["id"],
    ))
}

/// Puts a new template's name and scope into `body`, and the ids of its place.
async fn place(
    global: &Global,
    client: &mut api::Client,
    body: &mut Map<String, Value>,
    placement: &Placement,
) -> anyhow::Result<()> {
    body.insert("name".into(), json!(placement.name));
    body.insert("scope".into(), json!(placement.scope));
    let (project, cluster) = (placement.project.clone(), placement.cluster.clone());
    resolve_place(global, client, body, project, cluster).await
}

/// Turns `project` / `cluster` names of a template's place (given, or else in `body` itself)
/// into the API's ids.
async fn resolve_place(
    global: &Global,
    client: &mut api::Client,
    body: &mut Map<String, Value>,
    project: Option<String>,
    cluster: Option<String>,
) -> anyhow::Result<()> {
    if let Some(project) = project.or_else(|| body.remove("project").map(|p| text(&p))) {
        let id = projects::resolve(global, client, &project).await?;
        body.insert("project_id".into(), json!(id));
    }
    if let Some(cluster) = cluster.or_else(|| body.remove("cluster").map(|c| text(&c))) {
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
            let templates = client
                .get(&format!("/api/v1/templates?org={}", api::query_value(&org)))
                .await?;
            global.print(&templates, |templates| {
                Table::rows(
                    ["NAME", "ID", "SCOPE", "VALID", "PARAMETERS", "DESCRIPTION"],
                    templates,
                    |t| {
                        let parameters: Vec<String> = t["parameters"]
                            .as_array()
                            .into_iter()
                            .flatten()
                            .map(|p| text(&p["name"]))
                            .collect();
                        vec![
                            text(&t["name"]),
                            text(&t["id"]),
                            text(&t["scope"]),
                            text(&t["valid"]),
                            parameters.join(","),
                            text(&t["description"]),
                        ]
                    },
                )
            });
        }
        TemplatesCommand::Get { template } => {
            let id = resolve(global, &mut client, &template).await?;
            let template = client.get(&format!("/api/v1/templates/{id}")).await?;
            global.print(&template, template_table);
        }
        TemplatesCommand::Create { file } => {
            let mut document = read_document(&file)?;
            let body = document
                .as_object_mut()
                .ok_or_else(|| anyhow::anyhow!("a template file is a mapping"))?;
            resolve_place(global, &mut client, body, None, None).await?;
            let created = client.post("/api/v1/templates", &document).await?;
            global.done(
                &created,
                &format!(
                    "template {} created ({})",
                    text(&created["name"]),
                    text(&created["id"])
                ),
            );
        }
        TemplatesCommand::FromApp { app_id, placement } => {
            let mut body = Map::new();
            body.insert("app_id".into(), json!(app_id));
            place(global, &mut client, &mut body, &placement).await?;
            let name = placement.name;
            let created = client
                .post("/api/v1/templates/from-app", &Value::Object(body))
                .await?;
            global.done(
                &created,
                &format!("template {name} created ({})", text(&created["id"])),
            );
        }
        TemplatesCommand::FromChart {
            repository,
            chart,
            version,
            placement,
        } => {
            let mut body = Map::new();
            body.insert(
                "chart".into(),
                json!({"repository": repository, "name": chart, "version": version}),
            );
            place(global, &mut client, &mut body, &placement).await?;
            let name = placement.name;
            let created = client
                .post("/api/v1/templates/from-chart", &Value::Object(body))
                .await?;
            let slots = created["parameters"].as_array().map_or(0, Vec::len);
            global.done(
                &created,
                &format!(
                    "template {name} created ({}) from {chart} {version}: {slots} slots",
                    text(&created["id"])
                ),
            );
        }
        TemplatesCommand::Export { template } => {
            let id = resolve(global, &mut client, &template).await?;
            let exported = client
                .get(&format!("/api/v1/templates/{id}/export"))
                .await?;
            super::emit(&format!("{}\n", serde_json::to_string_pretty(&exported)?));
        }
        TemplatesCommand::Import { file, placement } => {
            let template = read_document(&file)?;
            let mut body = Map::new();
            body.insert("template".into(), template);
            place(global, &mut client, &mut body, &placement).await?;
            let name = placement.name;
            let created = client
                .post("/api/v1/templates/import", &Value::Object(body))
                .await?;
            global.done(
                &created,
                &format!("template {name} imported ({})", text(&created["id"])),
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
            let parameters: Map<String, Value> =
                params.into_iter().map(|(k, v)| (k, json!(v))).collect();
            let app = client
                .post(
                    &format!("/api/v1/templates/{id}/deploy"),
                    &json!({"project_id": project_id, "name": name, "parameters": parameters}),
                )
                .await?;
            global.done(
                &app,
                &format!(
                    "App {name} created from {template} ({}): {}",
                    text(&app["id"]),
                    text(&app["phase"])
                ),
            );
        }
        TemplatesCommand::Delete { template } => {
            let id = resolve(global, &mut client, &template).await?;
            let answer = client.delete(&format!("/api/v1/templates/{id}")).await?;
            global.done(&answer, &format!("template {template} deleted"));
        }
    }
    Ok(())
}

fn template_table(template: &Value) -> Table {
    let mut table = Table::fields(&[
        ("Name", text(&template["name"])),
        ("Id", text(&template["id"])),
        ("Scope", text(&template["scope"])),
        ("Valid", text(&template["valid"])),
        ("Message", text(&template["message"])),
        ("Description", text(&template["description"])),
    ]);
    for parameter in template["parameters"].as_array().into_iter().flatten() {
        table.push(vec![
            format!("Parameter {}:", text(&parameter["name"])),
            format!(
                "{}{}{} {}",
                text(&parameter["type"]),
                if parameter["required"] == true {
                    ", required"
                } else {
                    ""
                },
                match &parameter["default"] {
                    Value::Null => String::new(),
                    d => format!(", default {}", text(d)),
                },
                text(&parameter["description"])
            ),
        ]);
    }
    for component in template["components"].as_array().into_iter().flatten() {
        table.push(vec![
            format!("Component {}:", text(&component["name"])),
            text(&component["type"]),
        ]);
    }
    table
}
