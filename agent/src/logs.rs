//! Log streams, fail-closed: a `logs.subscribe` reads `pods/log` of every container of an App
//! component's pods from the local API server and sends the lines as `log.lines` frames until
//! the pods' streams end, the subscriber unsubscribes or the hub session drops. Nothing is
//! stored: a line the hub cannot take now is not kept for later.
//!
//! Bounded at every step: each container's reader feeds one bounded channel (a slow uplink
//! slows the readers, which slows the API server's stream), a frame holds at most
//! [`MAX_LINES_PER_FRAME`] lines of at most [`MAX_LINE_CHARS`] characters, a stream sends at
//! most [`LINES_PER_SECOND`] lines a second, and a full uplink queue ends the stream with
//! `log.end` reason `limit` instead of dropping lines silently.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use chrono::{DateTime, Utc};
use futures::{AsyncBufReadExt, StreamExt};
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, ListParams, LogParams};
use kubenest_contracts::{self as wire, Id, LogEndReason, RejectReason};
use kubenest_crds::names::labels;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use crate::boundary::Refusal;
use crate::context::Context;

/// Lines per `log.lines` frame (the contract's maximum).
pub const MAX_LINES_PER_FRAME: usize = 1000;
/// Characters per line (the contract's maximum); longer lines are cut there.
pub const MAX_LINE_CHARS: usize = 16384;
/// Bytes of lines (as JSON) per frame: half the hub's frame limit (1 MiB), so a frame with
/// its envelope always fits and never ends the session.
pub const MAX_BATCH_BYTES: usize = 512 * 1024;
/// Lines a stream may send per second; faster output is read more slowly.
pub const LINES_PER_SECOND: u32 = 2000;
/// Lines waiting between the containers' readers and the batcher.
const BUFFER_LINES: usize = 2048;
/// How long a partial batch waits for more lines.
const FLUSH_EVERY: Duration = Duration::from_millis(100);
/// Streams one agent serves at once.
pub const MAX_STREAMS: usize = 64;

/// The agent's live log streams, by subscription id.
#[derive(Debug, Default)]
pub struct Streams {
    active: Mutex<HashMap<String, CancellationToken>>,
}

impl Streams {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, CancellationToken>> {
        self.active.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// How many streams are live.
    pub fn len(&self) -> usize {
        self.lock().len()
    }

    /// Whether no stream is live.
    pub fn is_empty(&self) -> bool {
        self.lock().is_empty()
    }

    fn remove(&self, id: &str) {
        self.lock().remove(id);
        crate::metrics::metrics().log_streams(self.len());
    }
}

/// Starts the stream a `logs.subscribe` asks for; refused when the component has no pods.
pub async fn subscribe(ctx: &Arc<Context>, command: wire::LogsSubscribe) -> Result<(), Refusal> {
    let id = command.subscription_id.to_string();
    if ctx.logs.lock().contains_key(&id) {
        // A re-sent subscribe: the stream already runs.
        return Ok(());
    }
    if ctx.logs.len() >= MAX_STREAMS {
        return Err(Refusal::new(
            RejectReason::Invalid,
            format!("this agent already serves {MAX_STREAMS} log streams"),
            None,
        ));
    }
    // Logs are read only in the App's own project namespace, as everything else the agent
    // does for an App.
    crate::boundary::check_namespace(
        ctx,
        command.app.namespace.as_str(),
        command.app.project_id.as_str(),
        "/app/namespace",
    )
    .await?;
    let pods: Api<Pod> = Api::namespaced(ctx.client.clone(), command.app.namespace.as_str());
    // The component's workload pods (`app-id`), then its build Jobs' pods (`build-of`: a Git
    // workload's build log).
    let of = |owner: &str| {
        format!(
            "{owner}={},{}={}",
            command.app.app_id.as_str(),
            labels::COMPONENT,
            command.component.as_str()
        )
    };
    let mut listed = Vec::new();
    for selector in [of(labels::APP_ID), of(labels::BUILD_OF)] {
        let list = pods
            .list(&ListParams::default().labels(&selector))
            .await
            .map_err(Refusal::internal)?;
        listed.extend(list.items);
    }
    let targets: Vec<(String, String)> = listed
        .iter()
        .flat_map(|pod| {
            let name = pod.metadata.name.clone().unwrap_or_default();
            pod.spec
                .iter()
                .flat_map(|spec| spec.containers.iter())
                .map(move |c| (name.clone(), c.name.clone()))
        })
        .collect();
    if targets.is_empty() {
        return Err(Refusal::new(
            RejectReason::Invalid,
            format!(
                "component {} of App {} has no pods on this cluster",
                command.component.as_str(),
                command.app.name.as_str()
            ),
            Some("/component"),
        ));
    }
    // A build prints what it is given: its credentials are taken out of every line.
    let builds = listed.iter().any(|pod| {
        pod.metadata
            .labels
            .as_ref()
            .is_some_and(|l| l.contains_key(labels::BUILD_ID))
    });
    let redactor = if builds {
        crate::redact::for_builds(
            &ctx.client,
            command.app.namespace.as_str(),
            command.app.name.as_str(),
            command.component.as_str(),
        )
        .await
    } else {
        crate::redact::Redactor::default()
    };
    let cancel = CancellationToken::new();
    ctx.logs.lock().insert(id.clone(), cancel.clone());
    crate::metrics::metrics().log_streams(ctx.logs.len());
    let params = LogParams {
        follow: command.follow,
        tail_lines: command.tail_lines.map(i64::from),
        since_seconds: command.since_seconds.map(i64::from),
        previous: command.previous,
        timestamps: true,
        ..LogParams::default()
    };
    tracing::info!(subscription_id = %id, streams = targets.len(), follow = command.follow, "log stream started");
    tokio::spawn(stream(
        ctx.clone(),
        pods,
        command.subscription_id,
        targets,
        params,
        (cancel, redactor),
    ));
    Ok(())
}

/// Stops a stream (an unsubscribe of an unknown stream is harmless).
pub fn unsubscribe(ctx: &Context, command: &wire::LogsUnsubscribe) {
    if let Some(cancel) = ctx.logs.lock().get(command.subscription_id.as_str()) {
        cancel.cancel();
    }
}

/// What the readers tell the batcher.
enum Read {
    Line(wire::LogLine),
    Failed(String),
}

async fn stream(
    ctx: Arc<Context>,
    pods: Api<Pod>,
    subscription_id: Id,
    targets: Vec<(String, String)>,
    params: LogParams,
    (cancel, redactor): (CancellationToken, crate::redact::Redactor),
) {
    let (tx, mut rx) = mpsc::channel::<Read>(BUFFER_LINES);
    for (pod, container) in targets {
        let params = LogParams {
            container: Some(container.clone()),
            ..params.clone()
        };
        tokio::spawn(read_container(
            pods.clone(),
            pod,
            container,
            params,
            tx.clone(),
            cancel.child_token(),
        ));
    }
    drop(tx);
    let mut connected = ctx.reporter.watch_connected();
    let mut batch = Batch::default();
    let mut limit = RateLimit::new(LINES_PER_SECOND);
    let mut failures = Vec::new();
    let mut tick = tokio::time::interval(FLUSH_EVERY);
    let end = loop {
        tokio::select! {
            _ = cancel.cancelled() => break Some((LogEndReason::ClientGone, "unsubscribed".to_owned())),
            changed = connected.changed() => {
                if changed.is_err() || !*connected.borrow() {
                    // No session to tell: the hub tells the subscriber.
                    break None;
                }
            }
            _ = tick.tick() => {
                if let Err(end) = flush(&ctx, &subscription_id, &mut batch) {
                    break Some(end);
                }
            }
            read = rx.recv() => match read {
                Some(Read::Line(mut line)) => {
                    if !redactor.is_empty() {
                        line.line = redactor.apply(&line.line);
                    }
                    if let Some(wait) = limit.take(std::time::Instant::now()) {
                        tokio::time::sleep(wait).await;
                    }
                    if let Some(full) = batch.push(line)
                        && let Err(end) = send(&ctx, &subscription_id, full)
                    {
                        break Some(end);
                    }
                }
                Some(Read::Failed(message)) => failures.push(message),
                None => {
                    if let Err(end) = flush(&ctx, &subscription_id, &mut batch) {
                        break Some(end);
                    }
                    break Some(match failures.is_empty() {
                        true => (LogEndReason::PodEnded, "every container's log stream ended".to_owned()),
                        false => (LogEndReason::Error, failures.join("; ")),
                    });
                }
            },
        }
    };
    cancel.cancel();
    ctx.logs.remove(subscription_id.as_str());
    tracing::info!(subscription_id = %subscription_id.as_str(), reason = ?end.as_ref().map(|e| e.0), "log stream ended");
    if let Some((reason, message)) = end {
        let mut message = message;
        truncate(&mut message, 4096);
        ctx.reporter.report(wire::LogEnd {
            subscription_id,
            reason,
            message,
        });
    }
}

fn flush(
    ctx: &Context,
    subscription_id: &Id,
    batch: &mut Batch,
) -> Result<(), (LogEndReason, String)> {
    match batch.take() {
        Some(lines) => send(ctx, subscription_id, lines),
        None => Ok(()),
    }
}

fn send(
    ctx: &Context,
    subscription_id: &Id,
    lines: Vec<wire::LogLine>,
) -> Result<(), (LogEndReason, String)> {
    let frame = wire::LogLines {
        subscription_id: subscription_id.clone(),
        lines,
    };
    if ctx.reporter.offer(frame) {
        Ok(())
    } else {
        Err((
            LogEndReason::Limit,
            "the uplink is not keeping up; the stream was cut".to_owned(),
        ))
    }
}

async fn read_container(
    pods: Api<Pod>,
    pod: String,
    container: String,
    params: LogParams,
    tx: mpsc::Sender<Read>,
    cancel: CancellationToken,
) {
    let reader = tokio::select! {
        _ = cancel.cancelled() => return,
        reader = pods.log_stream(&pod, &params) => reader,
    };
    let reader = match reader {
        Ok(reader) => reader,
        Err(error) => {
            let _ = tx
                .send(Read::Failed(format!("{pod}/{container}: {error}")))
                .await;
            return;
        }
    };
    let mut lines = reader.lines();
    loop {
        let next = tokio::select! {
            _ = cancel.cancelled() => return,
            next = lines.next() => next,
        };
        let read = match next {
            None => return,
            Some(Ok(raw)) => Read::Line(log_line(&pod, &container, &raw)),
            Some(Err(error)) => Read::Failed(format!("{pod}/{container}: {error}")),
        };
        let failed = matches!(read, Read::Failed(_));
        if tx.send(read).await.is_err() || failed {
            return;
        }
    }
}

/// A line as the API server sent it (`<RFC 3339 timestamp> <text>`), cut to the contract's
/// limit; a line without a timestamp is stamped now.
pub fn log_line(pod: &str, container: &str, raw: &str) -> wire::LogLine {
    let (timestamp, text) = split_timestamp(raw);
    let mut line = text.trim_end_matches('\r').to_owned();
    truncate(&mut line, MAX_LINE_CHARS);
    wire::LogLine {
        timestamp: timestamp.unwrap_or_else(Utc::now),
        pod: pod.to_owned(),
        container: container.to_owned(),
        line,
    }
}

fn split_timestamp(raw: &str) -> (Option<DateTime<Utc>>, &str) {
    if let Some((head, rest)) = raw.split_once(' ')
        && let Ok(at) = DateTime::parse_from_rfc3339(head)
    {
        return (Some(at.with_timezone(&Utc)), rest);
    }
    (None, raw)
}

/// Cuts `text` to at most `max` characters, on a character boundary.
pub fn truncate(text: &mut String, max: usize) {
    if let Some((at, _)) = text.char_indices().nth(max) {
        text.truncate(at);
    }
}

/// Lines gathered for the next frame, within [`MAX_LINES_PER_FRAME`] lines and
/// [`MAX_BATCH_BYTES`] bytes as JSON (a line of escaped control characters takes six bytes a
/// character, so characters alone do not bound a frame).
#[derive(Debug, Default)]
pub struct Batch {
    lines: Vec<wire::LogLine>,
    bytes: usize,
}

impl Batch {
    /// Adds a line; the lines of a frame that is full come back: those gathered before this
    /// line when it would not fit beside them, or all of them when it filled the last place.
    pub fn push(&mut self, line: wire::LogLine) -> Option<Vec<wire::LogLine>> {
        let size = serde_json::to_vec(&line).map_or(MAX_BATCH_BYTES, |v| v.len() + 1);
        let before = if self.bytes + size > MAX_BATCH_BYTES {
            self.take()
        } else {
            None
        };
        self.lines.push(line);
        self.bytes += size;
        before.or_else(|| (self.lines.len() >= MAX_LINES_PER_FRAME).then(|| self.take_all()))
    }

    /// The lines gathered so far, if any.
    pub fn take(&mut self) -> Option<Vec<wire::LogLine>> {
        (!self.lines.is_empty()).then(|| self.take_all())
    }

    fn take_all(&mut self) -> Vec<wire::LogLine> {
        self.bytes = 0;
        std::mem::take(&mut self.lines)
    }
}

/// A token bucket of one second's worth of lines.
#[derive(Debug)]
pub struct RateLimit {
    per_second: f64,
    tokens: f64,
    last: Option<std::time::Instant>,
}

impl RateLimit {
    /// At most `per_second` lines a second, with a burst of as many.
    pub fn new(per_second: u32) -> Self {
        Self {
            per_second: f64::from(per_second.max(1)),
            tokens: f64::from(per_second.max(1)),
            last: None,
        }
    }

    /// Takes one line at `now`; `Some(wait)` when the caller must wait that long first.
    pub fn take(&mut self, now: std::time::Instant) -> Option<Duration> {
        if let Some(last) = self.last {
            let refill = now.saturating_duration_since(last).as_secs_f64() * self.per_second;
            self.tokens = (self.tokens + refill).min(self.per_second);
        }
        self.last = Some(now);
        self.tokens -= 1.0;
        (self.tokens < 0.0).then(|| Duration::from_secs_f64(-self.tokens / self.per_second))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_line_keeps_the_api_servers_timestamp_and_loses_it_from_the_text() {
        let line = log_line(
            "web-1",
            "web",
            "2026-12-03T06:00:00.123456789Z listening on :80\r",
        );
        assert_eq!(line.line, "listening on :80");
        assert_eq!(
            line.timestamp.to_rfc3339(),
            "2026-12-03T06:00:00.123456789+00:00"
        );
        assert_eq!(
            (line.pod.as_str(), line.container.as_str()),
            ("web-1", "web")
        );
    }

    #[test]
    fn a_line_without_a_timestamp_is_kept_whole() {
        let line = log_line("web-1", "web", "plain text here");
        assert_eq!(line.line, "plain text here");
    }

    #[test]
    fn long_lines_are_cut_at_the_contracts_limit_on_a_character_boundary() {
        let raw = "é".repeat(MAX_LINE_CHARS + 10);
        let line = log_line("p", "c", &raw);
        assert_eq!(line.line.chars().count(), MAX_LINE_CHARS);
        let mut short = "abc".to_owned();
        truncate(&mut short, 10);
        assert_eq!(short, "abc");
    }

    #[test]
    fn a_batch_is_handed_over_full_at_the_frame_limit_and_the_rest_on_take() {
        let mut batch = Batch::default();
        let line = log_line("p", "c", "x");
        for _ in 0..MAX_LINES_PER_FRAME - 1 {
            assert!(batch.push(line.clone()).is_none());
        }
        let full = batch.push(line.clone()).unwrap_or_default();
        assert_eq!(full.len(), MAX_LINES_PER_FRAME);
        assert!(batch.take().is_none());
        batch.push(line);
        assert_eq!(batch.take().map(|l| l.len()), Some(1));
    }

    #[test]
    fn a_frame_of_long_escaped_lines_stays_under_the_hubs_frame_limit() {
        // Control characters are escaped as \u00XX: six bytes each in the frame.
        let raw = "\u{1}".repeat(MAX_LINE_CHARS);
        let line = log_line("p", "c", &raw);
        let mut batch = Batch::default();
        let mut frames = Vec::new();
        for _ in 0..100 {
            frames.extend(batch.push(line.clone()));
        }
        frames.extend(batch.take());
        assert!(frames.len() > 1, "{}", frames.len());
        assert_eq!(frames.iter().map(Vec::len).sum::<usize>(), 100);
        let limits = wire::Limits::default();
        for lines in frames {
            let frame = wire::Envelope::new(wire::LogLines {
                subscription_id: Id::new("s1"),
                lines,
            });
            let text = serde_json::to_string(&frame).unwrap();
            assert!(text.len() < limits.max_frame_bytes, "{}", text.len());
        }
    }

    #[test]
    fn the_rate_limit_allows_a_burst_then_asks_to_wait() {
        let mut limit = RateLimit::new(10);
        let now = std::time::Instant::now();
        for _ in 0..10 {
            assert_eq!(limit.take(now), None);
        }
        let wait = limit.take(now).unwrap_or_default();
        assert!(wait > Duration::ZERO && wait <= Duration::from_millis(100));
        // A second later the bucket is full again.
        assert_eq!(limit.take(now + Duration::from_secs(2)), None);
    }
}
