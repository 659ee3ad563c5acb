//! What the chart would install on the management cluster: the system namespace and the addon
//! catalog.

use std::time::{Duration, Instant};

use anyhow::Context as _;
use k8s_openapi::api::core::v1::Namespace;
use kube::api::{Api, DynamicObject, Patch, PatchParams};
use kube::core::GroupVersionKind;
use kube::discovery::ApiResource;
use serde_json::{Value, json};

use super::SYSTEM_NAMESPACE;

/// The addon catalog's AddonDefinitions (the chart installs the same file).
const ADDON_DEFINITIONS: &str =
    include_str!("../../../charts/kubenest/files/addon-definitions.yaml");
const FIELD_MANAGER: &str = "kubenest-dev";

pub(super) async fn apply_namespace(client: &kube::Client, name: &str) -> anyhow::Result<()> {
    let namespace = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}});
    Api::<Namespace>::all(client.clone())
        .patch(
            name,
            &PatchParams::apply(FIELD_MANAGER).force(),
            &Patch::Apply(&namespace),
        )
        .await?;
    Ok(())
}

/// Applies the catalog's AddonDefinitions into the system namespace once the controllers have
/// installed the CRD. Persistence is off by default here: the definitions serve every cluster of
/// the system, and the kwok clusters have no storage provisioner (a claim would stay Pending and
/// its pod unscheduled). The real-node cluster (`edge`) does bind volumes (the test kit's
/// local-path provisioner), so Apps there ask for persistence in their values, as the demo App
/// does ([`crate::tour::demo::app`]).
pub(super) async fn install_catalog(client: &kube::Client) -> anyhow::Result<()> {
    let resource = ApiResource::from_gvk(&GroupVersionKind::gvk(
        "kubenest.io",
        "v1alpha1",
        "AddonDefinition",
    ));
    let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), SYSTEM_NAMESPACE, &resource);
    let deadline = Instant::now() + Duration::from_secs(60);
    let documents = serde_yaml::Deserializer::from_str(ADDON_DEFINITIONS)
        .map(<Value as serde::Deserialize>::deserialize)
        .collect::<Result<Vec<_>, _>>()?;
    for mut definition in documents {
        if let Some(persistence) = definition.pointer_mut("/spec/defaultValues/persistence") {
            persistence["enabled"] = json!(false);
        }
        let name = definition["metadata"]["name"]
            .as_str()
            .context("an AddonDefinition without a name")?
            .to_owned();
        loop {
            // Until the CRD is installed and served this is a 404.
            match api
                .patch(
                    &name,
                    &PatchParams::apply(FIELD_MANAGER).force(),
                    &Patch::Apply(&definition),
                )
                .await
            {
                Ok(_) => break,
                Err(e) if Instant::now() < deadline => {
                    tracing::debug!("AddonDefinition {name} not applied yet: {e}");
                    tokio::time::sleep(Duration::from_millis(250)).await;
                }
                Err(e) => return Err(e).context(format!("apply AddonDefinition {name}")),
            }
        }
    }
    Ok(())
}
