//! The App list: by organization or project, paged with `limit` and `continue` across every
//! organization the caller sees.

pub use kubenest_api::apps::{AppList, ListQuery};

use crate::extract::Query;
use axum::Json;
use axum::extract::State;
use kube::ResourceExt;
use kubenest_crds::App;
use kubenest_domain::app::PHASES;

use super::*;
use crate::authz::{Caller, Need};
use crate::error::{ApiError, ApiResult};
use crate::k8s;
use crate::state::AppState;

/// Whether an App of the list passes the cluster and phase filters. They are applied to
/// each page Kubernetes returns (an App names its project, not its cluster, and the phase
/// is status), and the list reads on until the page is full.
fn admits(query: &ListQuery, item: &AppResponse) -> bool {
    query
        .cluster_id
        .as_ref()
        .is_none_or(|id| item.cluster_id.as_ref() == Some(id))
        && query
            .phase
            .as_ref()
            .is_none_or(|phase| &item.phase == phase)
}

/// Where the next page of an App list starts: an organization, and the last App name the page
/// before gave in it (none at the organization's first App). As text, `{organization}/{token}`
/// where the token is the name, versioned and base64url-encoded, which the caller passes back
/// unread; a made-up token is refused rather than taken for a name.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Cursor {
    org: String,
    after: Option<String>,
}

/// The version of the name in a cursor: a list that pages differently some day gives out
/// another, and refuses this one by name instead of misreading it.
const CURSOR_VERSION: &str = "v1:";

impl Cursor {
    fn encode(&self) -> String {
        use base64::Engine as _;
        let after = self.after.as_deref().map_or_else(String::new, |name| {
            base64::engine::general_purpose::URL_SAFE_NO_PAD
                .encode(format!("{CURSOR_VERSION}{name}"))
        });
        format!("{}/{after}", self.org)
    }

    /// The error for a token this list did not give out.
    fn foreign() -> ApiError {
        ApiError::invalid("continue", "not a continue token of this list")
    }

    fn decode(token: &str) -> ApiResult<Self> {
        use base64::Engine as _;
        let (org, after) = token.split_once('/').ok_or_else(Self::foreign)?;
        if !k8s::is_name(org) {
            return Err(Self::foreign());
        }
        let after = match after {
            "" => None,
            encoded => {
                let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD
                    .decode(encoded)
                    .map_err(|_| Self::foreign())?;
                let text = String::from_utf8(bytes).map_err(|_| Self::foreign())?;
                let name = text
                    .strip_prefix(CURSOR_VERSION)
                    .filter(|name| k8s::is_name(name))
                    .ok_or_else(Self::foreign)?;
                Some(name.to_owned())
            }
        };
        Ok(Self {
            org: org.to_owned(),
            after,
        })
    }
}

/// The Apps you have a role on, organization by organization (by name), each by App name.
/// A page holds up to `limit` Apps and a `continue` when more follow.
///
/// Served from the [`crate::mirror`], as kube-apiserver serves a list from its watch cache:
/// Apps, Projects, Clusters and Organizations as this replica's watches last saw them, with
/// its own App writes laid over them. A project or organization the mirror has not got, or
/// gives the caller no role in, is read from the API server before the answer is a 404; Apps
/// are listed from it only until the mirror has its first list.
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
    let project_name = match &query.project_id {
        Some(id) => Some(project_of_list(&state, &caller, id).await?),
        None => None,
    };
    let views = match (&project_name, &query.org) {
        // A project of another organization than the one asked for: none of its Apps.
        (Some((org, _)), Some(asked)) if org != asked => Vec::new(),
        (Some((org, _)), _) | (None, Some(org)) => vec![view_of_list(&state, &caller, org).await?],
        (None, None) => match state.mirror().organizations() {
            Some(orgs) => {
                let mut names: Vec<String> = orgs.iter().map(|o| o.name_any()).collect();
                names.sort();
                names
                    .iter()
                    .filter_map(|name| super::super::mirrored::org_view(&state, &caller, name))
                    .collect()
            }
            None => super::super::visible_orgs(&state, &caller).await?,
        },
    };
    if let Some(id) = &query.cluster_id
        && !views
            .iter()
            .flat_map(|v| &v.clusters)
            .any(|c| c.uid().as_ref() == Some(id))
    {
        return Err(ApiError::missing("cluster_id", "no such cluster"));
    }
    // An empty `continue` is the first page, as in Kubernetes' own lists. Read once the
    // filters are known good, so that a wrong filter is the error a caller hears first.
    let cursor = query
        .continue_token
        .as_deref()
        .filter(|token| !token.is_empty())
        .map(Cursor::decode)
        .transpose()?;
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
    for (at, view) in views.iter().enumerate().skip(first) {
        let mut apps = super::super::mirrored::apps_in(&state, &view.namespace).await?;
        apps.sort_by_key(|a| a.name_any());
        let after = after.take();
        let listed = apps
            .iter()
            .filter(|app| {
                after
                    .as_deref()
                    .is_none_or(|last| app.name_any().as_str() > last)
            })
            .filter(|app| {
                project_name
                    .as_ref()
                    .is_none_or(|(_, project)| &app.spec.project == project)
            })
            .filter(|app| view.role_in_project(&caller, &app.spec.project).is_some())
            .map(|app| list_item(view, app))
            .filter(|item| admits(&query, item));
        for item in listed {
            if items.len() == limit {
                // One more than the page holds: the next page starts after the last given.
                next = Some(Cursor {
                    org: view.org.name_any(),
                    after: items.last().map(|i: &AppResponse| i.name.clone()),
                });
                break;
            }
            items.push(item);
        }
        if next.is_some() {
            break;
        }
        if items.len() == limit {
            next = views.get(at + 1).map(|v| Cursor {
                org: v.org.name_any(),
                after: None,
            });
            break;
        }
    }
    Ok(Json(AppList {
        items,
        continue_token: next.map(|c| c.encode()),
    }))
}

/// The organization and name of the project `id` the list is filtered by, if the caller may
/// read it: from the mirror when it is there and gives the caller a role, otherwise from the
/// API server (which answers 404 for good).
async fn project_of_list(
    state: &AppState,
    caller: &Caller,
    id: &str,
) -> ApiResult<(String, String)> {
    if let Some(project) = state.mirror().project(id)
        && let Some(view) = project
            .namespace()
            .as_deref()
            .and_then(k8s::org_name_of)
            .and_then(|org| super::super::mirrored::org_view(state, caller, org))
        && crate::authz::require(view.project_role(caller, &project), Need::Read, "project").is_ok()
    {
        return Ok((view.org.name_any(), project.name_any()));
    }
    let project = super::super::project(state, caller, id).await?;
    project.require(Need::Read, "project")?;
    Ok((project.org.name_any(), project.object.name_any()))
}

/// The view of organization `org` the list reads: the mirror's, else the API server's.
async fn view_of_list(
    state: &AppState,
    caller: &Caller,
    org: &str,
) -> ApiResult<super::super::OrgView> {
    match super::super::mirrored::org_view(state, caller, org) {
        Some(view) => Ok(view),
        None => super::super::org_view(state, caller, org).await,
    }
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
