//! `kubenest-controllers`: the management-plane controllers and the PostgreSQL history.
//!
//! So far: [`history`], the store of deployments, addon revisions and the audit log, and the
//! pure core of the App controller ([`app`]): revision hashing and building `app.deploy`; the
//! Organization controller ([`organization`]) with the kubenest roles as Kubernetes RBAC
//! ([`rbac`]).

pub mod addon;
pub mod app;
pub mod cluster;
pub mod conditions;
pub mod history;
pub mod hub_client;
pub mod intents;
pub mod leader;
pub mod organization;
pub mod placement;
pub mod plane;
pub mod project;
pub mod rbac;
pub mod run;
pub mod status;

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, Patch, PatchParams};

/// Applies every kubenest CRD (charts normally do; tests and the local environment use this).
pub async fn ensure_crds(client: &kube::Client) -> Result<(), kube::Error> {
    let api: Api<CustomResourceDefinition> = Api::all(client.clone());
    let params = PatchParams::apply(rbac::FIELD_MANAGER).force();
    for crd in kubenest_crds::all() {
        let name = crd.metadata.name.clone().unwrap_or_default();
        api.patch(&name, &params, &Patch::Apply(&crd)).await?;
    }
    Ok(())
}
