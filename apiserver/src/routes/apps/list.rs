//! The App list: by organization or project, paged with `limit` and `continue` across every
//! organization the caller sees.

use crate::extract::Query;
use axum::Json;
use axum::extract::State;
use kube::ResourceExt;
use kube::api::{Api, ListParams};
use kubenest_crds::App;
use kubenest_domain::app::PHASES;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::*;
use crate::authz::{Caller, Need};
use crate::error::{ApiError, ApiResult};
use crate::k8s;
use crate::state::AppState;

/// Filters and paging of the App list.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ListQuery {
    /// Only this organization's Apps.
    pub org: Option<String>,
    /// Only this project's Apps.
    pub project_id: Option<String>,
    /// Only the Apps on this cluster (its `cluster_id`).
    pub cluster_id: Option<String>,
    /// Only the Apps in this phase: `Pending`, `Deploying`, `Running`, `Paused`, `Failed` or
    /// `Deleting`.
    #[schemars(extend("enum" = PHASES))]
    pub phase: Option<String>,
    /// Page size, 1 to 500 (default 100).
    #[schemars(range(min = 1, max = 500))]
    pub limit: Option<u32>,
    /// The `continue` of the previous page, with the same filters.
    #[serde(rename = "continue")]
    #[schemars(regex(pattern = r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?/[^\s]*)?$"))]
    pub continue_token: Option<String>,
}

impl ListQuery {
    /// Whether an App of the list passes the cluster and phase filters. They are applied to
    /// each page Kubernetes returns (an App names its project, not its cluster, and the phase
    /// is status), and the list reads on until the page is full.
    fn admits(&self, item: &AppResponse) -> bool {
        self.cluster_id
            .as_ref()
            .is_none_or(|id| item.cluster_id.as_ref() == Some(id))
            && self.phase.as_ref().is_none_or(|phase| &item.phase == phase)
    }
}

/// A page of Apps.
#[derive(Debug, Serialize, JsonSchema)]
pub struct AppList {
    pub items: Vec<AppResponse>,
    /// Pass as `continue` for the next page; absent on the last.
    #[serde(rename = "continue", skip_serializing_if = "Option::is_none")]
    pub continue_token: Option<String>,
}

/// Where the next page of an App list starts: an organization, and the Kubernetes `continue`
/// of its namespace's list (none at the organization's first App). As text,
/// `{organization}/{continue}`, which the caller passes back unread.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Cursor {
    org: String,
    after: Option<String>,
}

impl Cursor {
    fn encode(&self) -> String {
        format!("{}/{}", self.org, self.after.as_deref().unwrap_or_default())
    }

    /// The error for a token this list did not give out.
    fn foreign() -> ApiError {
        ApiError::invalid("continue", "not a continue token of this list")
    }

    fn decode(token: &str) -> ApiResult<Self> {
        let (org, after) = token.split_once('/').ok_or_else(Self::foreign)?;
        if !k8s::is_name(org) {
            return Err(Self::foreign());
        }
        Ok(Self {
            org: org.to_owned(),
            after: (!after.is_empty()).then(|| after.to_owned()),
        })
    }
}

/// The Apps you have a role on, organization by organization (by name), each in the order
/// Kubernetes lists them. A page holds up to `limit` Apps and a `continue` when more follow;
/// only a project's Apps are read when `project_id` is given (a field selector).
pub async fn list(
    State(state): State<AppState>,
    caller: Caller,
    Query(query): Query<ListQuery>,
) -> ApiResult<Json<AppList>> {
    let limit = query.limit.unwrap_or(100);
    if !(1..=500).contains(&limit) {
        return Err(ApiError::invalid("limit", "between 1 and 500"));
    }
    if let Some(phase) = &query.phase
        && !PHASES.contains(&phase.as_str())
    {
        return Err(ApiError::invalid(
            "phase",
            format!("one of {}", PHASES.join(", ")),
        ));
    }
    // An empty `continue` is the first page, as in Kubernetes' own lists.
    let cursor = query
        .continue_token
        .as_deref()
        .filter(|token| !token.is_empty())
        .map(Cursor::decode)
        .transpose()?;
    let project_name = match &query.project_id {
        Some(id) => {
            let project = super::super::project(&state, &caller, id).await?;
            project.require(Need::Read, "project")?;
            Some((project.org.name_any(), project.object.name_any()))
        }
        None => None,
    };
    let views = match (&project_name, &query.org) {
        // A project of another organization than the one asked for: none of its Apps.
        (Some((org, _)), Some(asked)) if org != asked => Vec::new(),
        (Some((org, _)), _) => vec![super::super::org_view(&state, &caller, org).await?],
        (None, Some(org)) => vec![super::super::org_view(&state, &caller, org).await?],
        (None, None) => super::super::visible_orgs(&state, &caller).await?,
    };
    if let Some(id) = &query.cluster_id
        && !views
            .iter()
            .flat_map(|v| &v.clusters)
            .any(|c| c.uid().as_ref() == Some(id))
    {
        return Err(ApiError::missing("cluster_id", "no such cluster"));
    }
    let first = match &cursor {
        Some(cursor) => views
            .iter()
            .position(|v| v.org.name_any() == cursor.org)
            .ok_or_else(Cursor::foreign)?,
        None => 0,
    };
    let limit = limit as usize;
    let mut after = cursor.and_then(|c| c.after);
    let mut items = Vec::new();
    let mut next = None;
    'orgs: for (at, view) in views.iter().enumerate().skip(first) {
        let api: Api<App> = Api::namespaced(state.client().clone(), &view.namespace);
        loop {
            let mut params = ListParams::default().limit((limit - items.len()) as u32);
            let resumed = after.is_some();
            if let Some(token) = after.take() {
                params = params.continue_token(&token);
            }
            if let Some((_, name)) = &project_name {
                params = params.fields(&format!("spec.project={name}"));
            }
            let page = api.list(&params).await.map_err(|e| match e {
                kube::Error::Api(s) if s.code == 410 => {
                    ApiError::invalid("continue", "the page token expired; start again")
                }
                kube::Error::Api(s) if s.code == 400 && resumed => Cursor::foreign(),
                other => other.into(),
            })?;
            items.extend(
                page.items
                    .iter()
                    .filter(|app| view.role_in_project(&caller, &app.spec.project).is_some())
                    .map(|app| list_item(view, app))
                    .filter(|item| query.admits(item)),
            );
            let more = page.metadata.continue_.filter(|c| !c.is_empty());
            if items.len() >= limit {
                next = match more {
                    Some(token) => Some(Cursor {
                        org: view.org.name_any(),
                        after: Some(token),
                    }),
                    None => views.get(at + 1).map(|v| Cursor {
                        org: v.org.name_any(),
                        after: None,
                    }),
                };
                break 'orgs;
            }
            match more {
                Some(token) => after = Some(token),
                None => break,
            }
        }
    }
    Ok(Json(AppList {
        items,
        continue_token: next.map(|c| c.encode()),
    }))
}

/// An App of the list, with the ids of its project and cluster from the organization's view.
fn list_item(view: &super::super::OrgView, app: &App) -> AppResponse {
    let project = view
        .projects
        .iter()
        .find(|p| p.name_any() == app.spec.project);
    let cluster = project.and_then(|p| {
        view.clusters
            .iter()
            .find(|c| c.name_any() == p.spec.cluster)
    });
    let mut item = response(app, None);
    item.project_id = project.and_then(ResourceExt::uid);
    // A cluster's id is its object's uid (the id its registration gave out).
    item.cluster_id = cluster.and_then(ResourceExt::uid);
    item
}
