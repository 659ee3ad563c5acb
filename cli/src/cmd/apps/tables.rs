//! The tables `kubenest apps` prints for people.

use serde_json::Value;

use super::super::{Table, text};

pub(super) fn short_revision(revision: &Value) -> String {
    let revision = text(revision);
    revision.chars().take(12).collect()
}

pub(super) fn sync(app: &Value) -> String {
    let sync = &app["sync"];
    if sync["drift_detected"] == true {
        format!("drift ({})", text(&sync["drift_class"]))
    } else {
        "in sync".into()
    }
}

pub(super) fn app_table(app: &Value) -> Table {
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
    for row in verdict_rows(&app["verdict"]) {
        table.push(row);
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
                    let git = &spec["git"];
                    match git["ref"].as_str() {
                        Some(at) => format!("git {} at {at}", text(&git["repository"])),
                        None => format!("git {}", text(&git["repository"])),
                    }
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

/// The verdict on the last verified revision: what it was, why, each signal with its baseline
/// and threshold, and what kubenest did with it.
fn verdict_rows(verdict: &Value) -> Vec<Vec<String>> {
    if !verdict.is_object() {
        return Vec::new();
    }
    let mut rows = vec![vec![
        "Verification:".into(),
        format!(
            "{} on revision {} ({} s window): {}",
            text(&verdict["verdict"]),
            short_revision(&verdict["revision"]),
            text(&verdict["window_seconds"]),
            text(&verdict["reason"])
        ),
    ]];
    for signal in verdict["signals"].as_array().into_iter().flatten() {
        let mut line = format!("{} {}", text(&signal["name"]), text(&signal["value"]));
        if !signal["baseline"].is_null() {
            line.push_str(&format!(
                ", previous revision {}",
                text(&signal["baseline"])
            ));
        }
        if !signal["threshold"].is_null() {
            line.push_str(&format!(", threshold {}", text(&signal["threshold"])));
        }
        if signal["failed"] == true {
            line.push_str(" (failed)");
        }
        rows.push(vec!["  Signal:".into(), line]);
    }
    if let Some(action) = verdict["action"].as_str() {
        rows.push(vec!["  Action:".into(), action.to_owned()]);
    }
    rows
}

pub(super) fn history_table(history: &Value) -> Table {
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
                text(&d["verification"]["verdict"]),
                text(&d["created_at"]),
                // A deployment kubenest made itself says why before what happened.
                match d["reason"].as_str() {
                    Some(reason) if !reason.is_empty() => {
                        format!("{reason}; {}", text(&d["message"]))
                    }
                    _ => text(&d["message"]),
                },
            ]
        },
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_git_workload_shows_its_repository_and_ref() {
        let app = json!({
            "name": "shop",
            "components": [
                {"name": "web", "type": "workload", "workload_spec": {
                    "git": {"repository": "https://git.example/shop.git", "ref": "main"}}},
                {"name": "api", "type": "workload", "workload_spec": {"image": "shop/api:1"}},
            ],
        });
        let shown = app_table(&app).to_string();
        assert!(
            shown.contains("workload git https://git.example/shop.git at main; no report yet"),
            "{shown}"
        );
        assert!(shown.contains("workload shop/api:1"), "{shown}");
    }

    #[test]
    fn a_verdict_shows_its_numbers_and_what_was_done() {
        let app = json!({
            "name": "shop",
            "verdict": {
                "revision": "abcdef0123456789", "verdict": "Failed", "window_seconds": 30,
                "reason": "error_ratio 0.3 above its threshold 0.05, previous revision 0",
                "signals": [
                    {"name": "error_ratio", "value": 0.3, "baseline": 0.0, "threshold": 0.05,
                     "failed": true},
                    {"name": "restarts", "value": 0.0, "baseline": null, "threshold": null,
                     "failed": false},
                ],
                "action": "rolling back to deployment 42",
            },
        });
        let shown = app_table(&app).to_string();
        for line in [
            "Failed on revision abcdef012345 (30 s window): error_ratio 0.3 above",
            "error_ratio 0.3, previous revision 0.0, threshold 0.05 (failed)",
            "restarts 0.0",
            "rolling back to deployment 42",
        ] {
            assert!(shown.contains(line), "{line:?} in {shown}");
        }
        let history = json!([
            {"id": "d2", "operation": "rollback", "rollback_of": "d1xxxxxxxx", "actor": "kubenest",
             "result": "succeeded", "revision": "r1", "created_at": "now", "message": "Running",
             "reason": "verification failed: error_ratio 0.3", "verification": {"verdict": "Passed"}},
        ]);
        let shown = history_table(&history).to_string();
        assert!(shown.contains("Passed"), "{shown}");
        assert!(
            shown.contains("verification failed: error_ratio 0.3; Running"),
            "{shown}"
        );
    }
}
