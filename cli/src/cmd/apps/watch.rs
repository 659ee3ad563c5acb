//! `apps list`, and `--watch` on it and `apps get`: after the first answer, one more line (or, with
//! `-o json|yaml|name`, one more document) for every change the live event stream reports,
//! until interrupted. An App whose phase, revision, sync and message are all as last printed
//! is not printed again.

use std::collections::HashMap;

use serde_json::Value;

use super::{Filters, list_where, short_revision, sync};
use crate::api;
use crate::cmd::{Global, Output, Table, clusters, emit, projects, text};

/// The columns a watch prints for each change.
fn row(app: &Value) -> Vec<String> {
    vec![
        text(&app["name"]),
        text(&app["phase"]),
        short_revision(&app["revision"]),
        sync(app),
        text(&app["message"]),
    ]
}

const HEADER: [&str; 5] = ["NAME", "PHASE", "REVISION", "SYNC", "MESSAGE"];

/// Prints `app` as a watch does; `header` for the first table line.
fn print(global: &Global, app: &Value, header: bool) {
    match global.output {
        Output::Table | Output::Wide => {
            let mut table = if header {
                Table::new(HEADER)
            } else {
                Table::default()
            };
            table.push(row(app));
            emit(&table.to_string());
        }
        Output::Yaml => {
            emit("---\n");
            global.print(app, |_| Table::default());
        }
        _ => global.print(app, |_| Table::default()),
    }
}

/// Watches the Apps `query` selects on the stream (`app_id=…`, or `org=…[&project_id=…]`),
/// starting from `apps` as printed; `keep` says whether an App belongs to the watch.
pub async fn watch(
    global: &Global,
    client: &mut api::Client,
    query: &str,
    apps: &[Value],
    keep: impl Fn(&Value) -> bool,
) -> anyhow::Result<()> {
    let mut last: HashMap<String, Vec<String>> =
        apps.iter().map(|a| (text(&a["id"]), row(a))).collect();
    let mut header = apps.is_empty();
    let mut events = api::Events::open(client, query).await?;
    while let Some(event) = events.next().await? {
        let Ok(data) = serde_json::from_str::<Value>(&event.data) else {
            continue;
        };
        let Some(id) = data["app_id"].as_str() else {
            continue;
        };
        let app = match client.get(&format!("/api/v1/apps/{id}")).await {
            Ok(app) => app,
            // Gone (deleted) or no longer visible: nothing more to show of it.
            Err(e) if e.status() == Some(404) => continue,
            Err(e) => return Err(e.into()),
        };
        if !keep(&app) || last.get(id) == Some(&row(&app)) {
            continue;
        }
        print(global, &app, header);
        header = false;
        last.insert(id.to_owned(), row(&app));
    }
    anyhow::bail!("the API ended the event stream")
}

/// `apps list`: the Apps `filters` select, then, with `watch`, their changes.
pub async fn list(
    global: &Global,
    client: &mut api::Client,
    filters: Filters,
    follow: bool,
) -> anyhow::Result<()> {
    let mut selection = Vec::new();
    if let Some(project) = &filters.project {
        let id = projects::resolve(global, client, project).await?;
        selection.push(("project_id", id));
    }
    if let Some(cluster) = &filters.cluster {
        let id = clusters::resolve(global, client, cluster).await?;
        selection.push(("cluster_id", id));
    }
    if let Some(phase) = &filters.phase {
        selection.push(("phase", phase.clone()));
    }
    let listed = list_where(global, client, selection.clone()).await?;
    let apps = Value::Array(listed.clone());
    global.print(&apps, |apps| {
        Table::rows(
            ["NAME", "ID", "PROJECT", "PHASE", "REVISION", "SYNC"],
            apps,
            |a| {
                vec![
                    text(&a["name"]),
                    text(&a["id"]),
                    text(&a["project"]),
                    text(&a["phase"]),
                    short_revision(&a["revision"]),
                    sync(a),
                ]
            },
        )
    });
    if !follow {
        return Ok(());
    }
    let org = global.org(client).await?;
    let mut query = format!("org={}", api::query_value(&org));
    if let Some((_, id)) = selection.iter().find(|(key, _)| *key == "project_id") {
        query.push_str(&format!("&project_id={}", api::query_value(id)));
    }
    let keep = |app: &Value| {
        selection
            .iter()
            .all(|(key, want)| app[*key] == want.as_str())
    };
    watch(global, client, &query, &listed, keep).await
}
