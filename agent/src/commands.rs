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

use kubenest_crds::names::{field_managers, finalizers, labels};
use std::collections::BTreeMap;
use std::hash::{DefaultHasher, Hash, Hasher};
use std::sync::Arc;

use base64::Engine;
use k8s_openapi::api::core::v1::{Namespace, Secret};
use kube::ResourceExt;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use kubenest_contracts::{self as wire, Envelope, Message, RejectReason};
use serde_json::json;

use crate::context::Context;
use crate::crd::{
    AddonRelease, AddonReleaseSpec, StackDeploy, StackDeploySpec, addon_release_name,
    stack_deploy_name,
};
use crate::status;

/// How many commands run at once.
const WORKERS: usize = 8;

/// Why a command was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    pub reason: RejectReason,
    pub message: String,
    /// JSON pointer into the payload.
    pub field: Option<String>,
}

impl Refusal {
    fn new(reason: RejectReason, message: impl Into<String>, field: Option<&str>) -> Self {
        Self {
            reason,
            message: message.into(),
            field: field.map(str::to_owned),
        }
    }

    fn internal(error: impl std::fmt::Display) -> Self {
        Self::new(
            RejectReason::Internal,
            format!("the cluster refused the write: {error}"),
            None,
        )
    }
}

type Reply = Box<dyn FnOnce(Message) + Send>;

/// A command waiting for its worker, and every send of it waiting for the answer.
struct Pending {
    envelope: Envelope,
    replies: Vec<(uuid::Uuid, Reply)>,
}

/// One worker's queue. Closed when the [`Commands`] that feeds it is dropped; the worker then
/// finishes what is queued and ends.
#[derive(Default)]
struct Queue {
    pending: std::sync::Mutex<std::collections::VecDeque<Pending>>,
    ready: tokio::sync::Notify,
    closed: std::sync::atomic::AtomicBool,
}

impl Queue {
    fn push(&self, envelope: Envelope, reply: Reply) {
        let Ok(mut pending) = self.pending.lock() else {
            return;
        };
        let id = envelope.id;
        match pending
            .iter_mut()
            .find(|p| p.envelope.message == envelope.message)
        {
            Some(same) => same.replies.push((id, reply)),
            None => pending.push_back(Pending {
                envelope,
                replies: vec![(id, reply)],
            }),
        }
        drop(pending);
        self.ready.notify_one();
    }

    /// The next command, or `None` once the queue is closed and empty.
    async fn pop(&self) -> Option<Pending> {
        loop {
            let notified = self.ready.notified();
            if let Some(next) = self.pending.lock().ok().and_then(|mut p| p.pop_front()) {
                return Some(next);
            }
            if self.closed.load(std::sync::atomic::Ordering::Acquire) {
                return None;
            }
            notified.await;
        }
    }

    fn close(&self) {
        self.closed
            .store(true, std::sync::atomic::Ordering::Release);
        self.ready.notify_one();
    }
}

/// The command handler and its workers.
pub struct Commands {
    ctx: Arc<Context>,
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

/// The object a command is about, so commands about it stay in order.
fn key_of(message: &Message) -> String {
    match message {
        Message::ProjectEnsure(p) => p.project_id.to_string(),
        Message::ProjectDelete(p) => p.project_id.to_string(),
        Message::AppDeploy(c) => c.app.app_id.to_string(),
        Message::AppDelete(c) => c.app.app_id.to_string(),
        Message::AppRedeploy(c) => c.app.app_id.to_string(),
        Message::AppPause(c) => c.app.app_id.to_string(),
        Message::AppResume(c) => c.app.app_id.to_string(),
        Message::AddonApply(c) => c.addon.addon_id.to_string(),
        Message::AddonRollback(c) => c.addon.addon_id.to_string(),
        Message::AddonDelete(c) => c.addon.addon_id.to_string(),
        Message::SecretSet(c) => format!(
            "{}/{}",
            c.target.namespace.as_str(),
            c.target.secret.as_str()
        ),
        Message::SecretDelete(c) => {
            format!(
                "{}/{}",
                c.target.namespace.as_str(),
                c.target.secret.as_str()
            )
        }
        Message::BuildRequest(c) => c.build_id.to_string(),
        other => other.message_type().to_string(),
    }
}

impl Commands {
    /// Starts the workers.
    pub fn start(ctx: Arc<Context>) -> Arc<Self> {
        let mut workers = Vec::new();
        for _ in 0..WORKERS {
            let queue = Arc::new(Queue::default());
            let ctx = ctx.clone();
            tokio::spawn({
                let queue = Arc::clone(&queue);
                async move {
                    while let Some(Pending { envelope, replies }) = queue.pop().await {
                        let kind = envelope.message_type();
                        let outcome = handle(&ctx, envelope.message).await;
                        if matches!(kind, wire::MessageType::ResyncRequest) {
                            continue;
                        }
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
        Arc::new(Self { ctx, workers })
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
                "build.kaniko".into(),
                "build.buildpacks".into(),
                "gitops".into(),
            ],
            kubernetes_version: self.ctx.kubernetes_version.clone(),
        }
    }

    /// Everything the agent holds, with checksums.
    pub async fn snapshot(&self) -> wire::Snapshot {
        status::snapshot(&self.ctx).await
    }

    /// The current status of everything the agent holds, as events.
    pub async fn resync(&self) -> Vec<Message> {
        status::resync(&self.ctx).await
    }

    /// Capacity for a heartbeat.
    pub async fn heartbeat(&self) -> Result<wire::Heartbeat, kube::Error> {
        crate::capacity::heartbeat(&self.ctx.client).await
    }
}

async fn handle(ctx: &Arc<Context>, message: Message) -> Result<(), Refusal> {
    match message {
        Message::ProjectEnsure(c) => crate::project::ensure(ctx, &c).await,
        Message::ProjectDelete(c) => crate::project::delete(ctx, &c).await,
        Message::AppDeploy(c) => deploy(ctx, c).await,
        Message::AppDelete(c) => delete_app(ctx, &c.app).await,
        Message::AppRedeploy(c) => redeploy(ctx, &c).await,
        Message::AppPause(c) => set_paused(ctx, &c.app, true).await,
        Message::AppResume(c) => set_paused(ctx, &c.app, false).await,
        Message::AddonApply(c) => addon_apply(ctx, c).await,
        Message::AddonRollback(c) => addon_rollback(ctx, &c).await,
        Message::AddonDelete(c) => addon_delete(ctx, &c).await,
        Message::SecretSet(c) => secret_set(ctx, &c).await,
        Message::SecretDelete(c) => secret_delete(ctx, &c).await,
        Message::BuildRequest(c) => build(ctx, c).await,
        Message::ResyncRequest(_) => {
            ctx.reporter.report(status::snapshot(ctx).await);
            for event in status::resync(ctx).await {
                ctx.reporter.report(event);
            }
            Ok(())
        }
        Message::LogsSubscribe(_) | Message::LogsUnsubscribe(_) => Err(Refusal::new(
            RejectReason::Unsupported,
            "this agent does not stream logs",
            None,
        )),
        other => Err(Refusal::new(
            RejectReason::Unsupported,
            format!("{} is not a command", other.message_type()),
            None,
        )),
    }
}

/// Checks that `namespace` is the namespace of project `project_id` on this cluster. The
/// agent's cache of project namespaces answers; a refusal is confirmed with the API server
/// first, so a namespace created a moment ago is never refused because the cache has not seen
/// it yet. (A namespace handed to another project is seen by the cache within its watch's
/// delay, as every pass of the App's StackDeploy checks it again.)
pub async fn check_namespace(
    ctx: &Context,
    namespace: &str,
    project_id: &str,
    field: &str,
) -> Result<(), Refusal> {
    let cached = ctx.applier.namespace(namespace);
    if boundary(cached.as_deref(), namespace, project_id, field).is_ok() {
        return Ok(());
    }
    let found = Api::<Namespace>::all(ctx.client.clone())
        .get_opt(namespace)
        .await
        .map_err(Refusal::internal)?;
    boundary(found.as_ref(), namespace, project_id, field)
}

/// Whether `found` (namespace `namespace`, if it exists) is project `project_id`'s (pure).
pub fn boundary(
    found: Option<&Namespace>,
    namespace: &str,
    project_id: &str,
    field: &str,
) -> Result<(), Refusal> {
    let owner = found.and_then(|ns| ns.labels().get(labels::PROJECT_ID).cloned());
    match owner {
        Some(owner) if owner == project_id => Ok(()),
        Some(_) => Err(Refusal::new(
            RejectReason::NamespaceViolation,
            format!("namespace {namespace} belongs to another project"),
            Some(field),
        )),
        None if found.is_some() => Err(Refusal::new(
            RejectReason::NamespaceViolation,
            format!("namespace {namespace} is not a kubenest project's namespace"),
            Some(field),
        )),
        None => Err(Refusal::new(
            RejectReason::NamespaceViolation,
            format!("namespace {namespace} does not exist; project {project_id} is not ready here"),
            Some(field),
        )),
    }
}

fn labels(app: &wire::AppRef) -> BTreeMap<String, String> {
    BTreeMap::from([
        (labels::APP_ID.to_owned(), app.app_id.to_string()),
        (labels::PROJECT_ID.to_owned(), app.project_id.to_string()),
        (
            labels::MANAGED_BY.to_owned(),
            labels::MANAGED_BY_AGENT.to_owned(),
        ),
    ])
}

async fn deploy(ctx: &Arc<Context>, deploy: wire::AppDeploy) -> Result<(), Refusal> {
    check_namespace(
        ctx,
        deploy.app.namespace.as_str(),
        deploy.app.project_id.as_str(),
        "/app/namespace",
    )
    .await?;
    crate::stack::validate(&deploy)
        .map_err(|(field, message)| Refusal::new(RejectReason::Invalid, message, Some(&field)))?;
    if ctx.already_stored(&deploy) {
        return Ok(()); // a re-send: the StackDeploy holds it
    }
    let name = stack_deploy_name(deploy.app.app_id.as_str());
    let mut object = StackDeploy::new(
        &name,
        StackDeploySpec {
            deploy: deploy.clone(),
            restart_id: None,
        },
    );
    object.metadata.labels = Some(labels(&deploy.app));
    // Stored holding the finalizer the StackDeploy controller would otherwise add in a write
    // of its own before applying anything.
    object.metadata.finalizers = Some(vec![finalizers::STACK_DEPLOY.to_owned()]);
    let mut value = serde_json::to_value(&object).map_err(Refusal::internal)?;
    // Only the fields this manager owns: a redeploy request is another manager's.
    if let Some(spec) = value.get_mut("spec").and_then(|s| s.as_object_mut()) {
        spec.remove("restartId");
    }
    Api::<StackDeploy>::namespaced(ctx.client.clone(), &ctx.namespace)
        .patch(
            &name,
            &PatchParams::apply(field_managers::AGENT_COMMANDS).force(),
            &Patch::Apply(&value),
        )
        .await
        .map_err(Refusal::internal)?;
    ctx.remember_stored(deploy);
    Ok(())
}

async fn delete_app(ctx: &Arc<Context>, app: &wire::AppRef) -> Result<(), Refusal> {
    ctx.forget_stored(app.app_id.as_str());
    let name = stack_deploy_name(app.app_id.as_str());
    let api = Api::<StackDeploy>::namespaced(ctx.client.clone(), &ctx.namespace);
    match api.delete(&name, &DeleteParams::default()).await {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(status)) if status.code == 404 => {
            // Nothing held (or already cleaned up): say so, so the App's deletion can finish.
            ctx.reporter
                .report(status::deleted(&ctx.reporter, app.app_id.clone(), None));
            Ok(())
        }
        Err(error) => Err(Refusal::internal(error)),
    }
}

async fn stack_deploy(ctx: &Context, app: &wire::AppRef) -> Result<StackDeploy, Refusal> {
    let name = stack_deploy_name(app.app_id.as_str());
    Api::<StackDeploy>::namespaced(ctx.client.clone(), &ctx.namespace)
        .get_opt(&name)
        .await
        .map_err(Refusal::internal)?
        .ok_or_else(|| {
            Refusal::new(
                RejectReason::Invalid,
                format!("no StackDeploy for app {} on this cluster", app.app_id),
                Some("/app/app_id"),
            )
        })
}

async fn redeploy(ctx: &Arc<Context>, command: &wire::AppRedeploy) -> Result<(), Refusal> {
    let held = stack_deploy(ctx, &command.app).await?;
    if held.spec.deploy.revision != command.revision {
        return Err(Refusal::new(
            RejectReason::Stale,
            format!(
                "the cluster holds revision {}, not {}",
                held.spec.deploy.revision, command.revision
            ),
            Some("/revision"),
        ));
    }
    let patch = json!({
        "apiVersion": "kubenest.io/v1alpha1",
        "kind": "StackDeploy",
        "spec": {"restartId": command.restart_id.as_str()},
    });
    Api::<StackDeploy>::namespaced(ctx.client.clone(), &ctx.namespace)
        .patch(
            &held.name_any(),
            &PatchParams::apply(field_managers::AGENT_REDEPLOY).force(),
            &Patch::Apply(&patch),
        )
        .await
        .map_err(Refusal::internal)?;
    Ok(())
}

async fn set_paused(ctx: &Arc<Context>, app: &wire::AppRef, paused: bool) -> Result<(), Refusal> {
    let held = stack_deploy(ctx, app).await?;
    let mut deploy = held.spec.deploy.clone();
    deploy.paused = paused;
    Box::pin(self::deploy(ctx, deploy)).await
}

async fn addon_apply(ctx: &Arc<Context>, apply: wire::AddonApply) -> Result<(), Refusal> {
    check_namespace(
        ctx,
        apply.addon.namespace.as_str(),
        apply.addon.project_id.as_str(),
        "/addon/namespace",
    )
    .await?;
    let name = addon_release_name(apply.addon.addon_id.as_str());
    let api = Api::<AddonRelease>::namespaced(ctx.client.clone(), &ctx.namespace);
    let existing = api.get_opt(&name).await.map_err(Refusal::internal)?;
    let mut history = existing.map(|r| r.spec.history).unwrap_or_default();
    if let Some(newest) = history.last()
        && newest.revision > apply.revision
    {
        return Err(Refusal::new(
            RejectReason::Stale,
            format!("revision {} is already applied", newest.revision),
            Some("/revision"),
        ));
    }
    history.retain(|h| h.revision != apply.revision);
    history.push(apply.clone());
    store_release(ctx, &name, apply, history).await
}

async fn store_release(
    ctx: &Context,
    name: &str,
    apply: wire::AddonApply,
    history: Vec<wire::AddonApply>,
) -> Result<(), Refusal> {
    let mut object = AddonRelease::new(name, AddonReleaseSpec { apply, history });
    object.metadata.labels = Some(BTreeMap::from([(
        labels::MANAGED_BY.to_owned(),
        labels::MANAGED_BY_AGENT.to_owned(),
    )]));
    Api::<AddonRelease>::namespaced(ctx.client.clone(), &ctx.namespace)
        .patch(
            name,
            &PatchParams::apply(field_managers::AGENT_COMMANDS).force(),
            &Patch::Apply(&object),
        )
        .await
        .map_err(Refusal::internal)?;
    Ok(())
}

async fn addon_rollback(ctx: &Arc<Context>, rollback: &wire::AddonRollback) -> Result<(), Refusal> {
    let name = addon_release_name(rollback.addon.addon_id.as_str());
    let api = Api::<AddonRelease>::namespaced(ctx.client.clone(), &ctx.namespace);
    let Some(existing) = api.get_opt(&name).await.map_err(Refusal::internal)? else {
        return Err(Refusal::new(
            RejectReason::Invalid,
            format!("addon {} is not installed here", rollback.addon.addon_id),
            Some("/addon/addon_id"),
        ));
    };
    let Some(target) = existing
        .spec
        .history
        .iter()
        .find(|h| h.revision == rollback.to_revision)
    else {
        return Err(Refusal::new(
            RejectReason::Invalid,
            format!(
                "this cluster never applied revision {}",
                rollback.to_revision
            ),
            Some("/to_revision"),
        ));
    };
    let mut restored = target.clone();
    restored.revision = rollback.revision;
    let mut history = existing.spec.history.clone();
    history.retain(|h| h.revision != restored.revision);
    history.push(restored.clone());
    store_release(ctx, &name, restored, history).await
}

async fn addon_delete(ctx: &Arc<Context>, delete: &wire::AddonDelete) -> Result<(), Refusal> {
    let name = addon_release_name(delete.addon.addon_id.as_str());
    let api = Api::<AddonRelease>::namespaced(ctx.client.clone(), &ctx.namespace);
    match api.delete(&name, &DeleteParams::default()).await {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(status)) if status.code == 404 => {
            ctx.reporter.report(wire::AddonStatus {
                addon_id: delete.addon.addon_id.clone(),
                observed_revision: 1,
                phase: wire::AddonPhase::Deleted,
                message: "not installed".into(),
                export: None,
                git_commit: None,
                observed_at: chrono::Utc::now(),
            });
            Ok(())
        }
        Err(error) => Err(Refusal::internal(error)),
    }
}

/// A namespace the agent manages (a project's): secrets are never written anywhere else.
async fn check_project_namespace(ctx: &Context, namespace: &str) -> Result<(), Refusal> {
    let found = Api::<Namespace>::all(ctx.client.clone())
        .get_opt(namespace)
        .await
        .map_err(Refusal::internal)?;
    if found.is_some_and(|ns| ns.labels().contains_key(labels::PROJECT_ID)) {
        return Ok(());
    }
    Err(Refusal::new(
        RejectReason::NamespaceViolation,
        format!("namespace {namespace} is not a kubenest project's namespace"),
        Some("/target/namespace"),
    ))
}

async fn secret_set(ctx: &Arc<Context>, set: &wire::SecretSet) -> Result<(), Refusal> {
    let target = &set.target;
    check_project_namespace(ctx, target.namespace.as_str()).await?;
    for key in set.values.keys() {
        let valid = !key.is_empty()
            && key.len() <= 253
            && key
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'));
        if !valid {
            return Err(Refusal::new(
                RejectReason::Invalid,
                "a Secret key may hold only letters, digits, '-', '_' and '.'",
                Some(&format!(
                    "/values/{}",
                    key.replace('~', "~0").replace('/', "~1")
                )),
            ));
        }
    }
    let engine = base64::engine::general_purpose::STANDARD;
    let data: serde_json::Map<String, serde_json::Value> = set
        .values
        .iter()
        .map(|(k, v)| (k.clone(), engine.encode(v.0.as_bytes()).into()))
        .collect();
    let mut labels = serde_json::Map::new();
    labels.insert(labels::MANAGED_BY.into(), labels::MANAGED_BY_AGENT.into());
    if let Some(app) = &target.app_id {
        labels.insert(labels::APP_ID.into(), app.as_str().into());
    }
    let api = Api::<Secret>::namespaced(ctx.client.clone(), target.namespace.as_str());
    let name = target.secret.as_str();
    // A merge patch sets these keys and keeps the others (server-side apply would drop keys an
    // earlier `secret.set` of the same manager wrote).
    let patch = json!({"metadata": {"labels": labels}, "data": data});
    match api
        .patch(name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
    {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(status)) if status.code == 404 => {
            let secret: Secret = serde_json::from_value(json!({
                "apiVersion": "v1", "kind": "Secret",
                "metadata": {"name": name, "labels": labels},
                "type": "Opaque",
                "data": data,
            }))
            .map_err(Refusal::internal)?;
            api.create(&PostParams::default(), &secret)
                .await
                .map(|_| ())
                .map_err(Refusal::internal)
        }
        Err(error) => Err(Refusal::internal(error)),
    }
}

async fn secret_delete(ctx: &Arc<Context>, delete: &wire::SecretDelete) -> Result<(), Refusal> {
    let target = &delete.target;
    check_project_namespace(ctx, target.namespace.as_str()).await?;
    let api = Api::<Secret>::namespaced(ctx.client.clone(), target.namespace.as_str());
    let name = target.secret.as_str();
    let result = if delete.keys.is_empty() {
        api.delete(name, &DeleteParams::default()).await.map(|_| ())
    } else {
        let data: serde_json::Map<String, serde_json::Value> = delete
            .keys
            .iter()
            .map(|k| (k.clone(), serde_json::Value::Null))
            .collect();
        api.patch(
            name,
            &PatchParams::default(),
            &Patch::Merge(&json!({"data": data})),
        )
        .await
        .map(|_| ())
    };
    match result {
        Ok(()) => Ok(()),
        Err(kube::Error::Api(status)) if status.code == 404 => Ok(()),
        Err(error) => Err(Refusal::internal(error)),
    }
}

async fn build(ctx: &Arc<Context>, request: wire::BuildRequest) -> Result<(), Refusal> {
    check_namespace(
        ctx,
        request.app.namespace.as_str(),
        request.app.project_id.as_str(),
        "/app/namespace",
    )
    .await?;
    crate::build::store(ctx, request)
        .await
        .map_err(Refusal::internal)
}

/// The StackDeploys the agent holds.
pub async fn stack_deploys(ctx: &Context) -> Result<Vec<StackDeploy>, kube::Error> {
    Ok(
        Api::<StackDeploy>::namespaced(ctx.client.clone(), &ctx.namespace)
            .list(&ListParams::default())
            .await?
            .items,
    )
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;

    use super::*;

    fn resync(reason: &str) -> Envelope {
        Envelope::new(wire::ResyncRequest {
            reason: reason.into(),
        })
    }

    #[tokio::test]
    async fn a_copy_of_a_waiting_command_joins_it_and_is_answered_with_it() {
        let queue = Queue::default();
        let answered = Arc::new(Mutex::new(Vec::new()));
        let reply = |tag: &'static str| -> Reply {
            let answered = Arc::clone(&answered);
            Box::new(move |_| answered.lock().unwrap().push(tag))
        };
        let (first, copy, other) = (resync("a"), resync("a"), resync("b"));
        let (first_id, copy_id) = (first.id, copy.id);
        queue.push(first, reply("first"));
        queue.push(other, reply("other"));
        queue.push(copy, reply("copy"));

        let joined = queue.pop().await.unwrap();
        let ids: Vec<uuid::Uuid> = joined.replies.iter().map(|(id, _)| *id).collect();
        assert_eq!(
            ids,
            [first_id, copy_id],
            "the copy waits with the first, in order"
        );
        for (_, reply) in joined.replies {
            reply(Message::from(wire::CommandAccepted {
                command_id: uuid::Uuid::nil(),
            }));
        }
        assert_eq!(*answered.lock().unwrap(), ["first", "copy"]);
        let next = queue.pop().await.unwrap();
        assert_eq!(
            next.replies.len(),
            1,
            "a different command queues on its own"
        );
        assert!(queue.pending.lock().unwrap().is_empty());
        queue.close();
        assert!(
            queue.pop().await.is_none(),
            "a closed, empty queue ends its worker"
        );
    }
}
