//! `kubenest apps diff -f app.yaml`: what applying the file would change, as a unified diff of
//! the App's spec — the live one against the one the API answers to the same change sent as a
//! dry run, so the API's own defaults and checks are in it (a file the API would refuse is
//! refused here too). Exit status 1 when there are differences, as `diff` and `kubectl diff`.

use std::path::Path;

use kubenest_api::apps::AppResponse;
use kubenest_api::verification::VerificationView;
use serde::Serialize;
use serde_json::Value;

use super::{apply, read_document};
use crate::api;
use crate::cmd::{Global, emit};
use crate::exit::DiffFound;

/// The parts of an App a file sets, in the order the diff shows them.
#[derive(Serialize)]
struct Spec<'a> {
    components: &'a [Value],
    name: &'a str,
    paused: bool,
    progress_deadline_seconds: u32,
    project: &'a str,
    verification: &'a Option<VerificationView>,
}

/// The spec of an App answer, as YAML (nothing for no App).
fn spec_yaml(app: Option<&AppResponse>) -> String {
    let Some(app) = app else {
        return String::new();
    };
    let spec = Spec {
        components: &app.components,
        name: &app.name,
        paused: app.paused,
        progress_deadline_seconds: app.progress_deadline_seconds,
        project: &app.project,
        verification: &app.verification,
    };
    serde_yaml::to_string(&spec).unwrap_or_default()
}

/// The unified diff of `live` and `after` (empty when they agree).
pub fn unified(name: &str, live: Option<&AppResponse>, after: &AppResponse) -> String {
    let (live, after) = (spec_yaml(live), spec_yaml(Some(after)));
    if live == after {
        return String::new();
    }
    similar::TextDiff::from_lines(&live, &after)
        .unified_diff()
        .context_radius(3)
        .header(&format!("live/app/{name}"), &format!("applied/app/{name}"))
        .to_string()
}

pub async fn run(
    global: &Global,
    client: &api::Client,
    file: &Path,
    project: Option<&str>,
) -> anyhow::Result<()> {
    let document = read_document(file)?;
    let mut dry = client.clone();
    dry.set_dry_run(true);
    let (after, before) = apply(global, &mut dry, document, project).await?;
    let name = after.name.clone();
    let diff = unified(&name, before.as_ref(), &after);
    if diff.is_empty() {
        return Ok(());
    }
    emit(&diff);
    Err(DiffFound.into())
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn only_the_spec_is_compared_and_a_new_app_is_all_additions() {
        let app = |phase: &str, image: &str| -> AppResponse {
            serde_json::from_value(json!({
                "id": "a1", "name": "web", "org": "acme", "project": "shop", "phase": phase,
                "message": "", "paused": false, "progress_deadline_seconds": 600,
                "components": [{"name": "web", "workload_spec": {"image": image}}],
                "component_status": [], "conditions": [],
                "sync": {"drift_detected": false, "drift_details": []},
            }))
            .unwrap()
        };
        let live = app("Running", "web:1");
        let after = app("Pending", "web:1");
        assert_eq!(unified("web", Some(&live), &after), "");
        let after = app("Pending", "web:2");
        let diff = unified("web", Some(&live), &after);
        assert!(
            diff.starts_with("--- live/app/web\n+++ applied/app/web\n"),
            "{diff}"
        );
        assert!(
            diff.contains("-    image: web:1\n+    image: web:2\n"),
            "{diff}"
        );
        let created = unified("web", None, &live);
        assert!(
            created.lines().skip(3).all(|l| l.starts_with('+')),
            "{created}"
        );
    }
}
