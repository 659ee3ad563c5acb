//! `apps list`, and `--watch` on it and `apps get`: after the first answer, one more line (or, with
//! `-o json|yaml|name`, one more document) for every change the live event stream reports,
//! until interrupted. An App whose phase, revision, sync and message are all as last printed
//! is not printed again.

use std::collections::HashMap;

use kubenest_api::apps::AppResponse;
use kubenest_api::events::StreamEvent;

use super::{Filters, list_where, short_revision, sync};
use crate::api;
use crate::cmd::{Global, Output, Table, cell, clusters, emit, projects};

/// The columns a watch prints for each change.
fn row(app: &AppResponse) -> Vec<String> {
    vec![
        cell(&app.name),
        cell(&app.phase),
        short_revision(app.revision.as_deref()),
        sync(&app.sync),
        cell(&app.message),
    ]
}

const HEADER: [&str; 5] = ["NAME", "PHASE", "REVISION", "SYNC", "MESSAGE"];

/// Prints `app` as a watch does; `header` for the first table line.
fn print(global: &Global, app: &AppResponse, header: bool) {
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

/// Opens the stream of the Apps `query` selects (`app_id=…`, or `org=…[&project_id=…]`):
/// before the first answer is read, so that no change between the two is missed (the list,
/// then the watch, as kubectl does it).
pub async fn subscribe(client: &mut api::Client, query: &str) -> anyhow::Result<api::Events> {
    Ok(api::Events::open(client, query).await?)
}

/// Follows `events` (from [`subscribe`]), starting from `apps` as printed; `keep` says whether
/// an App belongs to the watch.
pub async fn watch(
    global: &Global,
    client: &mut api::Client,
    mut events: api::Events,
    apps: &[AppResponse],
    keep: impl Fn(&AppResponse) -> bool,
) -> anyhow::Result<()> {
    let mut last: HashMap<String, Vec<String>> =
        apps.iter().map(|a| (a.id.clone(), row(a))).collect();
    let mut header = apps.is_empty();
    while let Some(event) = events.next().await? {
        let Ok(data) = serde_json::from_str::<StreamEvent>(&event.data) else {
            continue;
        };
        let Some(id) = data.app_id.as_deref() else {
            continue;
        };
        let app: AppResponse = match client.get_as(&format!("/api/v1/apps/{id}")).await {
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
    let project_id = match &filters.project {
        Some(project) => Some(projects::resolve(global, client, project).await?),
        None => None,
    };
    let cluster_id = match &filters.cluster {
        Some(cluster) => Some(clusters::resolve(global, client, cluster).await?),
        None => None,
    };
    let phase = filters.phase.clone();
    let events = if follow {
        let org = global.org(client).await?;
        let mut query = format!("org={}", api::query_value(&org));
        if let Some(id) = &project_id {
            query.push_str(&format!("&project_id={}", api::query_value(id)));
        }
        Some(subscribe(client, &query).await?)
    } else {
        None
    };
    let selection: Vec<(&str, String)> = [
        ("project_id", project_id.clone()),
        ("cluster_id", cluster_id.clone()),
        ("phase", phase.clone()),
    ]
    .into_iter()
    .filter_map(|(key, value)| Some((key, value?)))
    .collect();
    let listed = list_where(global, client, selection).await?;
    global.print(&listed, |apps| {
        Table::rows(
            ["NAME", "ID", "PROJECT", "PHASE", "REVISION", "SYNC"],
            apps,
            |a| {
                vec![
                    cell(&a.name),
                    cell(&a.id),
                    cell(&a.project),
                    cell(&a.phase),
                    short_revision(a.revision.as_deref()),
                    sync(&a.sync),
                ]
            },
        )
    });
    let Some(events) = events else {
        return Ok(());
    };
    let keep = |app: &AppResponse| {
        project_id
            .as_ref()
            .is_none_or(|id| app.project_id.as_ref() == Some(id))
            && cluster_id
                .as_ref()
                .is_none_or(|id| app.cluster_id.as_ref() == Some(id))
            && phase.as_ref().is_none_or(|phase| &app.phase == phase)
    };
    watch(global, client, events, &listed, keep).await
}
