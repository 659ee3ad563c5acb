//! Finalizers on the agent's own objects, added and removed with guarded JSON patches (a `test`
//! operation first), so a concurrent change of the list is never overwritten.

use kube::api::{Api, Patch, PatchParams};
use serde_json::{Value, json};

/// Adds `finalizer` unless `present` already holds it.
pub async fn hold<K>(
    api: &Api<K>,
    name: &str,
    present: &[String],
    finalizer: &str,
) -> Result<(), kube::Error>
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    if present.iter().any(|f| f == finalizer) {
        return Ok(());
    }
    let patch = if present.is_empty() {
        json!([{"op": "add", "path": "/metadata/finalizers", "value": [finalizer]}])
    } else {
        json!([
            {"op": "test", "path": "/metadata/finalizers", "value": present},
            {"op": "add", "path": "/metadata/finalizers/-", "value": finalizer},
        ])
    };
    apply(api, name, patch).await
}

/// Removes `finalizer`; an object already gone is fine.
pub async fn release<K>(
    api: &Api<K>,
    name: &str,
    present: &[String],
    finalizer: &str,
) -> Result<(), kube::Error>
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    let Some(index) = present.iter().position(|f| f == finalizer) else {
        return Ok(());
    };
    let path = format!("/metadata/finalizers/{index}");
    let patch = json!([
        {"op": "test", "path": path, "value": finalizer},
        {"op": "remove", "path": path},
    ]);
    match apply(api, name, patch).await {
        Err(kube::Error::Api(status)) if status.code == 404 => Ok(()),
        other => other,
    }
}

async fn apply<K>(api: &Api<K>, name: &str, patch: Value) -> Result<(), kube::Error>
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    let patch: json_patch::Patch =
        serde_json::from_value(patch).map_err(kube::Error::SerdeError)?;
    api.patch(name, &PatchParams::default(), &Patch::<()>::Json(patch))
        .await?;
    Ok(())
}
