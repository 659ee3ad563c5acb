//! The AddonDefinitions an App names, looked up in the caches.

use std::collections::BTreeMap;

use kubenest_crds::app::AppSpec;
use kubenest_domain::app::{ResolvedAddon, resolved_addon};

use crate::plane::Plane;

/// The AddonDefinitions the spec names, from the App's namespace or else the system namespace;
/// a missing one is left out, for the build to refuse with its field.
pub(super) fn resolve_addons(
    plane: &Plane,
    namespace: &str,
    spec: &AppSpec,
) -> BTreeMap<String, ResolvedAddon> {
    let mut resolved = BTreeMap::new();
    for component in &spec.components {
        let Some(addon) = &component.addon else {
            continue;
        };
        if resolved.contains_key(&addon.definition) {
            continue;
        }
        if let Some(definition) = plane.addon_definition(namespace, &addon.definition) {
            resolved.insert(addon.definition.clone(), resolved_addon(&definition));
        }
    }
    resolved
}
