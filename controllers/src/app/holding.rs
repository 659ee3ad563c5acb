//! The App's cleanup finalizer: held before anything is sent, released once the cluster side is
//! gone (the guarded patches of [`kubenest_runtime::finalizer`]); and the App's other guarded
//! JSON patches (a rollback's).

use kube::ResourceExt;
use kube::api::{Api, Patch, PatchParams};
use kubenest_crds::app::App;
use kubenest_crds::names::finalizers;
use kubenest_runtime::finalizer;

use crate::intents::ObjectKey;
use crate::plane::Plane;
use crate::reconcile::{At, Error};

/// Whether the App holds the cleanup finalizer.
pub(super) fn held(app: &App) -> bool {
    app.finalizers().iter().any(|f| f == finalizers::APP)
}

/// Adds the cleanup finalizer.
/// The App controller does this itself (not with [`finalizer::hold`], which adds it in a
/// reconcile of its own) so that the deployment row of a new App is written in its first
/// reconcile, before any write to the API server: the row is the durable intent.
pub(super) async fn hold(app: &App, plane: &Plane, key: &ObjectKey) -> Result<(), Error> {
    let api = Api::<App>::namespaced(plane.client.clone(), &key.namespace);
    finalizer::add(&api, &key.name, app.finalizers(), finalizers::APP)
        .await
        .at("holding the finalizer of App", key)
}

/// Removes the cleanup finalizer once the cluster side is gone.
pub(super) async fn release(app: &App, plane: &Plane, key: &ObjectKey) -> Result<(), Error> {
    let api = Api::<App>::namespaced(plane.client.clone(), &key.namespace);
    finalizer::release(&api, &key.name, app.finalizers(), finalizers::APP)
        .await
        .at("releasing the finalizer of App", key)
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
