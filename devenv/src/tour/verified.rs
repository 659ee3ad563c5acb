//! A bad change rolls itself back. The demo App is verified (a 30 s window, its own `/metrics`,
//! and a `load` workload sending its web app requests, so that each revision has traffic to be
//! judged by): its revision passes; a change answering 30 % of the requests with 500 is judged
//! `Failed` on its error ratio, and kubenest rolls back to the revision that passed (a
//! deployment by `kubenest` with the verdict as its reason), which is verified in turn and
//! passes. Each verdict is read from the event stream as it comes, and from the history after.
//! The tour runs it on `make dev`'s real node; `devenv/tests/real_node/install.rs` runs it on the agent
//! the chart installed, then breaks what the rollback needs.

use std::time::{Duration, Instant};

use anyhow::Context as _;
use kubenest_cli::api;
use kubenest_cli::cmd::text;
use serde_json::{Value, json};

use super::events::{Event, EventStream};
use super::printer::Printer;
use super::watch::eventually;

/// The demo's verification window: the shortest an App may set.
pub const WINDOW_SECONDS: u32 = 30;

/// Requests a second the `load` workload sends the web app: a bad error ratio is judged once
/// 50 requests were seen, within seconds of the revision running.
const LOAD_PER_SECOND: u32 = 10;

/// Makes the demo App `app` (named `name`, as [`super::demo::app`] makes it) verified: its
/// policy, and a `load` workload running the same image that sends its web app requests.
pub fn verified(app: &mut Value, image: &str) {
    let name = text(&app["name"]);
    app["verification"] = json!({
        "window_seconds": WINDOW_SECONDS, "on_failure": "rollback",
        "metrics": {"port": 8080, "path": "/metrics"},
    });
    if let Some(components) = app["components"].as_array_mut() {
        components.push(
            json!({"name": "load", "type": "workload", "workload_spec": {
            "image": image, "replicas": 1,
            "env": [
                {"name": "DEMO_LOAD_URL", "value": format!("http://{name}-web:8080/")},
                {"name": "DEMO_LOAD_PER_SECOND", "value": LOAD_PER_SECOND.to_string()},
            ]}}),
        );
    }
}

/// Sets `DEMO_ERROR_RATIO` of the web component in `components` (an App's, as the API answers).
pub fn with_error_ratio(components: &mut Value, ratio: &str) -> anyhow::Result<()> {
    let web = components
        .as_array_mut()
        .and_then(|c| c.iter_mut().find(|c| c["name"] == "web"))
        .context("the App has no web component")?;
    let env = web["workload_spec"]["env"]
        .as_array_mut()
        .context("the web component has no env")?;
    env.retain(|e| e["name"] != "DEMO_ERROR_RATIO");
    env.push(json!({"name": "DEMO_ERROR_RATIO", "value": ratio}));
    Ok(())
}

/// What became of a bad change, timed from the request that made it.
#[derive(Debug, Clone)]
pub struct RolledBack {
    /// The bad change's deployment, and the rollback kubenest made.
    pub bad: String,
    pub rollback: String,
    /// Until the bad revision's `Failed` verdict, the rollback's deployment, its `Passed`.
    pub judged: Duration,
    pub rolled_back: Duration,
    pub passed: Duration,
}

/// The step: once the current revision of App `app_id` passed, a change with 30 % errors, its
/// `Failed` verdict, the rollback kubenest makes, and the rollback's `Passed`.
pub async fn rolls_itself_back(
    client: &mut api::Client,
    api_url: &str,
    app_id: &str,
    out: &mut Printer,
) -> anyhow::Result<RolledBack> {
    let (app, verdict) = judged(client, app_id).await?;
    let verdict = &verdict;
    anyhow::ensure!(
        verdict["verdict"] == "Passed",
        "the demo's revision was not Passed but {}: {}",
        text(&verdict["verdict"]),
        text(&verdict["reason"])
    );
    out.line(format!(
        "   revision {} Passed its {} s window: {}",
        short(&verdict["revision"]),
        WINDOW_SECONDS,
        signals(verdict)
    ));

    let mut stream = EventStream::open(api_url, client, app_id).await?;
    let mut components = app["components"].clone();
    with_error_ratio(&mut components, "0.3")?;
    let started = Instant::now();
    client
        .patch(
            &format!("/api/v1/apps/{app_id}"),
            &json!({"components": components}),
        )
        .await?;
    let change = stream
        .until(|e| e.kind == "deployment")
        .await
        .context("waiting for the bad change's deployment")?;
    let bad_revision = text(&change.data["revision"]);
    out.line(format!(
        "   changed: web answers 30 % of its requests with 500 (DEMO_ERROR_RATIO=0.3), revision {}",
        short(&change.data["revision"])
    ));
    let failed = stream
        .until(|e| verdict_on(e, &bad_revision).is_some())
        .await
        .context("waiting for the bad revision's verdict")?;
    let judged_after = started.elapsed();
    anyhow::ensure!(
        failed.data["verdict"] == "Failed",
        "the bad revision was judged {}: {}",
        text(&failed.data["verdict"]),
        text(&failed.data["reason"])
    );
    out.line(format!(
        "   event app.verification after {:.1}s: Failed, {}",
        judged_after.as_secs_f64(),
        text(&failed.data["reason"])
    ));
    let rollback = stream
        .until(|e| e.kind == "deployment" && e.data["revision"] != bad_revision.as_str())
        .await
        .context("waiting for the automatic rollback")?;
    let rolled_back_after = started.elapsed();
    let rollback_revision = text(&rollback.data["revision"]);
    let passed = stream
        .until(|e| verdict_on(e, &rollback_revision).is_some())
        .await
        .context("waiting for the rollback's verdict")?;
    let passed_after = started.elapsed();
    anyhow::ensure!(
        passed.data["verdict"] == "Passed",
        "the rollback was judged {}: {}",
        text(&passed.data["verdict"]),
        text(&passed.data["reason"])
    );

    // The history says the same: the bad change failed, the rollback is kubenest's, with why.
    let history = client
        .get(&format!("/api/v1/apps/{app_id}/deployments?limit=2"))
        .await?;
    let (rollback_row, bad_row) = (&history[0], &history[1]);
    anyhow::ensure!(
        rollback_row["actor"] == "kubenest"
            && text(&rollback_row["reason"]).starts_with("verification failed: error_ratio")
            && rollback_row["verification"]["verdict"] == "Passed"
            && bad_row["verification"]["verdict"] == "Failed",
        "the history does not tell the automatic rollback: {history}"
    );
    out.line(format!(
        "   event deployment after {:.1}s: deployment {} by {}, a rollback of {}: {}",
        rolled_back_after.as_secs_f64(),
        text(&rollback_row["id"]),
        text(&rollback_row["actor"]),
        text(&rollback_row["rollback_of"]),
        text(&rollback_row["reason"])
    ));
    out.line(format!(
        "   event app.verification after {:.1}s: the rollback Passed its window: {}",
        passed_after.as_secs_f64(),
        signals(&passed.data)
    ));
    Ok(RolledBack {
        bad: text(&bad_row["id"]),
        rollback: text(&rollback_row["id"]),
        judged: judged_after,
        rolled_back: rolled_back_after,
        passed: passed_after,
    })
}

/// The App once its current deployment has a verdict (a window and then some), and the verdict,
/// as its history row keeps it: a verdict on the same revision deployed earlier is not it.
pub async fn judged(client: &mut api::Client, app_id: &str) -> anyhow::Result<(Value, Value)> {
    eventually("the current deployment judged", async || {
        let app = client.get(&format!("/api/v1/apps/{app_id}")).await?;
        let history = client
            .get(&format!("/api/v1/apps/{app_id}/deployments?limit=1"))
            .await?;
        let row = &history[0];
        Ok(
            if row["id"] == app["deployment_id"] && !row["verification"].is_null() {
                Ok((app.clone(), row["verification"].clone()))
            } else {
                Err(format!(
                    "deployment {} ({}), its verdict {}",
                    text(&row["id"]),
                    text(&row["result"]),
                    text(&row["verification"]["verdict"])
                ))
            },
        )
    })
    .await
}

/// The verdict `event` carries on `revision`, if it is one.
fn verdict_on<'a>(event: &'a Event, revision: &str) -> Option<&'a Value> {
    (event.kind == "app.verification" && event.data["revision"] == revision)
        .then_some(&event.data["verdict"])
}

/// A verdict's signals in one line: `requests 300, error_ratio 0 (previous 0), ...`.
fn signals(verdict: &Value) -> String {
    let shown: Vec<String> = verdict["signals"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|s| {
            let value = number(&s["value"]);
            if s["baseline"].is_number() {
                let baseline = number(&s["baseline"]);
                format!("{} {value} (previous {baseline})", text(&s["name"]))
            } else {
                format!("{} {value}", text(&s["name"]))
            }
        })
        .collect();
    shown.join(", ")
}

/// A measured number as people read it: at most three decimals, none when it is whole.
fn number(n: &Value) -> String {
    let n = n.as_f64().unwrap_or_default();
    let text = format!("{n:.3}");
    text.trim_end_matches('0').trim_end_matches('.').to_owned()
}

fn short(revision: &Value) -> String {
    text(revision).chars().take(12).collect()
}
