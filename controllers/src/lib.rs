//! `kubenest-controllers`: the management-plane controllers.
//!
//! # How the pieces fit
//!
//! - Desired state is the CRDs on the management cluster; history is PostgreSQL
//!   (`kubenest-store`).
//! - [`run::run`] starts everything once this replica leads ([`kubenest_runtime::leader`]): the Organization,
//!   Cluster, Project, App, AddonInstance and StackTemplate controllers, the status router
//!   ([`status`]), the revocation floors pushed to every hub replica and fleet health.
//! - Controllers send commands through [`plane::Plane::send`] (the [`kubenest_hub_client`] routes each to
//!   the replica holding the cluster's session Lease) and keep re-sending with backoff until the
//!   agent reports what they asked for; [`intents`] is the in-memory bookkeeping of that (what
//!   was sent for which object, backoffs, what snapshots say the clusters hold) and can be lost
//!   at any time: the durable intent is the spec plus its history row.
//! - Each status field has one writer: the status router writes what the agent observed
//!   (`clusterPhase`, `observedRevision`, components, drift, acceptance/rejection), the
//!   controllers derive `phase`, conditions and history outcomes from it.
//! - Requests that are not spec changes (redeploy, rollback) are annotations, so kubectl, GitOps
//!   and the REST facade share one path; the actor of a change is `kubenest.io/actor`, which
//!   the REST facade sets for its callers and the API server's admission webhook stamps from
//!   every other writer's authenticated identity (without the webhook: the field manager).

pub mod addon;
pub mod alerts;
pub mod app;
pub mod args;
pub mod caches;
pub mod cluster;
pub mod conditions;
pub mod deadline;
pub mod events;
pub mod intents;
pub mod metrics;
pub mod newest;
pub mod organization;
pub mod patch;
pub mod placement;
pub mod plane;
pub mod policies;
pub mod project;
pub mod rbac;
pub mod reach;
pub mod reconcile;
pub mod resync;
pub mod run;
pub mod status;
pub mod template;

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, Patch, PatchParams};

/// Applies every kubenest CRD (charts normally do; tests and the local environment use this).
pub async fn ensure_crds(client: &kube::Client) -> Result<(), kube::Error> {
    let api: Api<CustomResourceDefinition> = Api::all(client.clone());
    let params = PatchParams::apply(kubenest_crds::names::field_managers::CONTROLLERS).force();
    for crd in kubenest_crds::all() {
        let name = crd.metadata.name.clone().unwrap_or_default();
        api.patch(&name, &params, &Patch::Apply(&crd)).await?;
    }
    Ok(())
}

/// A timestamp as the statuses write it: RFC 3339, whole seconds, `Z`.
pub(crate) fn rfc3339(at: chrono::DateTime<chrono::Utc>) -> String {
    at.to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
}
