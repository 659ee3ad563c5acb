//! Templates from any Helm chart: `helm show values` reads the chart's `values.yaml` from its
//! repository (`https://`) or OCI registry (`oci://`), and each scalar of it becomes a slot
//! ([`kubenest_domain::chart_template`]). helm runs with homes of its own in a temporary folder,
//! so no repository or credential of anyone else's is used or kept.

use crate::reply::Created;
use std::time::Duration;

use axum::Json;
use axum::extract::State;
use kubenest_domain::chart_template::{ChartSource, from_chart};
use schemars::JsonSchema;
use serde::Deserialize;

use super::placement::{Placement, store};
use super::view::TemplateResponse;
use crate::authz::Caller;
use crate::error::{ApiError, ApiResult};
use crate::extract::Body;
use crate::state::AppState;

/// How long reading a chart may take.
const SHOW_TIMEOUT: Duration = Duration::from_secs(30);

/// The chart of a template.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct TemplateChart {
    /// `https://…` (a chart repository) or `oci://…` (a registry path holding the chart).
    #[schemars(length(max = 2048), regex(pattern = r"^(https?|oci)://[^\s]+$"))]
    pub repository: String,
    #[schemars(length(min = 1, max = 253), regex(pattern = r"^[A-Za-z0-9._-]+$"))]
    pub name: String,
    /// An exact version.
    #[schemars(length(max = 128), regex(pattern = r"^[0-9v][A-Za-z0-9.+-]*$"))]
    pub version: String,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct FromChartBody {
    #[serde(flatten)]
    pub at: Placement,
    pub chart: TemplateChart,
}

fn check_chart(chart: &TemplateChart) -> ApiResult<ChartSource> {
    let repository = chart.repository.trim_end_matches('/');
    let scheme_ok = ["https://", "http://", "oci://"]
        .iter()
        .any(|s| repository.starts_with(s) && repository.len() > s.len());
    if !scheme_ok || repository.contains(char::is_whitespace) || repository.len() > 2048 {
        return Err(ApiError::invalid(
            "chart.repository",
            "an https:// chart repository or an oci:// registry path",
        ));
    }
    let name_ok = !chart.name.is_empty()
        && chart.name.len() <= 253
        && chart
            .name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'));
    if !name_ok {
        return Err(ApiError::invalid(
            "chart.name",
            "letters, digits, '-', '_' and '.'",
        ));
    }
    let version_ok = !chart.version.is_empty()
        && chart.version.len() <= 128
        && chart
            .version
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '+' | '.'))
        && chart
            .version
            .starts_with(|c: char| c.is_ascii_digit() || c == 'v');
    if !version_ok {
        return Err(ApiError::invalid(
            "chart.version",
            "an exact version, like 1.2.3 (no ranges)",
        ));
    }
    Ok(ChartSource {
        repository: repository.to_owned(),
        name: chart.name.clone(),
        version: chart.version.clone(),
    })
}

/// The chart's default values, read by `helm show values`.
async fn chart_values(helm: &std::path::Path, chart: &ChartSource) -> ApiResult<serde_json::Value> {
    let homes = tempfile::tempdir().map_err(ApiError::internal)?;
    let mut command = tokio::process::Command::new(helm);
    command.arg("show").arg("values");
    if chart.repository.starts_with("oci://") {
        command.arg(format!("{}/{}", chart.repository, chart.name));
    } else {
        command
            .arg(&chart.name)
            .arg("--repo")
            .arg(&chart.repository);
    }
    command
        .arg("--version")
        .arg(&chart.version)
        .env_clear()
        .env("PATH", "/usr/bin:/bin")
        .env("HELM_CACHE_HOME", homes.path().join("cache"))
        .env("HELM_CONFIG_HOME", homes.path().join("config"))
        .env("HELM_DATA_HOME", homes.path().join("data"))
        .kill_on_drop(true);
    let output = tokio::time::timeout(SHOW_TIMEOUT, command.output())
        .await
        .map_err(|_| {
            ApiError::invalid(
                "chart",
                format!("the chart did not answer in {}s", SHOW_TIMEOUT.as_secs()),
            )
        })?
        .map_err(ApiError::internal)?;
    if !output.status.success() {
        let said = String::from_utf8_lossy(&output.stderr);
        let last = said
            .lines()
            .rev()
            .find(|l| !l.trim().is_empty())
            .unwrap_or("");
        // Nothing answered with that chart at that version: what the body names is missing.
        return Err(ApiError::missing(
            "chart",
            format!(
                "the chart cannot be read: {}",
                last.trim_start_matches("Error: ")
            ),
        ));
    }
    let text = String::from_utf8_lossy(&output.stdout);
    if text.trim().is_empty() {
        return Ok(serde_json::Value::Object(Default::default()));
    }
    serde_yaml::from_str(&text).map_err(|e| {
        ApiError::invalid("chart", format!("the chart's values.yaml is not YAML: {e}"))
    })
}

/// A template of one Helm workload of any chart, a slot for each of its values.
pub async fn from_chart_route(
    State(state): State<AppState>,
    caller: Caller,
    Body(body): Body<FromChartBody>,
) -> ApiResult<Created<Json<TemplateResponse>>> {
    let chart = check_chart(&body.chart)?;
    let helm = state.settings().helm.clone().ok_or_else(|| {
        ApiError::unavailable(
            "no_helm",
            "this API server has no helm to read charts with (--helm)",
        )
    })?;
    let values = chart_values(&helm, &chart).await?;
    let description = body.at.description.clone().unwrap_or_default();
    let spec = from_chart(&chart, &values, body.at.scope, &description);
    let mut at = body.at;
    at.description = Some(spec.description.clone());
    store(&state, &caller, &at, spec.parameters, spec.components).await
}

#[cfg(test)]
mod tests {
    use super::*;

    fn chart(repository: &str, name: &str, version: &str) -> TemplateChart {
        TemplateChart {
            repository: repository.into(),
            name: name.into(),
            version: version.into(),
        }
    }

    #[test]
    fn a_chart_reference_is_refused_naming_the_field() {
        let field = |c| check_chart(&c).unwrap_err().field;
        assert!(check_chart(&chart("https://charts.example.test", "web", "1.2.3")).is_ok());
        assert!(check_chart(&chart("oci://registry.example.test/charts", "web", "1.2.3")).is_ok());
        assert_eq!(
            field(chart("ftp://charts.example.test", "web", "1.2.3")).as_deref(),
            Some("chart.repository")
        );
        assert_eq!(
            field(chart("https://charts.example.test", "we b", "1.2.3")).as_deref(),
            Some("chart.name")
        );
        assert_eq!(
            field(chart("https://charts.example.test", "web", "^1.2")).as_deref(),
            Some("chart.version")
        );
    }
}
