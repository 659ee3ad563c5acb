//! The `kubenest.io/v1alpha1` custom resources of the management cluster (Organization, Cluster,
//! Project, App, AddonDefinition, AddonInstance, StackTemplate): types only, no IO.
