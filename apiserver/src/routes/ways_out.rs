//! The ways out of an App or standalone addon that does not converge, as the requests a 409
//! lists ([`kubenest_domain::app::ways_out`] decides which are allowed).

use kubenest_crds::addon::AddonInstance;
use kubenest_domain::app::ways_out::{self, AddonChange};

use crate::error::{ApiError, ApiResult, WayOut, WayOutAction};
use crate::k8s;

/// The domain's ways out as requests on the object at `base` (`/api/v1/apps/{id}`).
pub fn requests(base: &str, ways: Vec<ways_out::WayOut>) -> Vec<WayOut> {
    ways.into_iter()
        .map(|way| {
            let (action, method, path, components) = match way {
                ways_out::WayOut::Rollback => (
                    WayOutAction::Rollback,
                    "POST",
                    format!("{base}/rollback"),
                    vec![],
                ),
                ways_out::WayOut::Patch { components } => {
                    (WayOutAction::Patch, "PATCH", base.to_owned(), components)
                }
                ways_out::WayOut::Pause => {
                    (WayOutAction::Pause, "POST", format!("{base}/pause"), vec![])
                }
                ways_out::WayOut::Delete => {
                    (WayOutAction::Delete, "DELETE", base.to_owned(), vec![])
                }
            };
            WayOut {
                action,
                method: method.to_owned(),
                path,
                components,
            }
        })
        .collect()
}

/// Refuses a change that piles onto a failed standalone addon ([`ways_out::admit_addon`]),
/// listing the ways out.
pub fn admit_addon(addon: &AddonInstance, change: AddonChange) -> ApiResult<()> {
    let status = addon.status.as_ref();
    let failed = status.and_then(|s| s.phase.as_deref()) == Some("Failed");
    let Err(ways) = ways_out::admit_addon(failed, change) else {
        return Ok(());
    };
    let why = status
        .and_then(|s| s.conditions.iter().find(|c| c.type_ == "Ready"))
        .map(|c| c.message.clone())
        .or_else(|| status.map(|s| s.message.clone()))
        .unwrap_or_default();
    let base = format!("/api/v1/addon-instances/{}", k8s::uid(addon));
    Err(ApiError::stuck(
        "addon_failed",
        format!(
            "the addon is Failed ({why}); this change changes neither its version nor its \
             values, so it would only repeat the failure. The ways out: roll back to a \
             recorded revision, change its version or values, or delete it"
        ),
        requests(&base, ways),
    ))
}
