//! `GET /api/v1/events/stream`: Server-Sent Events of what the caller may see, filtered by
//! organization, project or app, resumable with `Last-Event-ID`, with heartbeat comments.

use std::collections::HashSet;
use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use axum::extract::{Query, State};
use axum::http::HeaderMap;
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use kube::ResourceExt;
use schemars::JsonSchema;
use serde::Deserialize;
use tokio::sync::{broadcast, mpsc, watch};
use tokio_stream::wrappers::ReceiverStream;

use crate::authz::{self, Caller};
use crate::error::{ApiError, ApiResult};
use crate::events::StoredEvent;
use crate::state::AppState;

/// How often the caller's roles are looked up again while the stream is open.
const REFRESH_ROLES: Duration = Duration::from_secs(30);
/// Replayed events per query when resuming.
const REPLAY_PAGE: i64 = 500;

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct StreamQuery {
    pub org: Option<String>,
    pub project_id: Option<String>,
    pub app_id: Option<String>,
    /// Resume after this event id (the `Last-Event-ID` header wins).
    pub last_event_id: Option<i64>,
}

/// What the caller may see: whole organizations, clusters or projects.
#[derive(Debug, Default, Clone)]
struct Sight {
    orgs: Vec<String>,
    whole_orgs: HashSet<String>,
    clusters: HashSet<String>,
    projects: HashSet<String>,
}

impl Sight {
    fn sees(&self, event: &StoredEvent) -> bool {
        self.whole_orgs.contains(&event.org_id)
            || event
                .cluster_id
                .as_ref()
                .is_some_and(|c| self.clusters.contains(c))
            || event
                .project_id
                .as_ref()
                .is_some_and(|p| self.projects.contains(p))
    }
}

async fn sight(state: &AppState, caller: &Caller, only_org: Option<&str>) -> ApiResult<Sight> {
    let views = match only_org {
        Some(org) => vec![super::org_view(state, caller, org).await?],
        None => super::visible_orgs(state, caller).await?,
    };
    let mut sight = Sight::default();
    for view in views {
        let org = view.org.name_any();
        sight.orgs.push(org.clone());
        if authz::role_at(caller, &view.org, None, None).is_some() {
            sight.whole_orgs.insert(org);
            continue;
        }
        for cluster in &view.clusters {
            if view.cluster_role(caller, cluster).is_some()
                && let Some(id) = cluster.uid()
            {
                sight.clusters.insert(id);
            }
        }
        for project in &view.projects {
            if view.project_role(caller, project).is_some()
                && let Some(id) = project.uid()
            {
                sight.projects.insert(id);
            }
        }
    }
    Ok(sight)
}

fn wanted(query: &StreamQuery, event: &StoredEvent) -> bool {
    query.org.as_ref().is_none_or(|o| *o == event.org_id)
        && query
            .project_id
            .as_ref()
            .is_none_or(|p| event.project_id.as_ref() == Some(p))
        && query
            .app_id
            .as_ref()
            .is_none_or(|a| event.app_id.as_ref() == Some(a))
}

fn frame(event: &StoredEvent) -> Event {
    Event::default()
        .id(event.id.to_string())
        .event(event.kind.clone())
        .data(&event.data)
}

/// The stream.
pub async fn stream(
    State(state): State<AppState>,
    caller: Caller,
    headers: HeaderMap,
    Query(query): Query<StreamQuery>,
) -> ApiResult<Response> {
    let resume = match headers.get("last-event-id") {
        Some(value) => Some(
            value
                .to_str()
                .ok()
                .and_then(|v| v.trim().parse::<i64>().ok())
                .ok_or_else(|| ApiError::invalid("Last-Event-ID", "an event id is a number"))?,
        ),
        None => query.last_event_id,
    };
    let first = sight(&state, &caller, query.org.as_deref()).await?;
    // Subscribe before replaying, so nothing falls between the two.
    let mut live = state.events().subscribe();
    let (tx, rx) = mpsc::channel::<Result<Event, Infallible>>(256);
    // Roles are looked up again now and then beside the stream, never in its way, and at a
    // jittered time so that many open streams do not all ask at once.
    let (sight_tx, mut sight_rx) = watch::channel(Some(first));
    tokio::spawn({
        let (state, caller, org, tx) =
            (state.clone(), caller.clone(), query.org.clone(), tx.clone());
        async move {
            loop {
                let jitter = rand::random_range(0..REFRESH_ROLES.as_millis() as u64);
                tokio::select! {
                    () = tx.closed() => return,
                    () = tokio::time::sleep(REFRESH_ROLES / 2 + Duration::from_millis(jitter)) => {}
                }
                match self::sight(&state, &caller, org.as_deref()).await {
                    Ok(fresh) => {
                        let _ = sight_tx.send(Some(fresh));
                    }
                    // The organization is gone or no longer visible: end the stream.
                    Err(e) if e.status == 404 => {
                        let _ = sight_tx.send(None);
                        return;
                    }
                    Err(_) => {}
                }
            }
        }
    });
    tokio::spawn(async move {
        let mut sight = sight_rx.borrow_and_update().clone().unwrap_or_default();
        let mut last = resume;
        // What the replay sent, so the live channel does not send it again.
        let mut replayed = HashSet::new();
        if resume.is_some() && !replay(&state, &query, &sight, &mut last, &mut replayed, &tx).await
        {
            return;
        }
        loop {
            tokio::select! {
                () = tx.closed() => return,
                changed = sight_rx.changed() => {
                    match (changed, sight_rx.borrow_and_update().clone()) {
                        (Ok(()), Some(fresh)) => sight = fresh,
                        _ => return,
                    }
                }
                event = live.recv() => match event {
                    Ok(event) => {
                        if replayed.remove(&event.id) {
                            continue;
                        }
                        if !send(&tx, &query, &sight, &event).await {
                            return;
                        }
                        last = Some(last.map_or(event.id, |l| l.max(event.id)));
                    }
                    // Too slow for the live channel: catch up from the table.
                    Err(broadcast::error::RecvError::Lagged(missed)) => {
                        tracing::warn!(missed, "an event subscriber lagged; replaying from the log");
                        if !replay(&state, &query, &sight, &mut last, &mut replayed, &tx).await {
                            return;
                        }
                    }
                    Err(broadcast::error::RecvError::Closed) => return,
                },
            }
        }
    });
    let keep_alive = KeepAlive::new()
        .interval(Duration::from_secs(15))
        .text("heartbeat");
    Ok(Sse::new(ReceiverStream::new(rx))
        .keep_alive(keep_alive)
        .into_response())
}

async fn send(
    tx: &mpsc::Sender<Result<Event, Infallible>>,
    query: &StreamQuery,
    sight: &Sight,
    event: &Arc<StoredEvent>,
) -> bool {
    if !sight.sees(event) || !wanted(query, event) {
        return true;
    }
    tx.send(Ok(frame(event))).await.is_ok()
}

/// Sends stored events after `last` (nothing when there is no `last`); false when the client is
/// gone.
async fn replay(
    state: &AppState,
    query: &StreamQuery,
    sight: &Sight,
    last: &mut Option<i64>,
    replayed: &mut HashSet<i64>,
    tx: &mpsc::Sender<Result<Event, Infallible>>,
) -> bool {
    let Some(mut after) = *last else {
        return true;
    };
    // Only events this recent may still arrive live as well.
    let recent = chrono::Utc::now() - chrono::Duration::seconds(30);
    loop {
        let Ok(page) = state.events().after(after, &sight.orgs, REPLAY_PAGE).await else {
            return true;
        };
        let full = i64::try_from(page.len()).unwrap_or(0) == REPLAY_PAGE;
        for event in page {
            after = event.id;
            *last = Some(after);
            if event.at > recent {
                replayed.insert(event.id);
            }
            if !send(tx, query, sight, &Arc::new(event)).await {
                return false;
            }
        }
        if !full {
            return true;
        }
    }
}
