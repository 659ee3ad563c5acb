//! An App's live objects, on request: an `objects.request` is answered by one
//! `objects.snapshot` listing what the App has in its project namespace now, each object with
//! its owners (the tree's edges) and a status summary.
//!
//! The request names only the App's id. The namespace is the one of the App's StackDeploy, which
//! the agent holds, checked again against the project it belongs to: no request can make the
//! agent read another namespace. Secrets are never listed. An answer that cannot be given (no
//! such App here) is still a snapshot, with `refused` saying why, so the hub's route for the
//! request closes either way.

mod select;

use std::fmt::Debug;
use std::sync::Arc;

use k8s_openapi::NamespaceResourceScope;
use k8s_openapi::api::apps::v1::{DaemonSet, Deployment, ReplicaSet, StatefulSet};
use k8s_openapi::api::batch::v1::{CronJob, Job};
use k8s_openapi::api::core::v1::{PersistentVolumeClaim, Pod, Service};
use k8s_openapi::api::networking::v1::Ingress;
use kube::Resource;
use kube::api::{Api, ListParams};
use kubenest_contracts::{self as wire, RejectReason};
use kubenest_crds::names::labels;
use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::boundary::Refusal;
use crate::context::Context;
use crate::crd::{StackDeploy, stack_deploy_name};

pub use select::{Listed, select, status_of};

/// Answers `request` with an `objects.snapshot`.
pub async fn answer(ctx: &Arc<Context>, request: wire::ObjectsRequest) -> Result<(), Refusal> {
    let (objects, truncated, refused) = match live_objects(ctx, request.app_id.as_str()).await {
        Ok((objects, truncated)) => (objects, truncated, None),
        Err(refusal) => {
            tracing::info!(app_id = %request.app_id, message = %refusal.message, "objects request refused");
            let mut message = refusal.message;
            crate::logs::truncate(&mut message, 4096);
            let refused = wire::ObjectsRefused {
                reason: refusal.reason,
                message,
            };
            (Vec::new(), false, Some(refused))
        }
    };
    ctx.reporter.report(wire::ObjectsSnapshot {
        request_id: request.request_id,
        objects,
        truncated,
        refused,
        taken_at: chrono::Utc::now(),
    });
    Ok(())
}

/// The App's objects in its namespace.
async fn live_objects(
    ctx: &Context,
    app_id: &str,
) -> Result<(Vec<wire::LiveObject>, bool), Refusal> {
    let held = Api::<StackDeploy>::namespaced(ctx.client.clone(), &ctx.namespace)
        .get_opt(&stack_deploy_name(app_id))
        .await
        .map_err(Refusal::internal)?
        .ok_or_else(|| {
            Refusal::new(
                RejectReason::Invalid,
                format!("this cluster holds no App {app_id}"),
                Some("/app_id"),
            )
        })?;
    let app = &held.spec.deploy.app;
    let namespace = app.namespace.as_str();
    crate::boundary::check_namespace(&ctx.applier, namespace, app.project_id.as_str(), "/app_id")
        .await?;
    let client = &ctx.client;
    let mine = format!("{}={app_id}", labels::APP_ID);
    let mut listed: Vec<Listed> = Vec::new();
    // What the agent applies carries the App's labels; what Kubernetes makes from it
    // (ReplicaSets, Pods, a CronJob's Jobs) may not, and is found by its owners.
    list::<Deployment>(client, namespace, Some(&mine), &mut listed).await?;
    list::<StatefulSet>(client, namespace, Some(&mine), &mut listed).await?;
    list::<DaemonSet>(client, namespace, Some(&mine), &mut listed).await?;
    list::<CronJob>(client, namespace, Some(&mine), &mut listed).await?;
    list::<Service>(client, namespace, Some(&mine), &mut listed).await?;
    list::<Ingress>(client, namespace, Some(&mine), &mut listed).await?;
    list::<PersistentVolumeClaim>(client, namespace, Some(&mine), &mut listed).await?;
    list::<Job>(client, namespace, None, &mut listed).await?;
    list::<ReplicaSet>(client, namespace, None, &mut listed).await?;
    list::<Pod>(client, namespace, None, &mut listed).await?;
    Ok(select(app_id, &listed))
}

/// Appends the objects of kind `K` in `namespace` (those matching `selector`, if given).
async fn list<K>(
    client: &kube::Client,
    namespace: &str,
    selector: Option<&str>,
    out: &mut Vec<Listed>,
) -> Result<(), Refusal>
where
    K: Resource<Scope = NamespaceResourceScope, DynamicType = ()>
        + k8s_openapi::Resource
        + Clone
        + Debug
        + DeserializeOwned
        + Serialize,
{
    let params = match selector {
        Some(selector) => ListParams::default().labels(selector),
        None => ListParams::default(),
    };
    let kind = <K as k8s_openapi::Resource>::KIND;
    let items = Api::<K>::namespaced(client.clone(), namespace)
        .list(&params)
        .await
        .map_err(|e| {
            Refusal::new(
                RejectReason::Internal,
                format!("listing {kind}s: {e}"),
                None,
            )
        })?;
    for item in items {
        let value = serde_json::to_value(&item).map_err(Refusal::internal)?;
        out.push((kind, value));
    }
    Ok(())
}
