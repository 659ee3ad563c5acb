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

use std::sync::Arc;
use std::time::Duration;

use futures::{AsyncBufReadExt, StreamExt};
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, ListParams, LogParams};
use kubenest_contracts::{self as wire, Id, LogEndReason, RejectReason};
use kubenest_crds::names::labels;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use crate::boundary::Refusal;
use crate::context::Context;

mod frames;
pub mod streams;

pub use frames::{
    Batch, LINES_PER_SECOND, MAX_BATCH_BYTES, MAX_LINE_CHARS, MAX_LINES_PER_FRAME, RateLimit,
    log_line, truncate,
};
pub use streams::Streams;

/// Lines waiting between the containers' readers and the batcher.
const BUFFER_LINES: usize = 2048;
/// How long a partial batch waits for more lines.
const FLUSH_EVERY: Duration = Duration::from_millis(100);
/// Streams one agent serves at once.
pub const MAX_STREAMS: usize = 64;

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
        &ctx.applier,
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
