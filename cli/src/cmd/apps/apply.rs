//! `kubenest apps apply`: an App file becomes a create or a change, and what it did is
//! reported, waiting for it to run when asked.

use std::time::Duration;

use kubenest_api::apps::AppResponse;
use serde_json::{Value, json};

use super::{WaitArgs, list, short_revision, wait_running};
use crate::api;
use crate::cmd::{Global, Output, cell, projects, text};

/// Creates or changes the App a document describes; returns the API's answer and, for a
/// change, the App as it was before.
///
/// The document is the user's own file and stays a [`Value`]: only its `project` and `name`
/// are read here, and the rest goes to the API as written, so the API (the one door that
/// checks an App) names any field at fault.
pub async fn apply(
    global: &Global,
    client: &mut api::Client,
    mut document: Value,
    project: Option<&str>,
) -> anyhow::Result<(AppResponse, Option<AppResponse>)> {
    let Some(body) = document.as_object_mut() else {
        anyhow::bail!("an App file is a mapping with `name`, `project` and `components`");
    };
    let named = body
        .remove("project")
        .or_else(|| body.remove("project_id"))
        .map(|p| text(&p));
    let project = named.as_deref().or(project).ok_or_else(|| {
        anyhow::anyhow!("which project? name it in the file (`project:`) or with --project")
    })?;
    let project_id = projects::resolve(global, client, project).await?;
    let name = body
        .get("name")
        .and_then(Value::as_str)
        .ok_or_else(|| anyhow::anyhow!("the App file has no `name`"))?
        .to_owned();
    let existing = list(global, client, Some(&project_id))
        .await?
        .into_iter()
        .find(|a| a.name == name);
    match existing {
        Some(app) => {
            body.remove("name");
            let answer = client
                .patch_as(&format!("/api/v1/apps/{}", app.id), &*body)
                .await?;
            Ok((answer, Some(app)))
        }
        None => {
            body.insert("project_id".into(), json!(project_id));
            let answer = client.post_as("/api/v1/apps", &*body).await?;
            Ok((answer, None))
        }
    }
}

/// Prints what a change did, waiting for it to run when asked.
pub(super) async fn report_change(
    global: &Global,
    client: &mut api::Client,
    answer: &AppResponse,
    before: Option<&AppResponse>,
    wait: &WaitArgs,
    verb: &str,
) -> anyhow::Result<()> {
    let id = &answer.id;
    // A dry run's change never runs: there is nothing to wait for.
    if !wait.wait || client.dry_run() {
        global.done(
            answer,
            &format!("App {} {verb}: {}", cell(&answer.name), cell(&answer.phase)),
        );
        return Ok(());
    }
    let app = wait_running(
        client,
        id,
        before,
        Duration::from_secs(wait.timeout),
        global.output == Output::Table,
    )
    .await?;
    global.done(
        &app,
        &format!(
            "App {} {verb}: Running at revision {}",
            cell(&app.name),
            short_revision(app.revision.as_deref())
        ),
    );
    Ok(())
}
