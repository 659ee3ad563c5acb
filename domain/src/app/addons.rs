//! An AddonDefinition as the build of an App needs it.

use kubenest_contracts as wire;
use kubenest_crds::addon::AddonDefinition;

use super::build::ResolvedAddon;

/// The chart, exports and default values of `definition`, in the wire's shape.
pub fn resolved_addon(definition: &AddonDefinition) -> ResolvedAddon {
    let chart = &definition.spec.chart;
    ResolvedAddon {
        chart: wire::ChartRef {
            repository: chart.repository.clone(),
            name: chart.name.clone(),
            version: chart.version.clone(),
        },
        exports: definition.spec.exports.clone(),
        default_values: definition.spec.default_values.clone(),
    }
}
