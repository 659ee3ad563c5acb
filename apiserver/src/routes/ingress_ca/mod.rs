//! A project's ingress CA: the `kubernetes.io/tls` Secret `kubenest-ingress-ca` in its
//! namespace, from which the agent issues a certificate for every ingress with `tls` and no
//! `tls_secret`. Set like the registry credentials ([`super::registry`]): fail-closed through
//! the hub, the key goes straight to the cluster in a `secret.set` and is never stored, logged
//! or echoed by the control plane. The Project records that it has a CA (`spec.ingressCa`) and,
//! in an annotation, the CA's certificate, which is public and which `GET` answers with.

pub use kubenest_api::ingress_ca::{IngressCaBody, IngressCaRemoved, IngressCaResponse};

pub mod check;

use axum::Json;
use axum::extract::{Path, State};
use kube::ResourceExt;
use kube::api::{Api, Patch};
use kubenest_contracts as wire;
use kubenest_crds::App;
use kubenest_crds::project::Project;
use serde_json::json;

use super::secret_place::SecretPlace;
use super::{IdPath, Scoped, actor_annotations, not_in_git, patch_params};
use crate::authz::{Caller, Need};
use crate::error::{ApiError, ApiResult};
use crate::extract::Body;
use crate::k8s;
use crate::state::AppState;

/// The annotation of a Project holding its ingress CA's certificate (PEM; never the key).
pub use kubenest_crds::names::annotations::INGRESS_CA_CERTIFICATE as CERTIFICATE_ANNOTATION;

/// Where the project's CA Secret is: written as credentials, so no chart's pods may read it.
fn place(scoped: &Scoped<Project>) -> ApiResult<SecretPlace> {
    let target = wire::SecretTarget {
        namespace: wire::Name::new(&scoped.object.spec.namespace),
        secret: wire::Name::new(wire::INGRESS_CA_SECRET),
        app_id: None,
        credentials: true,
    };
    SecretPlace::of(scoped, "project", target)
}

/// Records on the Project that it has a CA with `certificate`, or (None) none.
async fn record(
    state: &AppState,
    caller: &Caller,
    scoped: &Scoped<Project>,
    certificate: Option<&str>,
) -> ApiResult<()> {
    let mut annotations = serde_json::Map::new();
    for (key, value) in actor_annotations(caller) {
        annotations.insert(key, value.into());
    }
    annotations.insert(CERTIFICATE_ANNOTATION.to_owned(), certificate.into());
    // `false` is written as no field at all, as the CRD type leaves it.
    let ingress_ca = certificate.map(|_| true);
    let patch = json!({
        "metadata": {"annotations": annotations},
        "spec": {"ingressCa": ingress_ca},
    });
    let api: Api<Project> = Api::namespaced(state.client().clone(), &scoped.namespace());
    api.patch(
        &scoped.object.name_any(),
        &patch_params(),
        &Patch::Merge(&patch),
    )
    .await?;
    Ok(())
}

/// The project's CA as recorded; 404 when it has none.
fn recorded(scoped: &Scoped<Project>) -> ApiResult<IngressCaResponse> {
    let certificate = scoped
        .object
        .annotations()
        .get(CERTIFICATE_ANNOTATION)
        .filter(|_| scoped.object.spec.ingress_ca)
        .ok_or_else(|| ApiError::not_found("ingress CA"))?;
    let about = check::describe(certificate).ok_or_else(|| {
        ApiError::internal(format!(
            "project {}: annotation {CERTIFICATE_ANNOTATION} holds no certificate",
            scoped.object.name_any()
        ))
    })?;
    Ok(IngressCaResponse {
        project: scoped.object.name_any(),
        secret: wire::INGRESS_CA_SECRET.to_owned(),
        certificate: certificate.clone(),
        subject: about.subject,
        not_after: about.not_after,
    })
}

/// The project's ingress CA certificate (anyone who may read the project).
pub async fn get(
    State(state): State<AppState>,
    caller: Caller,
    Path(path): Path<IdPath>,
) -> ApiResult<Json<IngressCaResponse>> {
    let scoped = super::project(&state, &caller, &path.id).await?;
    scoped.require(Need::Read, "project")?;
    recorded(&scoped).map(Json)
}

/// Sets the project's ingress CA (admins), replacing an earlier one. Fails closed: a non-2xx
/// unless the agent confirms it stored the Secret; then the Project records the CA.
pub async fn put(
    State(state): State<AppState>,
    caller: Caller,
    Path(path): Path<IdPath>,
    Body(body): Body<IngressCaBody>,
) -> ApiResult<Json<IngressCaResponse>> {
    let scoped = super::project(&state, &caller, &path.id).await?;
    scoped.require(Need::Admin, "project")?;
    let now = chrono::Utc::now().timestamp();
    let ca = check::check(&body.certificate, &body.private_key, now)?;
    let place = place(&scoped)?;
    // Checked before the key leaves: a change the Project cannot take is refused first.
    if !scoped.object.spec.ingress_ca {
        not_in_git(
            &scoped.object,
            "project",
            "Set spec.ingressCa to true in its manifest in Git, then set the CA here.",
        )?;
    }
    let values = [
        ("tls.crt".to_owned(), ca.certificate.clone()),
        ("tls.key".to_owned(), ca.private_key),
    ]
    .into();
    let command = place.set(wire::SecretKind::Tls, values);
    state.secrets().send(command).await?;
    record(&state, &caller, &scoped, Some(&ca.certificate)).await?;
    Ok(Json(IngressCaResponse {
        project: scoped.object.name_any(),
        secret: wire::INGRESS_CA_SECRET.to_owned(),
        certificate: ca.certificate,
        subject: ca.about.subject,
        not_after: ca.about.not_after,
    }))
}

/// The Apps of the project whose ingress takes its certificate from the CA, with the
/// component: `shop (web)`.
async fn apps_using(state: &AppState, scoped: &Scoped<Project>) -> ApiResult<Vec<String>> {
    let name = scoped.object.name_any();
    let apps: Vec<App> = k8s::list_in(state.client(), &scoped.namespace()).await?;
    Ok(apps
        .iter()
        .filter(|app| app.spec.project == name)
        .filter_map(|app| {
            let components: Vec<&str> = app
                .spec
                .components
                .iter()
                .filter(|c| {
                    c.workload
                        .as_ref()
                        .and_then(|w| w.ingress.as_ref())
                        .is_some_and(|i| i.tls && i.tls_secret.is_none())
                })
                .map(|c| c.name.as_str())
                .collect();
            (!components.is_empty())
                .then(|| format!("{} ({})", app.name_any(), components.join(", ")))
        })
        .collect())
}

/// Removes the project's ingress CA (admins): refused while an App's ingress takes its
/// certificate from it; otherwise the Secret on the cluster, then the record on the Project.
/// Fails closed; 404 when the project has none.
pub async fn delete(
    State(state): State<AppState>,
    caller: Caller,
    Path(path): Path<IdPath>,
) -> ApiResult<Json<IngressCaRemoved>> {
    let scoped = super::project(&state, &caller, &path.id).await?;
    scoped.require(Need::Admin, "project")?;
    if !scoped.object.spec.ingress_ca {
        return Err(ApiError::not_found("ingress CA"));
    }
    not_in_git(
        &scoped.object,
        "project",
        "Remove spec.ingressCa from its manifest in Git.",
    )?;
    let using = apps_using(&state, &scoped).await?;
    if !using.is_empty() {
        return Err(ApiError::conflict(
            "ingress_ca_in_use",
            format!(
                "the ingresses of these Apps get their certificates from the project's CA \
                 (tls without tls_secret): {}; name a certificate's Secret in their \
                 tls_secret, or turn their tls off, first",
                using.join(", ")
            ),
        ));
    }
    let place = place(&scoped)?;
    state.secrets().send(place.delete(Vec::new())).await?;
    record(&state, &caller, &scoped, None).await?;
    Ok(Json(IngressCaRemoved {
        project: scoped.object.name_any(),
        secret: wire::INGRESS_CA_SECRET.to_owned(),
    }))
}
