//! `GET /api/v1/events/stream`: Server-Sent Events of what the caller may see, filtered by
//! organization, project or app, resumable with `Last-Event-ID`, with heartbeat comments.

pub use kubenest_api::events::StreamQuery;

use std::collections::{HashSet, VecDeque};
use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use crate::extract::Query;
use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::{HeaderMap, header};
use axum::response::{IntoResponse, Response};
use kube::ResourceExt;
use tokio::sync::{broadcast, watch};

use crate::authz::{self, Caller};
use crate::error::{ApiError, ApiResult};
use crate::events::StoredEvent;
use crate::state::AppState;

/// How often the caller's roles are looked up again while the stream is open.
const REFRESH_ROLES: Duration = Duration::from_secs(30);
/// How often a comment keeps an idle stream open through proxies.
const HEARTBEAT: Duration = Duration::from_secs(15);
/// Replayed events per query when resuming.
const REPLAY_PAGE: i64 = 500;
/// A replay query the database fails is tried this many times, half a second apart, before the
/// stream ends (the client then resumes with `Last-Event-ID`, as Server-Sent Events do).
const REPLAY_ATTEMPTS: u32 = 3;

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

/// What a stream holds between two frames.
struct Feed {
    state: AppState,
    query: StreamQuery,
    sight: Sight,
    sight_rx: watch::Receiver<Option<Sight>>,
    live: broadcast::Receiver<Arc<StoredEvent>>,
    /// The newest event id sent, or before the first, the newest one sent before the stream
    /// opened (or the one it resumes after).
    last: i64,
    /// Replayed from the table and still to be sent (a page at a time).
    pending: VecDeque<Arc<StoredEvent>>,
    /// More of the table to replay after `last`.
    replaying: bool,
    /// Ids the replay sent that may still arrive live.
    replayed: HashSet<i64>,
    heartbeat: tokio::time::Interval,
    /// Counts the stream in `sse_subscribers` until the client leaves.
    _subscriber: crate::metrics::Subscriber,
    /// The user's place among their open streams, until the client leaves.
    _seat: crate::events::Seat,
}

impl Feed {
    /// The next frame to write; `None` ends the stream.
    async fn next(&mut self) -> Option<Bytes> {
        loop {
            if let Some(event) = self.pending.pop_front() {
                if let Some(frame) = self.frame(&event) {
                    return Some(frame);
                }
                continue;
            }
            if self.replaying {
                self.replay_page().await?;
                continue;
            }
            tokio::select! {
                changed = self.sight_rx.changed() => {
                    match (changed, self.sight_rx.borrow_and_update().clone()) {
                        (Ok(()), Some(fresh)) => self.sight = fresh,
                        _ => return None,
                    }
                }
                event = self.live.recv() => match event {
                    Ok(event) => {
                        if self.replayed.remove(&event.id) {
                            continue;
                        }
                        if let Some(frame) = self.frame(&event) {
                            return Some(frame);
                        }
                    }
                    // Too slow for the live channel: catch up from the table, which holds
                    // everything sent.
                    Err(broadcast::error::RecvError::Lagged(missed)) => {
                        tracing::info!(missed, after = self.last,
                            "an event subscriber lagged; replaying from the log");
                        self.replaying = true;
                    }
                    Err(broadcast::error::RecvError::Closed) => return None,
                },
                _ = self.heartbeat.tick() => return Some(Bytes::from_static(b":heartbeat\n\n")),
            }
        }
    }

    /// The event's frame if the caller may see it and asked for it.
    fn frame(&mut self, event: &StoredEvent) -> Option<Bytes> {
        self.last = self.last.max(event.id);
        (self.sight.sees(event) && wanted(&self.query, event)).then(|| event.frame.clone())
    }

    /// Queues the next page of stored events after `last`; `None` if the database keeps
    /// failing, which ends the stream rather than skip what it could not read.
    async fn replay_page(&mut self) -> Option<()> {
        let mut attempt = 1;
        let page = loop {
            match self
                .state
                .events()
                .after(self.last, &self.sight.orgs, REPLAY_PAGE)
                .await
            {
                Ok(page) => break page,
                Err(error) if attempt < REPLAY_ATTEMPTS => {
                    tracing::warn!(%error, attempt, "replaying events failed; trying again");
                    attempt += 1;
                    tokio::time::sleep(Duration::from_millis(500)).await;
                }
                Err(error) => {
                    tracing::warn!(%error, after = self.last,
                        "replaying events failed; ending the stream for the client to resume");
                    return None;
                }
            }
        };
        self.replaying = i64::try_from(page.len()).unwrap_or(0) == REPLAY_PAGE;
        // Only events this recent may still arrive live as well.
        let recent = chrono::Utc::now() - chrono::Duration::seconds(30);
        for event in page {
            if event.at > recent {
                self.replayed.insert(event.id);
            }
            self.pending.push_back(Arc::new(event));
        }
        Some(())
    }
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
    let seat = state.events().seat(&caller.id).ok_or_else(|| {
        ApiError::too_many(
            format!(
                "you hold {} event streams open already; close one first",
                crate::events::MAX_STREAMS_PER_USER
            ),
            5,
        )
    })?;
    let first = sight(&state, &caller, query.org.as_deref()).await?;
    // Subscribe before replaying, so nothing falls between the two.
    let (newest, live) = state.events().subscribe();
    // Roles are looked up again now and then beside the stream, never in its way, and at a
    // jittered time so that many open streams do not all ask at once.
    let (sight_tx, sight_rx) = watch::channel(Some(first.clone()));
    tokio::spawn({
        let (state, caller, org) = (state.clone(), caller.clone(), query.org.clone());
        async move {
            loop {
                let jitter = rand::random_range(0..REFRESH_ROLES.as_millis() as u64);
                tokio::select! {
                    // The stream is gone (the client left).
                    () = sight_tx.closed() => return,
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
    let feed = Feed {
        state,
        query,
        sight: first,
        sight_rx,
        live,
        last: resume.unwrap_or(newest),
        pending: VecDeque::new(),
        replaying: resume.is_some(),
        replayed: HashSet::new(),
        heartbeat: tokio::time::interval_at(tokio::time::Instant::now() + HEARTBEAT, HEARTBEAT),
        _subscriber: crate::metrics::Subscriber::open(),
        _seat: seat,
    };
    // The body polls the feed itself: an event wakes each subscriber's connection once, and
    // every subscriber writes the same pre-rendered bytes.
    let frames = futures::stream::unfold(feed, |mut feed| async move {
        let frame = feed.next().await?;
        Some((Ok::<_, Infallible>(frame), feed))
    });
    Ok((
        [
            (header::CONTENT_TYPE, "text/event-stream"),
            (header::CACHE_CONTROL, "no-cache"),
        ],
        Body::from_stream(frames),
    )
        .into_response())
}
