//! The tables `kubenest apps` prints for people.

use kubenest_api::apps::{
    AppResponse, ComponentBody, ComponentKind, DeploymentView, SyncView, WorkloadBody,
};
use kubenest_api::verification::VerdictView;

use super::super::{Table, cell, json_of, opt};

/// A revision's first 12 characters (`-` when there is none).
pub(super) fn short_revision(revision: Option<&str>) -> String {
    opt(&revision).chars().take(12).collect()
}

pub(super) fn sync(sync: &SyncView) -> String {
    if sync.drift_detected {
        format!("drift ({})", opt(&sync.drift_class))
    } else {
        "in sync".into()
    }
}

/// What a workload runs: its image, its Git source or its chart.
fn workload(spec: &WorkloadBody) -> String {
    if let Some(image) = &spec.image {
        cell(image)
    } else if let Some(git) = &spec.git {
        format!("git {} at {}", cell(&git.repository), git.git_ref)
    } else {
        format!("helm {}", json_of(&spec.helm.as_ref().map(|h| &h.chart)))
    }
}

/// A component's line: what it is, and how ready its workloads are.
fn component_row(app: &AppResponse, component: &ComponentBody) -> Vec<String> {
    let detail = match (
        component.kind,
        &component.workload_spec,
        &component.addon_spec,
    ) {
        (ComponentKind::Addon, _, Some(addon)) => format!("addon {}", cell(&addon.definition)),
        (_, Some(spec), _) => format!("workload {}", workload(spec)),
        _ => "-".into(),
    };
    let state = app
        .component_status
        .iter()
        .find(|s| s.name == component.name)
        .map(|s| {
            let message = match s.message.as_str() {
                "" => String::new(),
                m => format!(", {m}"),
            };
            format!("{}/{} ready{message}", s.ready_replicas, s.desired_replicas)
        })
        .unwrap_or_else(|| "no report yet".into());
    vec![
        format!("Component {}:", component.name),
        format!("{detail}; {state}"),
    ]
}

pub(super) fn app_table(app: &AppResponse) -> Table {
    let mut table = Table::fields(&[
        ("Name", cell(&app.name)),
        ("Id", cell(&app.id)),
        ("Organization", cell(&app.org)),
        ("Project", cell(&app.project)),
        ("Phase", cell(&app.phase)),
        ("Message", cell(&app.message)),
        ("Paused", app.paused.to_string()),
        ("Revision", opt(&app.revision)),
        ("Observed revision", opt(&app.observed_revision)),
        ("Deployment", opt(&app.deployment_id)),
        ("Ingress", opt(&app.ingress_address)),
        ("Sync", sync(&app.sync)),
    ]);
    for drift in &app.sync.drift_details {
        table.push(vec![
            "  Drift:".into(),
            format!(
                "{} {}: desired {}, observed {} (by {})",
                cell(&drift.resource),
                cell(&drift.field),
                cell(&drift.desired),
                cell(&drift.observed),
                opt(&drift.manager)
            ),
        ]);
    }
    for row in verdict_rows(app.verdict.as_ref()) {
        table.push(row);
    }
    // The API answers the components it stored, in the shape a body gives them.
    for component in &app.components {
        match serde_json::from_value::<ComponentBody>(component.clone()) {
            Ok(component) => table.push(component_row(app, &component)),
            Err(e) => table.push(vec!["Component:".into(), format!("unreadable: {e}")]),
        }
    }
    for condition in &app.conditions {
        table.push(vec![
            format!("Condition {}:", cell(&condition.kind)),
            format!(
                "{} {} {}",
                cell(&condition.status),
                cell(&condition.reason),
                cell(&condition.message)
            ),
        ]);
    }
    table
}

/// The verdict on the last verified revision: what it was, why, each signal with its baseline
/// and threshold, and what kubenest did with it.
fn verdict_rows(verdict: Option<&VerdictView>) -> Vec<Vec<String>> {
    let Some(verdict) = verdict else {
        return Vec::new();
    };
    let mut rows = vec![vec![
        "Verification:".into(),
        format!(
            "{} on revision {} ({} s window): {}",
            cell(&verdict.verdict),
            short_revision(Some(&verdict.revision)),
            verdict.window_seconds,
            cell(&verdict.reason)
        ),
    ]];
    for signal in &verdict.signals {
        // Numbers as the API writes them (`0.0`, not `0`).
        let mut line = format!("{} {}", cell(&signal.name), json_of(&signal.value));
        if let Some(baseline) = signal.baseline {
            line.push_str(&format!(", previous revision {}", json_of(&baseline)));
        }
        if let Some(threshold) = signal.threshold {
            line.push_str(&format!(", threshold {}", json_of(&threshold)));
        }
        if signal.failed {
            line.push_str(" (failed)");
        }
        rows.push(vec!["  Signal:".into(), line]);
    }
    if let Some(action) = &verdict.action {
        rows.push(vec!["  Action:".into(), action.clone()]);
    }
    rows
}

pub(super) fn history_table(history: &[DeploymentView]) -> Table {
    Table::rows(
        [
            "DEPLOYMENT",
            "OPERATION",
            "ACTOR",
            "RESULT",
            "REVISION",
            "VERDICT",
            "CREATED",
            "MESSAGE",
        ],
        history,
        |d| {
            let operation = match &d.rollback_of {
                Some(of) => format!("rollback of {}", of.chars().take(8).collect::<String>()),
                None => cell(&d.operation),
            };
            vec![
                cell(&d.id),
                operation,
                cell(&d.actor),
                cell(&d.result),
                short_revision(Some(&d.revision)),
                opt(&d.verification.as_ref().map(|v| &v.verdict)),
                cell(&d.created_at),
                // A deployment kubenest made itself says why before what happened.
                if d.reason.is_empty() {
                    cell(&d.message)
                } else {
                    format!("{}; {}", d.reason, cell(&d.message))
                },
            ]
        },
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{Value, json};

    /// An App answer: `fields` over one with nothing in it.
    fn app(fields: Value) -> AppResponse {
        let mut app = json!({
            "id": "a1", "name": "shop", "org": "acme", "project": "p", "phase": "Running",
            "message": "", "paused": false, "progress_deadline_seconds": 600,
            "components": [], "component_status": [], "conditions": [],
            "sync": {"drift_detected": false, "drift_details": []},
        });
        for (key, value) in fields.as_object().into_iter().flatten() {
            app[key] = value.clone();
        }
        serde_json::from_value(app).unwrap()
    }

    #[test]
    fn a_git_workload_shows_its_repository_and_ref() {
        let app = app(json!({
            "components": [
                {"name": "web", "type": "workload", "workload_spec": {
                    "git": {"repository": "https://git.example/shop.git", "ref": "main",
                            "mode": "dockerfile"}}},
                {"name": "api", "type": "workload", "workload_spec": {"image": "shop/api:1"}},
            ],
        }));
        let shown = app_table(&app).to_string();
        assert!(
            shown.contains("workload git https://git.example/shop.git at main; no report yet"),
            "{shown}"
        );
        assert!(shown.contains("workload shop/api:1"), "{shown}");
    }

    #[test]
    fn a_verdict_shows_its_numbers_and_what_was_done() {
        let app = app(json!({
            "verdict": {
                "revision": "abcdef0123456789", "verdict": "Failed", "window_seconds": 30,
                "reason": "error_ratio 0.3 above its threshold 0.05, previous revision 0",
                "started_at": "t0", "observed_at": "t1",
                "signals": [
                    {"name": "error_ratio", "value": 0.3, "baseline": 0.0, "threshold": 0.05,
                     "failed": true},
                    {"name": "restarts", "value": 0.0, "baseline": null, "threshold": null,
                     "failed": false},
                ],
                "action": "rolling back to deployment 42",
            },
        }));
        let shown = app_table(&app).to_string();
        for line in [
            "Failed on revision abcdef012345 (30 s window): error_ratio 0.3 above",
            "error_ratio 0.3, previous revision 0.0, threshold 0.05 (failed)",
            "restarts 0.0",
            "rolling back to deployment 42",
        ] {
            assert!(shown.contains(line), "{line:?} in {shown}");
        }
        let verdict = json!({"revision": "r1", "verdict": "Passed", "reason": "",
            "window_seconds": 30, "started_at": "t0", "observed_at": "t1", "signals": []});
        let history: Vec<DeploymentView> = serde_json::from_value(json!([
            {"id": "d2", "operation": "rollback", "rollback_of": "d1xxxxxxxx", "actor": "kubenest",
             "result": "succeeded", "revision": "r1", "created_at": "now", "message": "Running",
             "reason": "verification failed: error_ratio 0.3", "verification": verdict,
             "diff": null},
        ]))
        .unwrap();
        let shown = history_table(&history).to_string();
        assert!(shown.contains("Passed"), "{shown}");
        assert!(
            shown.contains("verification failed: error_ratio 0.3; Running"),
            "{shown}"
        );
    }
}
