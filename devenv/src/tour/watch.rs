//! Waiting on the API during the tour: a step's deadline, polling, an App's change until it
//! runs, and its recorded history.

use std::time::{Duration, Instant};

use anyhow::Context as _;
use serde_json::Value;

use kubenest_cli::api;
use kubenest_cli::cmd::{Progress, Table, progress, text};

use super::printer::Printer;

/// How long one step may take before the tour gives up.
pub(crate) const STEP: Duration = Duration::from_secs(180);

/// Polls `check` until it yields a value, or fails with what it last saw.
pub(super) async fn eventually<T>(
    what: &str,
    mut check: impl AsyncFnMut() -> anyhow::Result<Result<T, String>>,
) -> anyhow::Result<T> {
    let deadline = Instant::now() + STEP;
    loop {
        let last = match check().await? {
            Ok(value) => return Ok(value),
            Err(last) => last,
        };
        anyhow::ensure!(
            Instant::now() < deadline,
            "{what}: not so after {}s (last seen: {last})",
            STEP.as_secs()
        );
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

/// Waits for the change made after `before` to run, printing each phase it passes through.
pub(super) async fn running(
    client: &mut api::Client,
    app_id: &str,
    before: Option<&Value>,
    out: &mut Printer,
) -> anyhow::Result<Value> {
    let started = Instant::now();
    let mut seen = Vec::<String>::new();
    let app = eventually("the change Running", async || {
        let app = client.get(&format!("/api/v1/apps/{app_id}")).await?;
        let phase = text(&app["phase"]);
        if seen.last() != Some(&phase) {
            seen.push(phase);
        }
        // The CLI judges a typed App; the tour keeps the raw answer to print from.
        let typed = serde_json::from_value(app.clone())?;
        let before = before
            .map(|b| serde_json::from_value(b.clone()))
            .transpose()?;
        match progress(&typed, before.as_ref()) {
            Progress::Running => Ok(Ok(app)),
            Progress::Failed(message) => anyhow::bail!("the App failed: {message}"),
            Progress::Waiting(state) => Ok(Err(state)),
        }
    })
    .await?;
    out.line(format!(
        "   {} → revision {} Running after {:.1}s",
        seen.join(" → "),
        text(&app["revision"]).chars().take(12).collect::<String>(),
        started.elapsed().as_secs_f64()
    ));
    Ok(app)
}

/// Prints the App's history (expecting `rows` deployments); returns the oldest deployment's id.
pub(super) async fn history(
    client: &mut api::Client,
    app_id: &str,
    out: &mut Printer,
    rows: usize,
) -> anyhow::Result<String> {
    let history = eventually("the history recorded", async || {
        let history = client
            .get(&format!("/api/v1/apps/{app_id}/deployments"))
            .await?;
        let count = history.as_array().map_or(0, Vec::len);
        let settled = history
            .as_array()
            .is_some_and(|rows| rows.iter().all(|r| r["result"] != "pending"));
        Ok(if count == rows && settled {
            Ok(history)
        } else {
            Err(history.to_string())
        })
    })
    .await?;
    let mut table = Table::new(["DEPLOYMENT", "OPERATION", "ACTOR", "RESULT", "CHANGED"]);
    for row in history.as_array().into_iter().flatten() {
        let changed: Vec<String> = row["diff"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|op| {
                format!(
                    "{} {}{}",
                    text(&op["op"]),
                    text(&op["path"]),
                    match &op["value"] {
                        Value::String(v) => format!(" = {v}"),
                        _ => String::new(),
                    }
                )
            })
            .take(2)
            .collect();
        table.push(vec![
            text(&row["id"]).chars().take(8).collect(),
            text(&row["operation"]),
            text(&row["actor"]),
            text(&row["result"]),
            if changed.is_empty() {
                "-".into()
            } else {
                changed.join("; ")
            },
        ]);
    }
    out.table(&table);
    history
        .as_array()
        .and_then(|rows| rows.last())
        .map(|row| text(&row["id"]))
        .context("no deployment recorded")
}
