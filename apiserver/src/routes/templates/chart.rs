//! Templates from any Helm chart: the chart's `values.yaml` is read from its repository
//! (`https://`) or OCI registry (`oci://`) by [`crate::charts`], and each scalar of it becomes a
//! slot ([`kubenest_domain::chart_template`]). The caller's write access to the placement is
//! checked before anything is fetched, and what a fetch met is for the log, not the caller.

pub use kubenest_api::templates::{FromChartBody, TemplateChart};

use crate::reply::Created;

use axum::Json;
use axum::extract::State;
use kubenest_contracts::patterns;
use kubenest_domain::chart_template::{ChartSource, from_chart};
use kubenest_domain::sources::{Source, SourceError, parse_source};

use super::placement::{place, store_at};
use super::view::TemplateResponse;
use crate::authz::Caller;
use crate::error::{ApiError, ApiResult};
use crate::extract::Body;
use crate::state::AppState;

/// What every caller is told when a chart cannot be read, whatever the reason: the reason
/// (an address refused, a port closed, a status) would make the route a probe of networks.
pub const CANNOT_BE_READ: &str = "the chart cannot be read";

fn check_chart(chart: &TemplateChart) -> ApiResult<(Source, ChartSource)> {
    // The same rules as the document's (and the App's chart), said in words when broken.
    let fields = [
        (
            "chart.repository",
            &chart.repository,
            patterns::CHART_SOURCE,
            2048,
        ),
        ("chart.name", &chart.name, patterns::CHART_NAME, 253),
        (
            "chart.version",
            &chart.version,
            patterns::CHART_VERSION,
            128,
        ),
    ];
    for (field, value, pattern, max) in fields {
        if value.len() > max {
            return Err(ApiError::invalid(
                field,
                format!("at most {max} characters"),
            ));
        }
        if !patterns::matches(pattern, value) {
            let rule = patterns::rule_of(pattern).unwrap_or("not allowed");
            return Err(ApiError::invalid(field, rule));
        }
    }
    // What the pattern cannot say: a host that is not a name or an address, a bad port.
    let source = parse_source(&chart.repository).map_err(|e| {
        let message = match e {
            SourceError::Userinfo => e.to_string(),
            _ => format!("an https:// chart repository or an oci:// registry path: {e}"),
        };
        ApiError::invalid("chart.repository", message)
    })?;
    Ok((
        source,
        ChartSource {
            repository: chart.repository.trim_end_matches('/').to_owned(),
            name: chart.name.clone(),
            version: chart.version.clone(),
        },
    ))
}

/// A template of one Helm workload of any chart, a slot for each of its values.
pub async fn from_chart_route(
    State(state): State<AppState>,
    caller: Caller,
    Body(body): Body<FromChartBody>,
) -> ApiResult<Created<Json<TemplateResponse>>> {
    let (source, chart) = check_chart(&body.chart)?;
    // Who may write there is settled before the chart's server hears of it.
    let placed = place(&state, &caller, &body.at).await?;
    // Busy answers at once rather than queueing: a queue would hold connections for as long
    // as the slowest charts take, and the client knows when to come back.
    let _turn = state.charts().try_turn().ok_or_else(|| {
        ApiError::unavailable("busy", "charts are being read for others; retry shortly")
    })?;
    let values = state
        .charts()
        .values(&source, &chart.name, &chart.version)
        .await
        .map_err(|error| {
            tracing::info!(repository = %chart.repository, name = %chart.name,
                version = %chart.version, %error, "a chart cannot be read");
            ApiError::missing("chart", CANNOT_BE_READ)
        })?;
    let description = body.at.description.clone().unwrap_or_default();
    let spec = from_chart(&chart, &values, body.at.scope, &description);
    let mut at = body.at;
    at.description = Some(spec.description.clone());
    store_at(
        &state,
        &caller,
        &at,
        placed,
        spec.parameters,
        spec.components,
    )
    .await
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
        for repository in [
            "http://charts.example.test",
            "https://user:pass@charts.example.test",
            "oci://token@registry.example.test/charts",
        ] {
            assert_eq!(
                field(chart(repository, "web", "1.2.3")).as_deref(),
                Some("chart.repository"),
                "{repository}"
            );
        }
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
