//! Project fences on the cluster: the ResourceQuota, LimitRange and NetworkPolicy of each
//! project namespace ([`render`]), applied by `project.ensure` and kept.
//!
//! The agent remembers, per namespace, the fences it applied and each one's `spec` as the API
//! server stored it (quantities in their canonical form). Its caches watch the three kinds
//! ([`KINDS`]); when one of its fences changes there — someone edited it, or deleted it — the
//! agent puts it back, tells a `FenceRestored` Warning on the object naming who changed it, and
//! reports the project's status with what it healed. A ResourceQuota's count changing is
//! reported the same way (`usage`), which is what the door's budgets read. Members of a project
//! have no path to these objects: the cluster is reached only through the agent, which renders
//! no such kind for a chart (confine), and the management side takes a project's fences from
//! its organization's admins only.

pub mod kept;
mod render;

use std::collections::BTreeMap;
use std::sync::Arc;

use futures::StreamExt;
use k8s_openapi::api::core::v1::ObjectReference;
use kube::api::{Api, DeleteParams, DynamicObject};
use kube::discovery::ApiResource;
use kubenest_contracts::{self as wire, ProjectPhase};
use kubenest_crds::names::labels;
use kubenest_runtime::events::{EventType, event};
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use crate::boundary::Refusal;
use crate::context::Context;

pub use render::{BUILDS, DEFAULTS, ISOLATION, KINDS, Place, QUOTA, fences};

use kept::Held;

/// Why a fence is told on its object when the agent puts it back.
pub const FENCE_RESTORED: &str = "FenceRestored";

/// Applies the fences of `command` in its namespace and removes those it no longer has.
pub async fn keep(ctx: &Context, command: &wire::ProjectEnsure) -> Result<(), Refusal> {
    let _turn = ctx.kept.turn.lock().await;
    let namespace = command.namespace.as_str();
    let place = Place {
        namespace,
        organization: command.labels.get(labels::ORGANIZATION).map(String::as_str),
        trusted: &ctx.trusted_namespaces,
    };
    let mut wanted = BTreeMap::new();
    let mut stored = BTreeMap::new();
    let mut usage = wire::Usage::new();
    for (api_version, kind, name, object) in fences(&place, &command.fences) {
        match object {
            Some(object) => {
                // Forced: a fence changed while the agent was away still carries its stamp.
                let live = ctx
                    .applier
                    .apply(&object, true)
                    .await
                    .map_err(Refusal::internal)?;
                if kind == "ResourceQuota" {
                    usage = used(&live);
                }
                stored.insert(name, live.get("spec").cloned().unwrap_or_default());
                wanted.insert(name, object);
            }
            None => remove(ctx, api_version, kind, namespace, name).await?,
        }
    }
    let healed = ctx.kept.report(namespace).1;
    ctx.kept.with(|held| {
        held.insert(
            namespace.to_owned(),
            Held {
                project_id: command.project_id.clone(),
                wanted,
                stored,
                usage,
                healed,
            },
        )
    });
    Ok(())
}

async fn remove(
    ctx: &Context,
    api_version: &str,
    kind: &str,
    namespace: &str,
    name: &str,
) -> Result<(), Refusal> {
    let resource = match (api_version, kind) {
        (_, "ResourceQuota") => {
            ApiResource::erase::<k8s_openapi::api::core::v1::ResourceQuota>(&())
        }
        (_, "LimitRange") => ApiResource::erase::<k8s_openapi::api::core::v1::LimitRange>(&()),
        _ => ApiResource::erase::<k8s_openapi::api::networking::v1::NetworkPolicy>(&()),
    };
    let api: Api<DynamicObject> = Api::namespaced_with(ctx.client.clone(), namespace, &resource);
    match api.delete(name, &DeleteParams::default()).await {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(status)) if status.code == 404 => Ok(()),
        Err(error) => Err(Refusal::internal(error)),
    }
}

/// A ResourceQuota's `status.used`.
fn used(quota: &Value) -> wire::Usage {
    quota
        .pointer("/status/used")
        .and_then(Value::as_object)
        .map(|used| {
            used.iter()
                .filter_map(|(k, v)| Some((k.clone(), v.as_str()?.to_owned())))
                .collect()
        })
        .unwrap_or_default()
}

/// Follows the fences' changes until `shutdown`: puts back a fence someone changed or deleted,
/// and reports a quota's count when it moves.
pub async fn watch(ctx: Arc<Context>, shutdown: CancellationToken) {
    adopt(&ctx);
    let streams: Vec<_> = KINDS
        .iter()
        .filter_map(|(api_version, kind, _)| ctx.applier.changes(api_version, kind))
        .map(|(_, changes)| changes.boxed())
        .collect();
    let mut changes = futures::stream::select_all(streams);
    loop {
        let object = tokio::select! {
            () = shutdown.cancelled() => return,
            next = changes.next() => match next {
                Some(object) => object,
                None => return,
            },
        };
        if let Err(error) = look(&ctx, &object).await {
            tracing::warn!(%error, "a fence could not be put back; the next change tries again");
        }
    }
}

/// Takes the fences already on the cluster as they are (an agent that restarts knows none
/// until the next `project.ensure`, which applies them as wanted again): each is kept as its
/// live `spec` until then.
fn adopt(ctx: &Context) {
    for (api_version, kind, name) in KINDS {
        for object in ctx.applier.cached(api_version, kind) {
            let (Some(namespace), Some(spec)) = (
                object.metadata.namespace.clone(),
                object.data.get("spec").cloned(),
            ) else {
                continue;
            };
            if object.metadata.name.as_deref() != Some(name) {
                continue;
            }
            let Some(project_id) = ctx.applier.namespace(&namespace).and_then(|ns| {
                ns.metadata
                    .labels
                    .as_ref()?
                    .get(labels::PROJECT_ID)
                    .cloned()
            }) else {
                continue;
            };
            let wanted = serde_json::json!({
                "apiVersion": api_version, "kind": kind,
                "metadata": {
                    "name": name, "namespace": namespace,
                    "labels": {labels::MANAGED_BY: labels::MANAGED_BY_AGENT},
                },
                "spec": spec,
            });
            let used = serde_json::to_value(&*object)
                .map(|o| used(&o))
                .unwrap_or_default();
            ctx.kept.with(|held| {
                let entry = held.entry(namespace).or_insert_with(|| Held {
                    project_id: wire::Id::new(project_id),
                    wanted: BTreeMap::new(),
                    stored: BTreeMap::new(),
                    usage: wire::Usage::new(),
                    healed: vec![],
                });
                if kind == "ResourceQuota" {
                    entry.usage = used;
                }
                entry.stored.insert(name, spec);
                entry.wanted.insert(name, wanted);
            });
        }
    }
}

/// One fence's change: healed when it is not as the agent left it, reported when its count
/// moved.
async fn look(ctx: &Context, changed: &DynamicObject) -> Result<(), crate::apply::ApplyError> {
    let _turn = ctx.kept.turn.lock().await;
    let (Some(namespace), Some(name)) = (&changed.metadata.namespace, &changed.metadata.name)
    else {
        return Ok(());
    };
    let Some(kind) = changed.types.as_ref().map(|t| t.kind.clone()) else {
        return Ok(());
    };
    let Some((api_version, kind, name)) = KINDS
        .iter()
        .find(|(_, k, n)| *k == kind && n == name)
        .copied()
    else {
        return Ok(());
    };
    let Some(held) = ctx.kept.with(|h| h.get(namespace).cloned()).flatten() else {
        return Ok(());
    };
    let live = ctx.applier.get(api_version, kind, namespace, name).await?;
    let (Some(wanted), Some(stored)) = (held.wanted.get(name), held.stored.get(name)) else {
        return Ok(());
    };
    let mut healed = None;
    let live = match live {
        None => {
            healed = Some(format!("{kind} {name}: deleted; restored"));
            ctx.applier.apply(wanted, true).await?
        }
        Some(live) if live.get("spec") != Some(stored) => {
            let by = crate::drift::manager_of(&live, &["spec".to_owned()])
                .map(|m| format!(" by {m}"))
                .unwrap_or_default();
            healed = Some(format!("{kind} {name}: spec changed{by}; restored"));
            ctx.applier.restore(wanted).await?
        }
        Some(live) => live,
    };
    let usage = if kind == "ResourceQuota" {
        used(&live)
    } else {
        held.usage.clone()
    };
    if healed.is_none() && usage == held.usage {
        return Ok(());
    }
    let stored_now = live.get("spec").cloned().unwrap_or_default();
    let mut told = held.healed.clone();
    if let Some(note) = &healed {
        tracing::warn!(%namespace, %note, "a fence was changed on the cluster; put back");
        let reference = ObjectReference {
            api_version: Some(api_version.into()),
            kind: Some(kind.into()),
            name: Some(name.to_owned()),
            namespace: Some(namespace.clone()),
            ..ObjectReference::default()
        };
        let told_event = event(EventType::Warning, FENCE_RESTORED, note.clone(), "Heal");
        ctx.events.emit_to(&reference, [told_event]);
        told.push(note.clone());
        let excess = told.len().saturating_sub(8);
        told.drain(..excess);
    }
    ctx.kept.with(|h| {
        if let Some(entry) = h.get_mut(namespace) {
            entry.stored.insert(name, stored_now);
            entry.usage = usage.clone();
            entry.healed = told.clone();
        }
    });
    ctx.reporter.report(wire::ProjectStatus {
        project_id: held.project_id,
        namespace: wire::Name::new(namespace),
        phase: ProjectPhase::Ready,
        message: String::new(),
        observed_at: chrono::Utc::now(),
        usage,
        healed: told,
    });
    Ok(())
}
