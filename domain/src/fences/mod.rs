//! Fences at the door (pure): what an App asks of its project's quota and of its scopes'
//! budgets, and whether a change fits.
//!
//! # How use is counted
//!
//! A project's use of each resource is the more of two counts:
//! - **declared**: the sum of its Apps' specs — for each image or Git workload, `replicas` ×
//!   its request (the project's default request when it sets none, its limit when it sets only
//!   that, as Kubernetes' LimitRanger does); a chart or an addon declares nothing the door can
//!   read before it is rendered, so it is counted by the cluster;
//! - **reported**: what the cluster's ResourceQuota counted in the namespace, as the agent last
//!   reported it (every pod, charts and addons included, and a rollout's surge).
//!
//! A change is charged the difference between the App's new and old declarations, over
//! whichever count is more, so an App being changed is never counted twice (once by the
//! cluster for its running pods, once by its new spec). A change that asks for no more of a
//! resource than before is never refused for it: lowering a request always goes through.
//!
//! The cluster itself enforces the quota too (the agent keeps it as a ResourceQuota), so what
//! the door cannot see (a chart's pods) is held by Kubernetes; the door refuses early, with the
//! numbers, what it can.

mod amounts;
mod check;

pub use amounts::{
    Amounts, Resource, app_charge, component_charges, format_amount, quantity_refusal, reported,
};
pub use check::{
    FenceRefusal, Ledger, ProjectUse, check_change, check_room, project_use, project_uses,
};

use kubenest_crds::app::Resources;
use kubenest_crds::project::ProjectSpec;

/// The request a container gets under a quota on CPU when neither it nor its project names one.
pub const FALLBACK_CPU_REQUEST: &str = "100m";
/// The request a container gets under a quota on memory when neither it nor its project names
/// one.
pub const FALLBACK_MEMORY_REQUEST: &str = "128Mi";

/// The defaults a project's containers get (pure): the project's own, and, where its quota
/// limits CPU or memory and it names no default request for it, [`FALLBACK_CPU_REQUEST`] /
/// [`FALLBACK_MEMORY_REQUEST`] — under such a quota Kubernetes refuses every pod whose
/// containers request nothing, so a project without defaults could run no chart at all.
pub fn effective_defaults(spec: &ProjectSpec) -> Option<Resources> {
    let mut defaults = spec.defaults.clone().unwrap_or_default();
    if let Some(quota) = &spec.quota {
        if quota.cpu.is_some() && defaults.cpu_request.is_none() {
            defaults.cpu_request = Some(
                defaults
                    .cpu_limit
                    .clone()
                    .unwrap_or_else(|| FALLBACK_CPU_REQUEST.into()),
            );
        }
        if quota.memory.is_some() && defaults.memory_request.is_none() {
            defaults.memory_request = Some(
                defaults
                    .memory_limit
                    .clone()
                    .unwrap_or_else(|| FALLBACK_MEMORY_REQUEST.into()),
            );
        }
    }
    (defaults != Resources::default()).then_some(defaults)
}
