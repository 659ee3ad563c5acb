//! A project's registry credentials as the agent reads them on the cluster: the pull Secret
//! `project.ensure` put on the namespace's `default` ServiceAccount, which the workloads pull
//! with, the builds push with and `oci://` chart renders pull with. Only the kube client is
//! needed, so the modules that read them (builds, addons) share this without the agent's
//! `Context`.

use k8s_openapi::api::core::v1::{Secret, ServiceAccount};
use kube::api::Api;
use kubenest_contracts as wire;

/// The name of the project's registry Secret in `namespace`; `None` when it has none.
pub async fn name(client: &kube::Client, namespace: &str) -> Option<String> {
    let accounts = Api::<ServiceAccount>::namespaced(client.clone(), namespace);
    let account = accounts
        .get_opt("default")
        .await
        .inspect_err(|error| tracing::debug!(%error, "reading the namespace's pull secret"))
        .ok()??;
    account
        .image_pull_secrets?
        .into_iter()
        .next()
        .map(|r| r.name)
}

/// The `.dockerconfigjson` of the project's registry Secret in `namespace` (see [`name`]): the
/// credentials a chart pull from that registry uses. `None` when the project has none.
pub async fn docker_config(client: &kube::Client, namespace: &str) -> Option<Vec<u8>> {
    let name = name(client, namespace).await?;
    let secret = Api::<Secret>::namespaced(client.clone(), namespace)
        .get_opt(&name)
        .await
        .inspect_err(|error| tracing::debug!(%error, "reading the project's registry secret"))
        .ok()??;
    secret
        .data?
        .remove(wire::DOCKER_CONFIG_JSON_KEY)
        .map(|bytes| bytes.0)
}
