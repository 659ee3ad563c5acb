//! `kubenest apps`.
//!
//! `apps apply -f app.yaml` takes the API's App body in YAML or JSON — `name`, `components`,
//! optionally `progress_deadline_seconds` — with the project given as `project` (name or id),
//! `project_id` or `--project`. An App of that name in the project is changed (a new deployment
//! when anything differs), otherwise created.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use clap::{Args, Subcommand};
use serde_json::{Value, json};

use super::{Global, Output, Table, is_id, projects, read_document, text};
use crate::api;

#[derive(Debug, Subcommand)]
pub enum AppsCommand {
    /// Create or change an App from a file (`-` for standard input).
    Apply {
        #[arg(short = 'f', long = "file")]
        file: PathBuf,
        /// The project (name or id), unless the file names it.
        #[arg(long)]
        project: Option<String>,
        #[command(flatten)]
        wait: WaitArgs,
    },
    /// The organization's Apps (or one project's).
    List {
        #[arg(long)]
        project: Option<String>,
    },
    /// One App: phase, components, sync and drift, conditions.
    Get(AppArg),
    /// Every deployment of an App, newest first: who, when, what, the result.
    History(AppArg),
    /// Deploy an earlier deployment's spec again (a new deployment).
    Rollback {
        #[command(flatten)]
        app: AppArg,
        /// The deployment id to return to, or `previous` for the one before the latest.
        #[arg(long)]
        to: String,
        #[command(flatten)]
        wait: WaitArgs,
    },
    /// Deploy the current spec again (e.g. to pull a moving tag).
    Redeploy {
        #[command(flatten)]
        app: AppArg,
        #[command(flatten)]
        wait: WaitArgs,
    },
    /// Scale every workload to zero and hold changes until resumed.
    Pause(AppArg),
    /// Undo a pause.
    Resume {
        #[command(flatten)]
        app: AppArg,
        #[command(flatten)]
        wait: WaitArgs,
    },
    /// Delete an App and everything it runs.
    Delete {
        #[command(flatten)]
        app: AppArg,
        /// Wait until the agent has removed it from the cluster.
        #[arg(long)]
        wait: bool,
        #[arg(long, default_value_t = 300)]
        timeout: u64,
    },
}

#[derive(Debug, Clone, Args)]
pub struct AppArg {
    /// The App (id, or name; with --project when several projects have one of that name).
    pub app: String,
    #[arg(long)]
    pub project: Option<String>,
}

#[derive(Debug, Clone, Args)]
pub struct WaitArgs {
    /// Wait until the agent reports the new revision Running (fails if it fails).
    #[arg(long)]
    pub wait: bool,
    /// Seconds to wait.
    #[arg(long, default_value_t = 300)]
    pub timeout: u64,
}

/// All Apps visible in the organization (every page), optionally in one project.
async fn list(
    global: &Global,
    client: &mut api::Client,
    project_id: Option<&str>,
) -> anyhow::Result<Vec<Value>> {
    let org = global.org(client).await?;
    let mut items = Vec::new();
    let mut next: Option<String> = None;
    loop {
        let mut path = format!("/api/v1/apps?org={}&limit=500", api::query_value(&org));
        if let Some(project) = project_id {
            path.push_str(&format!("&project_id={}", api::query_value(project)));
        }
        if let Some(token) = &next {
            path.push_str(&format!("&continue={}", api::query_value(token)));
        }
        let page = client.get(&path).await?;
        items.extend(page["items"].as_array().cloned().unwrap_or_default());
        match page["continue"].as_str() {
            Some(token) if !token.is_empty() => next = Some(token.to_owned()),
            _ => return Ok(items),
        }
    }
}

/// The id of the App `arg` names.
async fn resolve(
    global: &Global,
    client: &mut api::Client,
    arg: &AppArg,
) -> anyhow::Result<String> {
    if is_id(&arg.app) {
        return Ok(arg.app.clone());
    }
    let project_id = match &arg.project {
        Some(project) => Some(projects::resolve(global, client, project).await?),
        None => None,
    };
    let apps = list(global, client, project_id.as_deref()).await?;
    let matches: Vec<&Value> = apps
        .iter()
        .filter(|a| a["name"] == arg.app.as_str())
        .collect();
    match matches.as_slice() {
        [one] => Ok(text(&one["id"])),
        [] => anyhow::bail!("no App named {:?}{}", arg.app, in_project(arg)),
        many => anyhow::bail!(
            "{} Apps are named {:?} (in projects {}): choose one with --project",
            many.len(),
            arg.app,
            many.iter()
                .map(|a| text(&a["project"]))
                .collect::<Vec<_>>()
                .join(", ")
        ),
    }
}

fn in_project(arg: &AppArg) -> String {
    arg.project
        .as_ref()
        .map(|p| format!(" in project {p}"))
        .unwrap_or_default()
}

pub async fn run(global: &Global, command: AppsCommand) -> anyhow::Result<()> {
    let mut client = global.client()?;
    match command {
        AppsCommand::Apply {
            file,
            project,
            wait,
        } => {
            let document = read_document(&file)?;
            let (app, before) = apply(global, &mut client, document, project.as_deref()).await?;
            report_change(global, &mut client, &app, before.as_ref(), &wait, "applied").await?;
        }
        AppsCommand::List { project } => {
            let project_id = match &project {
                Some(project) => Some(projects::resolve(global, &mut client, project).await?),
                None => None,
            };
            let apps = Value::Array(list(global, &mut client, project_id.as_deref()).await?);
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
        }
        AppsCommand::Get(arg) => {
            let id = resolve(global, &mut client, &arg).await?;
            let app = client.get(&format!("/api/v1/apps/{id}")).await?;
            global.print(&app, app_table);
        }
        AppsCommand::History(arg) => {
            let id = resolve(global, &mut client, &arg).await?;
            let history = client
                .get(&format!("/api/v1/apps/{id}/deployments"))
                .await?;
            global.print(&history, history_table);
        }
        AppsCommand::Rollback { app, to, wait } => {
            let id = resolve(global, &mut client, &app).await?;
            let before = client.get(&format!("/api/v1/apps/{id}")).await?;
            let deployment = if to == "previous" {
                let history = client
                    .get(&format!("/api/v1/apps/{id}/deployments"))
                    .await?;
                history
                    .get(1)
                    .map(|d| text(&d["id"]))
                    .ok_or_else(|| anyhow::anyhow!("App {} has no earlier deployment", app.app))?
            } else {
                to
            };
            let answer = client
                .post(
                    &format!("/api/v1/apps/{id}/rollback"),
                    &json!({"deployment_id": deployment}),
                )
                .await?;
            let verb = format!("rolled back to {deployment}");
            report_change(global, &mut client, &answer, Some(&before), &wait, &verb).await?;
        }
        AppsCommand::Redeploy { app, wait } => {
            // A redeploy keeps the revision and the App's deployment: its own history row says
            // when the agent has restarted the workloads.
            let id = resolve(global, &mut client, &app).await?;
            let known = client
                .get(&format!("/api/v1/apps/{id}/deployments"))
                .await?;
            let answer = client
                .post(&format!("/api/v1/apps/{id}/redeploy"), &json!({}))
                .await?;
            if wait.wait {
                let row = wait_new_deployment(
                    &mut client,
                    &id,
                    &known,
                    Duration::from_secs(wait.timeout),
                )
                .await?;
                global.done(
                    &row,
                    &format!("App {} redeployed: {}", app.app, text(&row["message"])),
                );
            } else {
                global.done(&answer, &format!("App {} redeploy requested", app.app));
            }
        }
        AppsCommand::Pause(arg) => {
            let id = resolve(global, &mut client, &arg).await?;
            let answer = client
                .post(&format!("/api/v1/apps/{id}/pause"), &json!({}))
                .await?;
            global.done(&answer, &format!("App {} paused", arg.app));
        }
        AppsCommand::Resume { app, wait } => {
            let id = resolve(global, &mut client, &app).await?;
            let before = client.get(&format!("/api/v1/apps/{id}")).await?;
            let answer = client
                .post(&format!("/api/v1/apps/{id}/resume"), &json!({}))
                .await?;
            report_change(
                global,
                &mut client,
                &answer,
                Some(&before),
                &wait,
                "resumed",
            )
            .await?;
        }
        AppsCommand::Delete { app, wait, timeout } => {
            let id = resolve(global, &mut client, &app).await?;
            let answer = client.delete(&format!("/api/v1/apps/{id}")).await?;
            if wait {
                wait_deleted(&mut client, &id, Duration::from_secs(timeout)).await?;
                global.done(&answer, &format!("App {} deleted", app.app));
            } else {
                global.done(&answer, &format!("App {} is being deleted", app.app));
            }
        }
    }
    Ok(())
}

/// Creates or changes the App a document describes; returns the API's answer and, for a
/// change, the App as it was before.
pub async fn apply(
    global: &Global,
    client: &mut api::Client,
    mut document: Value,
    project: Option<&str>,
) -> anyhow::Result<(Value, Option<Value>)> {
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
        .find(|a| a["name"] == name.as_str());
    match existing {
        Some(app) => {
            body.remove("name");
            let id = text(&app["id"]);
            let answer = client
                .patch(&format!("/api/v1/apps/{id}"), &Value::Object(body.clone()))
                .await?;
            Ok((answer, Some(app)))
        }
        None => {
            body.insert("project_id".into(), json!(project_id));
            let answer = client
                .post("/api/v1/apps", &Value::Object(body.clone()))
                .await?;
            Ok((answer, None))
        }
    }
}

/// Prints what a change did, waiting for it to run when asked.
async fn report_change(
    global: &Global,
    client: &mut api::Client,
    answer: &Value,
    before: Option<&Value>,
    wait: &WaitArgs,
    verb: &str,
) -> anyhow::Result<()> {
    let id = text(&answer["id"]);
    if !wait.wait {
        global.done(
            answer,
            &format!(
                "App {} {verb}: {}",
                text(&answer["name"]),
                text(&answer["phase"])
            ),
        );
        return Ok(());
    }
    let app = wait_running(
        client,
        &id,
        before,
        Duration::from_secs(wait.timeout),
        global.output == Output::Table,
    )
    .await?;
    global.done(
        &app,
        &format!(
            "App {} {verb}: Running at revision {}",
            text(&app["name"]),
            short_revision(&app["revision"])
        ),
    );
    Ok(())
}

/// Where a change stands, judged from the App now and as it was `before` the change.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Progress {
    /// The agent reports the change's revision Running.
    Running,
    /// The agent reports the change's revision failed (the message says why).
    Failed(String),
    /// Not yet: the controllers have not taken the change, or the agent has not applied it.
    Waiting(String),
}

/// A change has been taken once the App's deployment (or revision) differs from `before`'s;
/// it has landed once the agent reports that revision. (A redeploy changes neither; its history
/// row tells instead.)
pub fn progress(app: &Value, before: Option<&Value>) -> Progress {
    let phase = text(&app["phase"]);
    let taken = before.is_none_or(|before| {
        app["deployment_id"] != before["deployment_id"] || app["revision"] != before["revision"]
    });
    let observed = !app["revision"].is_null() && app["observed_revision"] == app["revision"];
    match phase.as_str() {
        "Running" if taken && observed => Progress::Running,
        "Failed" if taken && observed => Progress::Failed(text(&app["message"])),
        _ => Progress::Waiting(format!("{phase}: {}", text(&app["message"]))),
    }
}

/// Polls the App until the change made after `before` runs; prints phase changes to standard
/// error when `progress`. A failure of the change's revision is an error.
pub async fn wait_running(
    client: &mut api::Client,
    id: &str,
    before: Option<&Value>,
    timeout: Duration,
    print_progress: bool,
) -> anyhow::Result<Value> {
    let deadline = Instant::now() + timeout;
    let mut last_phase = String::new();
    loop {
        let app = client.get(&format!("/api/v1/apps/{id}")).await?;
        let phase = text(&app["phase"]);
        if print_progress && phase != last_phase {
            eprintln!(
                "  {}: {phase} {}",
                text(&app["name"]),
                text(&app["message"])
            );
            last_phase = phase.clone();
        }
        match progress(&app, before) {
            Progress::Running => return Ok(app),
            Progress::Failed(message) => anyhow::bail!(
                "App {} failed at revision {}: {message}",
                text(&app["name"]),
                short_revision(&app["revision"]),
            ),
            Progress::Waiting(state) if Instant::now() >= deadline => anyhow::bail!(
                "App {} is not Running after {}s: {state}",
                text(&app["name"]),
                timeout.as_secs(),
            ),
            Progress::Waiting(_) => tokio::time::sleep(Duration::from_millis(250)).await,
        }
    }
}

/// Polls the App's history until a deployment not in `known` has a result; `failed` is an
/// error.
async fn wait_new_deployment(
    client: &mut api::Client,
    id: &str,
    known: &Value,
    timeout: Duration,
) -> anyhow::Result<Value> {
    let known: Vec<&Value> = known
        .as_array()
        .into_iter()
        .flatten()
        .map(|d| &d["id"])
        .collect();
    let deadline = Instant::now() + timeout;
    loop {
        let history = client
            .get(&format!("/api/v1/apps/{id}/deployments"))
            .await?;
        let new = history
            .as_array()
            .into_iter()
            .flatten()
            .find(|d| !known.contains(&&d["id"]));
        match new.map(|d| (d, text(&d["result"]))) {
            Some((row, result)) if result == "succeeded" => return Ok(row.clone()),
            Some((row, result)) if result == "failed" => {
                anyhow::bail!(
                    "deployment {} failed: {}",
                    text(&row["id"]),
                    text(&row["message"])
                )
            }
            _ if Instant::now() >= deadline => {
                anyhow::bail!(
                    "no result for the new deployment after {}s",
                    timeout.as_secs()
                )
            }
            _ => tokio::time::sleep(Duration::from_millis(250)).await,
        }
    }
}

/// Polls until the App is gone (the agent confirmed the removal and the finalizer let go).
pub async fn wait_deleted(
    client: &mut api::Client,
    id: &str,
    timeout: Duration,
) -> anyhow::Result<()> {
    let deadline = Instant::now() + timeout;
    loop {
        match client.get(&format!("/api/v1/apps/{id}")).await {
            Err(e) if e.status() == Some(404) => return Ok(()),
            Err(e) => return Err(e.into()),
            Ok(app) if Instant::now() >= deadline => anyhow::bail!(
                "App {} still exists after {}s: {}",
                text(&app["name"]),
                timeout.as_secs(),
                text(&app["message"])
            ),
            Ok(_) => tokio::time::sleep(Duration::from_millis(250)).await,
        }
    }
}

fn short_revision(revision: &Value) -> String {
    let revision = text(revision);
    revision.chars().take(12).collect()
}

fn sync(app: &Value) -> String {
    let sync = &app["sync"];
    if sync["drift_detected"] == true {
        format!("drift ({})", text(&sync["drift_class"]))
    } else {
        "in sync".into()
    }
}

fn app_table(app: &Value) -> Table {
    let mut table = Table::fields(&[
        ("Name", text(&app["name"])),
        ("Id", text(&app["id"])),
        ("Organization", text(&app["org"])),
        ("Project", text(&app["project"])),
        ("Phase", text(&app["phase"])),
        ("Message", text(&app["message"])),
        ("Paused", text(&app["paused"])),
        ("Revision", text(&app["revision"])),
        ("Observed revision", text(&app["observed_revision"])),
        ("Deployment", text(&app["deployment_id"])),
        ("Ingress", text(&app["ingress_address"])),
        ("Sync", sync(app)),
    ]);
    for drift in app["sync"]["drift_details"]
        .as_array()
        .into_iter()
        .flatten()
    {
        table.push(vec![
            "  Drift:".into(),
            format!(
                "{} {}: desired {}, observed {} (by {})",
                text(&drift["resource"]),
                text(&drift["field"]),
                text(&drift["desired"]),
                text(&drift["observed"]),
                text(&drift["manager"])
            ),
        ]);
    }
    for component in app["components"].as_array().into_iter().flatten() {
        let name = text(&component["name"]);
        let status = app["component_status"]
            .as_array()
            .and_then(|s| s.iter().find(|s| s["name"] == name.as_str()));
        let detail = match component["type"].as_str() {
            Some("addon") => format!("addon {}", text(&component["addon_spec"]["definition"])),
            _ => {
                let spec = &component["workload_spec"];
                let what = if spec["image"].is_string() {
                    text(&spec["image"])
                } else if spec["git"].is_object() {
                    format!("git {}", text(&spec["git"]["url"]))
                } else {
                    format!("helm {}", text(&spec["helm"]["chart"]))
                };
                format!("workload {what}")
            }
        };
        let state = status
            .map(|s| {
                format!(
                    "{}/{} ready{}",
                    text(&s["ready_replicas"]),
                    text(&s["desired_replicas"]),
                    match text(&s["message"]).as_str() {
                        "-" => String::new(),
                        m => format!(", {m}"),
                    }
                )
            })
            .unwrap_or_else(|| "no report yet".into());
        table.push(vec![
            format!("Component {name}:"),
            format!("{detail}; {state}"),
        ]);
    }
    for condition in app["conditions"].as_array().into_iter().flatten() {
        table.push(vec![
            format!("Condition {}:", text(&condition["type"])),
            format!(
                "{} {} {}",
                text(&condition["status"]),
                text(&condition["reason"]),
                text(&condition["message"])
            ),
        ]);
    }
    table
}

fn history_table(history: &Value) -> Table {
    Table::rows(
        [
            "DEPLOYMENT",
            "OPERATION",
            "ACTOR",
            "RESULT",
            "REVISION",
            "CREATED",
            "MESSAGE",
        ],
        history,
        |d| {
            let operation = match d["rollback_of"].as_str() {
                Some(of) => format!("rollback of {}", &of[..of.len().min(8)]),
                None => text(&d["operation"]),
            };
            vec![
                text(&d["id"]),
                operation,
                text(&d["actor"]),
                text(&d["result"]),
                short_revision(&d["revision"]),
                text(&d["created_at"]),
                text(&d["message"]),
            ]
        },
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_change_has_landed_only_once_its_own_deployment_runs() {
        let before = json!({"phase": "Running", "deployment_id": "d1", "revision": "r1",
            "observed_revision": "r1", "message": ""});
        // Right after the PATCH the controllers have not taken it: still the old deployment.
        assert!(matches!(
            progress(&before, Some(&before)),
            Progress::Waiting(_)
        ));
        let taken = json!({"phase": "Deploying", "deployment_id": "d2", "revision": "r2",
            "observed_revision": "r1", "message": "applying"});
        assert!(matches!(
            progress(&taken, Some(&before)),
            Progress::Waiting(_)
        ));
        let landed = json!({"phase": "Running", "deployment_id": "d2", "revision": "r2",
            "observed_revision": "r2"});
        assert_eq!(progress(&landed, Some(&before)), Progress::Running);
        // A rollback to the first revision is a new deployment of an old revision.
        let rolled_back = json!({"phase": "Running", "deployment_id": "d3", "revision": "r1",
            "observed_revision": "r1"});
        assert_eq!(progress(&rolled_back, Some(&landed)), Progress::Running);
        let failed = json!({"phase": "Failed", "deployment_id": "d2", "revision": "r2",
            "observed_revision": "r2", "message": "progress deadline exceeded"});
        assert_eq!(
            progress(&failed, Some(&before)),
            Progress::Failed("progress deadline exceeded".into())
        );
        // A new App has nothing before it.
        assert_eq!(progress(&landed, None), Progress::Running);
    }
}
