//! Whether a change fits its project's quota and its cluster's and organization's budgets
//! (pure), over one organization's objects.

use std::collections::HashMap;
use std::sync::Arc;

use kubenest_crds::App;
use kubenest_crds::app::{AppSpec, Resources};
use kubenest_crds::cluster::Cluster;
use kubenest_crds::fences::{Budget, ProjectQuota};
use kubenest_crds::organization::Organization;
use kubenest_crds::project::Project;

use super::amounts::{Amounts, Resource, component_charges, format_amount, reported};
use crate::app::quantity;

/// One organization's objects, as the door reads them.
#[derive(Debug, Clone, Copy)]
pub struct Ledger<'a> {
    pub org: &'a Organization,
    pub clusters: &'a [Cluster],
    pub projects: &'a [Project],
    /// Shared, as the API server's watch cache holds them ([`Arc`]).
    pub apps: &'a [Arc<App>],
}

/// A change that does not fit: `quota_exceeded` or `budget_exceeded`, the App's field that
/// asks for it (as the CRD spells it) and the numbers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FenceRefusal {
    pub code: &'static str,
    pub field: String,
    pub reason: String,
}

/// A project's use: what its Apps declare, what its cluster reported, and the more of the two.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct ProjectUse {
    pub declared: Amounts,
    pub reported: Amounts,
    pub counted: Amounts,
}

fn apps_of<'a>(ledger: &Ledger<'a>, project: &'a str) -> impl Iterator<Item = &'a App> + 'a {
    ledger
        .apps
        .iter()
        .map(|a| &**a)
        .filter(move |a| a.spec.project == project)
}

/// What project `project` uses (absent project: nothing).
pub fn project_use(ledger: &Ledger<'_>, project: &str) -> ProjectUse {
    let Some(found) = ledger
        .projects
        .iter()
        .find(|p| name(&p.metadata) == project)
    else {
        return ProjectUse::default();
    };
    let defaults = super::effective_defaults(&found.spec);
    let defaults = defaults.as_ref();
    let declared = apps_of(ledger, project).fold(Amounts::default(), |sum, app| {
        sum.plus(&super::app_charge(&app.spec, defaults))
    });
    let reported = found
        .status
        .as_ref()
        .map(|s| reported(&s.usage))
        .unwrap_or_default();
    ProjectUse {
        declared,
        reported,
        counted: declared.max(&reported),
    }
}

/// Every project's use, by name, in one pass over the Apps: what a budget, which spans
/// projects, is checked against.
pub fn project_uses(ledger: &Ledger<'_>) -> HashMap<String, ProjectUse> {
    let defaults: HashMap<String, Option<Resources>> = ledger
        .projects
        .iter()
        .map(|p| (name(&p.metadata), super::effective_defaults(&p.spec)))
        .collect();
    let mut declared: HashMap<&str, Amounts> = HashMap::new();
    for app in ledger.apps {
        if let Some(defaults) = defaults.get(&app.spec.project) {
            let sum = declared.entry(app.spec.project.as_str()).or_default();
            *sum = sum.plus(&super::app_charge(&app.spec, defaults.as_ref()));
        }
    }
    ledger
        .projects
        .iter()
        .map(|p| {
            let project = name(&p.metadata);
            let declared = declared.get(project.as_str()).copied().unwrap_or_default();
            let reported = p
                .status
                .as_ref()
                .map(|s| reported(&s.usage))
                .unwrap_or_default();
            let counted = declared.max(&reported);
            let used = ProjectUse {
                declared,
                reported,
                counted,
            };
            (project, used)
        })
        .collect()
}

fn name(meta: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta) -> String {
    meta.name.clone().unwrap_or_default()
}

fn limit(text: Option<&String>) -> Option<f64> {
    text.and_then(|t| quantity(t))
}

fn quota_limit(quota: &ProjectQuota, resource: Resource) -> Option<f64> {
    match resource {
        Resource::Cpu => limit(quota.cpu.as_ref()),
        Resource::Memory => limit(quota.memory.as_ref()),
        Resource::Storage => limit(quota.storage.as_ref()),
        Resource::Pods => quota.pods.map(f64::from),
        Resource::LoadBalancers => quota.load_balancers.map(f64::from),
    }
}

fn budget_limit(budget: &Budget, resource: Resource) -> Option<f64> {
    match resource {
        Resource::Cpu => limit(budget.cpu.as_ref()),
        Resource::Memory => limit(budget.memory.as_ref()),
        _ => None,
    }
}

/// Whether App `app` of project `project` may have spec `new` (its current spec, if it has
/// one, is in the ledger). Each resource it asks more of is checked against the project's
/// quota, then its cluster's budget, then the organization's.
pub fn check_change(
    ledger: &Ledger<'_>,
    project: &str,
    app: &str,
    new: &AppSpec,
) -> Result<(), FenceRefusal> {
    let Some(fenced) = ledger
        .projects
        .iter()
        .find(|p| name(&p.metadata) == project)
    else {
        return Ok(());
    };
    let defaults = super::effective_defaults(&fenced.spec);
    let defaults = defaults.as_ref();
    let old = apps_of(ledger, project).find(|a| name(&a.metadata) == app);
    let new_parts = component_charges(new, defaults);
    let old_parts = old
        .map(|a| component_charges(&a.spec, defaults))
        .unwrap_or_default();
    let sum =
        |parts: &[(String, Amounts)]| parts.iter().fold(Amounts::default(), |s, (_, c)| s.plus(c));
    let (new_total, old_total) = (sum(&new_parts), sum(&old_parts));
    let uses = project_uses(ledger);
    let before = uses.get(project).copied().unwrap_or_default();
    // The project's use once the change is made: the specs' sum with the App's new charge in
    // place of its old one, or the cluster's count plus what the change adds, whichever is more.
    let added = new_total.zip(&old_total, |n, o| (n - o).max(0.0));
    let after = before
        .declared
        .zip(&old_total, |d, o| (d - o).max(0.0))
        .plus(&new_total)
        .max(&before.reported.plus(&added));
    for resource in Resource::ALL {
        if added.get(resource) <= f64::EPSILON {
            continue;
        }
        let field = || field_of(new, &new_parts, &old_parts, resource);
        let numbers = |scope_use: f64, scope_after: f64| {
            format!(
                "it uses {} and this change adds {} ({} in all)",
                format_amount(resource, scope_use),
                format_amount(resource, added.get(resource)),
                format_amount(resource, scope_after),
            )
        };
        if let Some(quota) = &fenced.spec.quota
            && let Some(limit) = quota_limit(quota, resource)
            && after.get(resource) > limit + 1e-9
        {
            return Err(FenceRefusal {
                code: "quota_exceeded",
                field: field(),
                reason: format!(
                    "project {project}'s quota of {} is {}: {}",
                    resource.field(),
                    format_amount(resource, limit),
                    numbers(before.counted.get(resource), after.get(resource)),
                ),
            });
        }
        let others = |on_cluster: Option<&str>| {
            ledger
                .projects
                .iter()
                .filter(|p| name(&p.metadata) != project)
                .filter(|p| on_cluster.is_none_or(|c| p.spec.cluster == c))
                .filter_map(|p| uses.get(&name(&p.metadata)))
                .map(|used| used.counted.get(resource))
                .sum::<f64>()
        };
        let cluster = ledger
            .clusters
            .iter()
            .find(|c| name(&c.metadata) == fenced.spec.cluster);
        let scopes = [
            cluster.and_then(|c| {
                let budget = c.spec.budget.as_ref()?;
                Some((
                    format!("cluster {}", name(&c.metadata)),
                    budget,
                    Some(name(&c.metadata)),
                ))
            }),
            ledger.org.spec.budget.as_ref().map(|budget| {
                (
                    format!("organization {}", name(&ledger.org.metadata)),
                    budget,
                    None,
                )
            }),
        ];
        for (scope, budget, on_cluster) in scopes.into_iter().flatten() {
            let Some(limit) = budget_limit(budget, resource) else {
                continue;
            };
            let rest = others(on_cluster.as_deref());
            let scope_after = rest + after.get(resource);
            if scope_after > limit + 1e-9 {
                return Err(FenceRefusal {
                    code: "budget_exceeded",
                    field: field(),
                    reason: format!(
                        "the budget of {scope} for {} is {}: {}",
                        resource.field(),
                        format_amount(resource, limit),
                        numbers(rest + before.counted.get(resource), scope_after),
                    ),
                });
            }
        }
    }
    Ok(())
}

/// Whether a new standalone addon fits project `project`. A chart declares nothing the door can
/// read before it is rendered, so the addon is refused only when the project has no room left
/// for a resource its quota limits and every pod takes (CPU and memory requests, pods): the
/// cluster would refuse its pods anyway, and the refusal says so now, with the numbers.
pub fn check_room(ledger: &Ledger<'_>, project: &str) -> Result<(), FenceRefusal> {
    let Some(quota) = ledger
        .projects
        .iter()
        .find(|p| name(&p.metadata) == project)
        .and_then(|p| p.spec.quota.as_ref())
    else {
        return Ok(());
    };
    let used = project_use(ledger, project).counted;
    for resource in [Resource::Cpu, Resource::Memory, Resource::Pods] {
        if let Some(limit) = quota_limit(quota, resource)
            && used.get(resource) >= limit - 1e-9
        {
            return Err(FenceRefusal {
                code: "quota_exceeded",
                field: "spec.project".into(),
                reason: format!(
                    "project {project}'s quota of {} is {}: it uses {}, and an addon's pods \
                     need room",
                    resource.field(),
                    format_amount(resource, limit),
                    format_amount(resource, used.get(resource)),
                ),
            });
        }
    }
    Ok(())
}

/// The App's field that asks for more of `resource`: the request of the component whose charge
/// grew the most, or its `replicas` when the request is a default (the component sets none).
fn field_of(
    spec: &AppSpec,
    new: &[(String, Amounts)],
    old: &[(String, Amounts)],
    resource: Resource,
) -> String {
    let grown = new
        .iter()
        .enumerate()
        .map(|(i, (name, charge))| {
            let before = old
                .iter()
                .find(|(n, _)| n == name)
                .map_or(0.0, |(_, c)| c.get(resource));
            (i, charge.get(resource) - before)
        })
        .max_by(|a, b| a.1.total_cmp(&b.1));
    let Some((i, _)) = grown else {
        return "spec.components".into();
    };
    let own = spec.components[i]
        .workload
        .as_ref()
        .and_then(|w| w.resources.as_ref());
    let named = match resource {
        Resource::Cpu => own.is_some_and(|r| r.cpu_request.is_some()),
        Resource::Memory => own.is_some_and(|r| r.memory_request.is_some()),
        _ => false,
    };
    match (named, resource) {
        (true, Resource::Cpu) => format!("spec.components[{i}].workload.resources.cpuRequest"),
        (true, _) => format!("spec.components[{i}].workload.resources.memoryRequest"),
        (false, _) => format!("spec.components[{i}].workload.replicas"),
    }
}

#[cfg(test)]
#[path = "check_tests.rs"]
mod tests;
