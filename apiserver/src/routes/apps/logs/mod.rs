//! `GET /api/v1/apps/{id}/logs`: container logs of an App component, fail-closed through the
//! hub. The agent streams `pods/log` of the component's pods; the lines reach only this
//! request. The stream ends when every pod's log ends, when the reader leaves (the agent is
//! told to stop), when the hub session drops, or when the reader does not keep up; the last
//! event says which.
//!
//! A stream stays a reader's only while it may read: every [`RECHECK`] the reader's access to
//! the App is checked again (a member removed meanwhile is cut with reason `forbidden`), and
//! so is the cluster's hub session: a hub replica or agent that went away without a word
//! ends the stream with reason `session_dropped` instead of leaving the reader waiting.
//! A user reads at most `logs::MAX_STREAMS_PER_USER` streams at once (429 beyond).

use std::convert::Infallible;
use std::time::Duration;

use crate::extract::Query;
use axum::body::{Body, Bytes};
use axum::extract::{Path, State};
use axum::http::{HeaderMap, header};
use axum::response::{IntoResponse, Response};
use kube::ResourceExt;
use kubenest_contracts::{self as wire, Envelope, LogEnd, LogEndReason, LogsSubscribe};
use serde_json::json;

use super::load;
use crate::authz::{Caller, Need};
use crate::error::{ApiError, ApiResult};
use crate::k8s;
use crate::logs::{Frame, Full, MAX_STREAMS_PER_USER, Subscription};
use crate::routes::IdPath;
use crate::secrets::Unconfirmed;
use crate::state::AppState;

mod query;
pub use query::{LogsQuery, check_query};

/// How often a comment keeps an idle stream open through proxies.
const HEARTBEAT: Duration = Duration::from_secs(15);
/// How often an open stream's reader and route are checked again.
const RECHECK: Duration = Duration::from_secs(15);
/// The component to read: the one named, or the App's only workload component.
fn component_of(app: &kubenest_crds::App, asked: Option<&str>) -> ApiResult<String> {
    let names: Vec<&str> = app
        .spec
        .components
        .iter()
        .map(|c| c.name.as_str())
        .collect();
    match asked {
        Some(name) if names.contains(&name) => Ok(name.to_owned()),
        Some(name) => Err(ApiError::invalid(
            "component",
            format!(
                "the App has no component {name:?}; it has: {}",
                names.join(", ")
            ),
        )),
        None => {
            let workloads: Vec<&str> = app
                .spec
                .components
                .iter()
                .filter(|c| c.workload.is_some())
                .map(|c| c.name.as_str())
                .collect();
            match workloads.as_slice() {
                [only] => Ok((*only).to_owned()),
                _ => Err(ApiError::invalid(
                    "component",
                    format!(
                        "required: the App has several components ({})",
                        names.join(", ")
                    ),
                )),
            }
        }
    }
}

/// Streams the logs (viewers may read them).
pub async fn logs(
    State(state): State<AppState>,
    caller: Caller,
    Path(path): Path<IdPath>,
    Query(query): Query<LogsQuery>,
    headers: HeaderMap,
) -> ApiResult<Response> {
    let scoped = load(&state, &caller, &path.id).await?;
    scoped.require(Need::Read, "app")?;
    let request = check_query(&query)?;
    let app = &scoped.object;
    let component = component_of(app, request.component.as_deref())?;
    super::require_deployed(app, "there are no logs to read")?;
    let project = scoped
        .project
        .as_ref()
        .ok_or_else(|| ApiError::conflict("no_project", "the app's project is gone"))?;
    let cluster_id = scoped
        .cluster
        .as_ref()
        .and_then(|c| c.status.as_ref()?.cluster_id.clone())
        .ok_or_else(|| {
            ApiError::unavailable("cluster_unreachable", "the app's cluster is not registered")
        })?;
    let (cluster_id, org_id) = (
        wire::Id::new(cluster_id),
        wire::Id::new(scoped.org.name_any()),
    );
    let subscription_id = uuid::Uuid::new_v4().to_string();
    let command = Envelope::new(LogsSubscribe {
        subscription_id: wire::Id::new(&subscription_id),
        app: wire::AppRef {
            app_id: wire::Id::new(k8s::uid(app)),
            name: wire::Name::new(app.name_any()),
            project_id: wire::Id::new(k8s::uid(project)),
            namespace: wire::Name::new(&project.spec.namespace),
        },
        component: wire::Name::new(&component),
        follow: request.follow,
        tail_lines: request.tail,
        since_seconds: request.since_seconds,
        previous: request.previous,
    })
    .for_cluster(cluster_id.clone(), org_id.clone());
    // The session the stream will travel on: when it changes, the stream is gone.
    let session = state.secrets().session_of(&cluster_id).await.ok().flatten();
    // Registered before the subscribe goes out, so no line falls between the two.
    let subscription = state
        .logs()
        .open(&subscription_id, &caller.id, cluster_id.as_str())
        .map_err(|full| match full {
            Full::User => ApiError::too_many(
                format!("you read {MAX_STREAMS_PER_USER} log streams already; close one first"),
                5,
            ),
            Full::Cluster => ApiError::too_many(
                "this cluster's log streams are all in use; try again shortly",
                5,
            ),
        })?;
    let mut reader = Reader {
        state: state.clone(),
        caller: caller.clone(),
        app_id: path.id.clone(),
        session,
        subscription_id: subscription_id.clone(),
        cluster_id,
        org_id,
        subscription,
        text: wants_text(&headers),
        heartbeat: tokio::time::interval_at(tokio::time::Instant::now() + HEARTBEAT, HEARTBEAT),
        recheck: tokio::time::interval_at(tokio::time::Instant::now() + RECHECK, RECHECK),
        done: false,
        agent_ended: false,
    };
    if let Err(refused) = state.secrets().confirm(command).await {
        // The reader is dropped here: it forgets the subscription and, unless the agent
        // refused it (then there is no stream), tells the agent to stop.
        reader.agent_ended = matches!(refused, Unconfirmed::Rejected { .. });
        drop(reader);
        return Err(match refused {
            Unconfirmed::Api(error) => error,
            Unconfirmed::Rejected { message, field, .. }
                if field.as_deref() == Some("/component") =>
            {
                ApiError::conflict(
                    "no_pods",
                    format!("the cluster has no logs to give: {message}"),
                )
            }
            Unconfirmed::Rejected {
                reason, message, ..
            } => ApiError::conflict(
                "logs_refused",
                format!("the cluster refused to stream logs ({reason}): {message}"),
            ),
        });
    }
    let content_type = if reader.text {
        "text/plain; charset=utf-8"
    } else {
        "text/event-stream"
    };
    let frames = futures::stream::unfold(reader, |mut reader| async move {
        let bytes = reader.next().await?;
        Some((Ok::<_, Infallible>(bytes), reader))
    });
    Ok((
        [
            (header::CONTENT_TYPE, content_type),
            (header::CACHE_CONTROL, "no-cache"),
        ],
        Body::from_stream(frames),
    )
        .into_response())
}

fn wants_text(headers: &HeaderMap) -> bool {
    headers
        .get(header::ACCEPT)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|accept| {
            accept.contains("text/plain") && !accept.contains("text/event-stream")
        })
}

/// One reader's stream; dropping it (the client left) stops the agent's stream.
struct Reader {
    state: AppState,
    /// Who reads, and what: checked again every [`RECHECK`].
    caller: Caller,
    app_id: String,
    /// The cluster's hub session when the stream began (`replica/epoch`).
    session: Option<String>,
    subscription_id: String,
    cluster_id: wire::Id,
    org_id: wire::Id,
    subscription: Subscription,
    text: bool,
    heartbeat: tokio::time::Interval,
    recheck: tokio::time::Interval,
    done: bool,
    /// The agent said the stream ended: nothing to stop there.
    agent_ended: bool,
}

impl Reader {
    async fn next(&mut self) -> Option<Bytes> {
        if self.done {
            return None;
        }
        loop {
            tokio::select! {
                frame = self.subscription.rx.recv() => {
                    return Some(match frame {
                        Some(Frame::Lines(lines)) => self.render_lines(&lines),
                        Some(Frame::End(end)) => {
                            self.agent_ended = true;
                            self.finish(end)
                        }
                        None => {
                            let end = self.subscription.cut_reason().unwrap_or(LogEnd {
                                subscription_id: wire::Id::new(&self.subscription_id),
                                reason: LogEndReason::Error,
                                message: "the stream ended without a reason".into(),
                            });
                            self.finish(end)
                        }
                    });
                }
                _ = self.heartbeat.tick() => {
                    if !self.text {
                        return Some(Bytes::from_static(b":heartbeat\n\n"));
                    }
                }
                _ = self.recheck.tick() => {
                    if let Some((reason, message)) = self.still_allowed().await {
                        return Some(self.finish_with(reason, message));
                    }
                }
            }
        }
    }

    /// Why the stream must end now, if it must: the reader may no longer read the App, or
    /// the hub session it travels on is gone.
    async fn still_allowed(&self) -> Option<(&'static str, String)> {
        let allowed = match load(&self.state, &self.caller, &self.app_id).await {
            Ok(scoped) => scoped.require(Need::Read, "app").is_ok(),
            // The App is gone, or hidden from this reader now.
            Err(e) if e.status.is_client_error() => false,
            // The management cluster did not answer: no reason to cut a reader.
            Err(_) => true,
        };
        if !allowed {
            return Some((
                "forbidden",
                "you may no longer read this App's logs".to_owned(),
            ));
        }
        match self.state.secrets().session_of(&self.cluster_id).await {
            Ok(now) if now.is_none() || now != self.session => Some((
                "session_dropped",
                "the cluster's hub session ended; open the logs again to follow them".to_owned(),
            )),
            // Not known now (the management cluster did not answer): keep going.
            _ => None,
        }
    }

    fn render_lines(&self, lines: &[wire::LogLine]) -> Bytes {
        let mut out = String::new();
        for line in lines {
            if self.text {
                out.push_str(&format!("{}/{} {}\n", line.pod, line.container, line.line));
            } else {
                let data = json!({
                    "timestamp": line.timestamp,
                    "pod": line.pod,
                    "container": line.container,
                    "line": line.line,
                });
                out.push_str(&format!("event: log\ndata: {data}\n\n"));
            }
        }
        Bytes::from(out)
    }

    fn finish(&mut self, end: LogEnd) -> Bytes {
        let reason = serde_json::to_value(end.reason)
            .ok()
            .and_then(|v| v.as_str().map(str::to_owned))
            .unwrap_or_default();
        self.finish_with(&reason, end.message)
    }

    fn finish_with(&mut self, reason: &str, message: String) -> Bytes {
        self.done = true;
        if self.text {
            Bytes::from(format!("# end of logs ({reason}): {message}\n"))
        } else {
            let data = json!({ "reason": reason, "message": message });
            Bytes::from(format!("event: end\ndata: {data}\n\n"))
        }
    }
}

impl Drop for Reader {
    fn drop(&mut self) {
        self.state.logs().close(&self.subscription_id);
        // The client left, or was cut for not keeping up: the agent may still be streaming.
        if !self.agent_ended {
            let command = Envelope::new(wire::LogsUnsubscribe {
                subscription_id: wire::Id::new(&self.subscription_id),
            })
            .for_cluster(self.cluster_id.clone(), self.org_id.clone());
            self.state.secrets().fire(command);
        }
    }
}
