//! `kubenest apps diff -f app.yaml`: what applying the file would change, as a unified diff of
//! the App's spec — the live one against the one the API answers to the same change sent as a
//! dry run, so the API's own defaults and checks are in it (a file the API would refuse is
//! refused here too). Exit status 1 when there are differences, as `diff` and `kubectl diff`.

use std::path::Path;

use serde_json::{Map, Value};

use super::{apply, read_document};
use crate::api;
use crate::cmd::{Global, emit};
use crate::exit::DiffFound;

/// The parts of an App a file sets.
const SPEC: &[&str] = &[
    "name",
    "project",
    "components",
    "progress_deadline_seconds",
    "verification",
    "paused",
];

/// The spec of an App answer, as YAML (nothing for no App).
fn spec_yaml(app: Option<&Value>) -> String {
    let Some(app) = app else {
        return String::new();
    };
    let spec: Map<String, Value> = SPEC
        .iter()
        .filter_map(|key| app.get(*key).map(|v| ((*key).to_owned(), v.clone())))
        .collect();
    serde_yaml::to_string(&spec).unwrap_or_default()
}

/// The unified diff of `live` and `after` (empty when they agree).
pub fn unified(name: &str, live: Option<&Value>, after: &Value) -> String {
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
    let name = super::text(&after["name"]);
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
        let live = json!({"name": "web", "project": "shop", "phase": "Running",
            "components": [{"name": "web", "workload_spec": {"image": "web:1"}}]});
        let mut after = live.clone();
        after["phase"] = json!("Pending");
        assert_eq!(unified("web", Some(&live), &after), "");
        after["components"][0]["workload_spec"]["image"] = json!("web:2");
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
