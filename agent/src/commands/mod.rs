//! Commands from the hub: each is stored durably on the cluster (a StackDeploy, an AddonRelease,
//! a BuildRequest, a namespace or a Secret) **before** it is answered `command.accepted`, or
//! refused with `command.rejected` naming the reason and the field. Applying a command twice is
//! harmless: every write is an idempotent upsert keyed by the object's id.
//!
//! Commands about one object are handled in the order they arrived (one worker per hash of the
//! object's id); commands about different objects run side by side. A copy of a command that is
//! still waiting for its worker (the controllers re-send while the agent is busy) joins the
//! waiting one and is answered with it, instead of queueing again: under load a backlog would
//! otherwise feed on its own re-sends.
//!
//! The handlers live by what they store: `app` (StackDeploys and BuildRequests), `addon`
//! (AddonReleases), `secret` (Secrets) and [`crate::project`] (namespaces); `queue` holds the
//! workers' queues, and `resync` what a new session (or `resync.request`) is told.

mod addon;
mod app;
mod queue;
mod resync;
mod secret;

use std::hash::{DefaultHasher, Hash, Hasher};
use std::sync::Arc;

use kubenest_contracts::{self as wire, Envelope, Message, RejectReason};
use tracing::Instrument as _;

use crate::boundary::Refusal;
use crate::context::Context;
use crate::memory::AppMemory;
use queue::{Pending, Queue, key_of};

/// How many commands run at once.
const WORKERS: usize = 8;

/// The command handler and its workers.
pub struct Commands {
    ctx: Arc<Context>,
    /// What the StackDeploy controller remembers of each App: a re-sent `app.deploy` is
    /// answered without a write, and a resync repeats the last report.
    apps: Arc<AppMemory>,
    workers: Vec<Arc<Queue>>,
}

impl Drop for Commands {
    fn drop(&mut self) {
        self.workers.iter().for_each(|queue| queue.close());
    }
}

impl std::fmt::Debug for Commands {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Commands").finish_non_exhaustive()
    }
}

impl Commands {
    /// Starts the workers.
    pub fn start(ctx: Arc<Context>, apps: Arc<AppMemory>) -> Arc<Self> {
        let mut workers = Vec::new();
        for _ in 0..WORKERS {
            let queue = Arc::new(Queue::default());
            let ctx = ctx.clone();
            let apps = apps.clone();
            tokio::spawn({
                let queue = Arc::clone(&queue);
                async move {
                    while let Some(Pending { envelope, replies }) = queue.pop().await {
                        let kind = envelope.message_type();
                        let span = command_span(&envelope);
                        let outcome = handle(&ctx, &apps, envelope.message)
                            .instrument(span.clone())
                            .await;
                        if matches!(kind, wire::MessageType::ResyncRequest) {
                            continue;
                        }
                        let _in_span = span.enter();
                        crate::metrics::metrics()
                            .handled(kind, outcome.as_ref().err().map(|r| r.reason));
                        for (command_id, reply) in replies {
                            let answer = match &outcome {
                                Ok(()) => {
                                    tracing::info!(%kind, %command_id, "command accepted");
                                    Message::from(wire::CommandAccepted { command_id })
                                }
                                Err(refusal) => {
                                    tracing::warn!(%kind, %command_id, reason = ?refusal.reason, field = ?refusal.field, message = %refusal.message, "command rejected");
                                    Message::from(wire::CommandRejected {
                                        command_id,
                                        reason: refusal.reason,
                                        message: refusal.message.clone(),
                                        field: refusal.field.clone(),
                                    })
                                }
                            };
                            reply(answer);
                        }
                    }
                }
            });
            workers.push(queue);
        }
        Arc::new(Self { ctx, apps, workers })
    }

    /// Queues a command; `reply` gets its answer.
    pub fn submit(&self, envelope: Envelope, reply: impl FnOnce(Message) + Send + 'static) {
        let mut hasher = DefaultHasher::new();
        key_of(&envelope.message).hash(&mut hasher);
        let index = usize::try_from(hasher.finish() % WORKERS as u64).unwrap_or(0);
        if let Some(worker) = self.workers.get(index) {
            worker.push(envelope, Box::new(reply));
        }
    }

    /// The first frame of every session.
    pub fn hello(&self) -> wire::Hello {
        wire::Hello {
            agent_version: format!("kubenest-agent/{}", env!("CARGO_PKG_VERSION")),
            capabilities: vec![
                "build.dockerfile".into(),
                "gitops".into(),
                "logs".into(),
                "objects".into(),
            ],
            kubernetes_version: self.ctx.kubernetes_version.clone(),
        }
    }

    /// Everything the agent holds, with checksums.
    pub async fn snapshot(&self) -> wire::Snapshot {
        resync::snapshot(&self.ctx).await
    }

    /// The current status of everything the agent holds, as events.
    pub async fn resync(&self) -> Vec<Message> {
        resync::resync(&self.ctx, &self.apps).await
    }

    /// Capacity for a heartbeat.
    pub async fn heartbeat(&self) -> Result<wire::Heartbeat, kube::Error> {
        crate::capacity::heartbeat(&self.ctx.client).await
    }
}

/// The span of a command's handling: its id (the controllers' and hub's lines name it too),
/// type, and for App and addon commands the object and revision.
fn command_span(envelope: &Envelope) -> tracing::Span {
    let span = tracing::info_span!(
        "command",
        command_id = %envelope.id,
        kind = envelope.message_type().as_str(),
        namespace = tracing::field::Empty,
        name = tracing::field::Empty,
        revision = tracing::field::Empty,
    );
    match &envelope.message {
        Message::AppDeploy(c) => {
            span.record("namespace", c.app.namespace.as_str());
            span.record("name", c.app.name.as_str());
            span.record("revision", c.revision.as_str());
        }
        Message::AddonApply(c) => {
            span.record("namespace", c.addon.namespace.as_str());
            span.record("name", c.addon.name.as_str());
            span.record("revision", c.revision);
        }
        _ => {}
    }
    // The controllers' reconcile that sent it (and the hub that routed it) are of its trace.
    if let Some(parent) = &envelope.traceparent {
        kubenest_runtime::traces::continue_from(&span, parent);
    }
    span
}

async fn handle(ctx: &Arc<Context>, apps: &AppMemory, message: Message) -> Result<(), Refusal> {
    match message {
        Message::ProjectEnsure(c) => crate::project::ensure(ctx, &c).await,
        Message::ProjectDelete(c) => crate::project::delete(ctx, &c).await,
        Message::AppDeploy(c) => app::deploy(ctx, apps, c).await,
        Message::AppDelete(c) => app::delete_app(ctx, apps, &c.app).await,
        Message::AppRedeploy(c) => app::redeploy(ctx, &c).await,
        Message::AppPause(c) => app::set_paused(ctx, apps, &c.app, true).await,
        Message::AppResume(c) => app::set_paused(ctx, apps, &c.app, false).await,
        Message::AddonApply(c) => addon::addon_apply(ctx, c).await,
        Message::AddonRollback(c) => addon::addon_rollback(ctx, &c).await,
        Message::AddonDelete(c) => addon::addon_delete(ctx, &c).await,
        Message::SecretSet(c) => secret::secret_set(ctx, &c).await,
        Message::SecretDelete(c) => secret::secret_delete(ctx, &c).await,
        Message::BuildRequest(c) => app::build(ctx, c).await,
        Message::ResyncRequest(_) => {
            ctx.reporter.report(resync::snapshot(ctx).await);
            for event in resync::resync(ctx, apps).await {
                ctx.reporter.report(event);
            }
            Ok(())
        }
        Message::LogsSubscribe(c) => crate::logs::subscribe(ctx, c).await,
        Message::LogsUnsubscribe(c) => {
            crate::logs::unsubscribe(ctx, &c);
            Ok(())
        }
        Message::ObjectsRequest(c) => crate::objects::answer(ctx, c).await,
        other => Err(Refusal::new(
            RejectReason::Unsupported,
            format!("{} is not a command", other.message_type()),
            None,
        )),
    }
}
