//! The `kubenest.io/v1alpha1` custom resources of the management cluster: types only, no IO.
//!
//! Organization (cluster-scoped) and, in each organization's namespace, Cluster, Project, App,
//! AddonInstance and StackTemplate; AddonDefinition (the catalog) in the system namespace. Each
//! has a status subresource with conditions, printer columns, a short name, the `kubenest`
//! category (`kubectl get kubenest`), and CEL rules for what can be checked statically
//! (immutable references, exactly-one-of choices, token versions only rising).
//!
//! They read as Flux's do: a description on the kind and every field (`kubectl explain`), `Ready`
//! and `Status` columns from the `Ready` condition, a top-level `status.observedGeneration`, and
//! conditions and named lists (an App's components) as map lists, so a server-side apply of one
//! item leaves the others and a name appears once.
//!
//! The generated YAML is committed under `crds/yaml/`; regenerate it with
//! `cargo run -p kubenest-crds --bin crdgen` (a test fails when it drifts).

// `#[kube(printcolumn(..., type_ = "string", ...))]` repeats arguments across columns by design.
#![allow(clippy::duplicated_attributes)]

pub mod addon;
pub mod app;
pub mod cluster;
pub mod common;
pub mod fences;
pub mod names;
pub mod observed;
pub mod organization;
pub mod project;
pub mod template;
pub mod verification;

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::CustomResourceExt;

pub use addon::{AddonDefinition, AddonInstance};
pub use app::App;
pub use cluster::Cluster;
pub use organization::Organization;
pub use project::Project;
pub use template::StackTemplate;

/// The API group.
pub const GROUP: &str = "kubenest.io";

/// Every CRD, in the order to apply them.
pub fn all() -> Vec<CustomResourceDefinition> {
    vec![
        Organization::crd(),
        Cluster::crd(),
        Project::crd(),
        App::crd(),
        AddonDefinition::crd(),
        AddonInstance::crd(),
        StackTemplate::crd(),
    ]
}

/// Every CRD as (file name, YAML).
pub fn yaml_files() -> Result<Vec<(String, String)>, serde_yaml::Error> {
    all()
        .into_iter()
        .map(|crd| {
            let name = format!("{}.yaml", crd.metadata.name.clone().unwrap_or_default());
            Ok((name, serde_yaml::to_string(&crd)?))
        })
        .collect()
}
