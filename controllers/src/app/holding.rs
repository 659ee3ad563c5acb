//! The App's cleanup finalizer: held before anything is sent, released once the cluster side is
//! gone. Both writes are JSON patches guarded by a `test` of the list, so a concurrent change of
//! the finalizers is never lost.

use kube::ResourceExt;
use kube::api::{Api, Patch, PatchParams};
use kubenest_crds::app::App;
use kubenest_crds::names::finalizers;
use serde_json::json;

use crate::intents::ObjectKey;
use crate::plane::Plane;
use crate::reconcile::Error;

/// Whether the App holds the cleanup finalizer.
pub(super) fn held(app: &App) -> bool {
    app.finalizers().iter().any(|f| f == finalizers::APP)
}

/// Adds the cleanup finalizer.
/// The App controller does this itself (not with kube-runtime's `finalizer` helper, which adds it
/// in a reconcile of its own) so that the deployment row of a new App is written in its first
/// reconcile, before any write to the API server: the row is the durable intent.
pub(super) async fn hold(app: &App, plane: &Plane, key: &ObjectKey) -> Result<(), Error> {
    let patch = match app.metadata.finalizers.as_deref() {
        None | Some([]) => json!([
            {"op": "test", "path": "/metadata/finalizers", "value": app.metadata.finalizers},
            {"op": "add", "path": "/metadata/finalizers", "value": [finalizers::APP]},
        ]),
        Some(existing) => json!([
            {"op": "test", "path": "/metadata/finalizers", "value": existing},
            {"op": "add", "path": "/metadata/finalizers/-", "value": finalizers::APP},
        ]),
    };
    patch_json(plane, key, patch).await
}

/// Removes the cleanup finalizer once the cluster side is gone.
pub(super) async fn release(app: &App, plane: &Plane, key: &ObjectKey) -> Result<(), Error> {
    let Some(index) = app.finalizers().iter().position(|f| f == finalizers::APP) else {
        return Ok(());
    };
    let path = format!("/metadata/finalizers/{index}");
    let patch = json!([
        {"op": "test", "path": path, "value": finalizers::APP},
        {"op": "remove", "path": path},
    ]);
    match patch_json(plane, key, patch).await {
        // Already gone with the App.
        Err(Error::Kube(kube::Error::Api(status))) if status.code == 404 => Ok(()),
        other => other,
    }
}

/// Applies a JSON patch to the App object.
pub(super) async fn patch_json(
    plane: &Plane,
    key: &ObjectKey,
    patch: serde_json::Value,
) -> Result<(), Error> {
    let patch: json_patch::Patch =
        serde_json::from_value(patch).map_err(|e| Error::Invalid(e.to_string()))?;
    Api::<App>::namespaced(plane.client.clone(), &key.namespace)
        .patch(
            &key.name,
            &PatchParams::default(),
            &Patch::<()>::Json(patch),
        )
        .await?;
    Ok(())
}
