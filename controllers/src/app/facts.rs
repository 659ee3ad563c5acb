//! Gather, the first step of a rollout pass: everything the plan weighs, read once from the App,
//! the caches, the history and the work in flight. Nothing here writes.

use std::collections::BTreeMap;

use kube::ResourceExt;
use kubenest_contracts as wire;
use kubenest_crds::app::{App, AppSpec, AppStatus};
use kubenest_crds::names::annotations;
use kubenest_domain::app::{AppIdentity, ResolvedAddon, build_deploy, resolved_addon};
use kubenest_store::{Deployment, DeploymentStatus, StoreError};
use uuid::Uuid;

use super::holding;
use crate::intents::ObjectKey;
use crate::placement::{self, Placement};
use crate::plane::Plane;
use crate::reconcile::Error;

/// What a rollout pass starts from, besides its [`Target`].
#[derive(Debug)]
pub(super) struct Facts {
    pub generation: i64,
    /// The status as read; every write is a difference from it.
    pub old: AppStatus,
    /// The App holds its cleanup finalizer.
    pub held: bool,
}

/// Whether the App's current generation can be rolled out, and if so what it is.
#[derive(Debug)]
pub(super) enum Target {
    /// The project or cluster is not there or not ready (a condition reason and message).
    Unplaced {
        reason: &'static str,
        message: String,
    },
    /// The spec cannot be built into a deploy.
    Invalid(String),
    /// The deploy, and what stands between it and the cluster.
    Built(Box<Built>),
}

/// A built generation and what the history and the work in flight say about it.
#[derive(Debug)]
pub(super) struct Built {
    pub placement: Placement,
    pub deploy: wire::AppDeploy,
    pub revision: String,
    /// The status already holds this generation's deployment row.
    pub recorded: bool,
    /// The pending rollback row a restored snapshot names, which this generation adopts.
    pub adopt: Option<Deployment>,
    /// The cluster's last snapshot holds something else than this deploy.
    pub differs: bool,
    /// A redeploy token not carried out yet.
    pub redeploy: Option<String>,
}

/// Reads the facts of `app`'s current generation.
pub(super) async fn gather(
    app: &App,
    plane: &Plane,
    key: &ObjectKey,
) -> Result<(Facts, Target), Error> {
    let generation = app.metadata.generation.unwrap_or(0);
    let old = app.status.clone().unwrap_or_default();
    let target = target(app, plane, key, generation, &old).await?;
    let facts = Facts {
        generation,
        held: holding::held(app),
        old,
    };
    Ok((facts, target))
}

async fn target(
    app: &App,
    plane: &Plane,
    key: &ObjectKey,
    generation: i64,
    old: &AppStatus,
) -> Result<Target, Error> {
    let placement = match placement::place(&plane.caches, &key.namespace, &app.spec.project, true) {
        Ok(placement) => placement,
        Err(unplaced) => {
            return Ok(Target::Unplaced {
                reason: unplaced.reason(),
                message: unplaced.message(),
            });
        }
    };
    let identity = AppIdentity {
        app_id: key.uid.clone(),
        name: key.name.clone(),
        project_id: placement.project_id.clone(),
        namespace: placement.namespace.clone(),
        default_verification: plane
            .caches
            .organization(&placement.org_id)
            .and_then(|org| org.spec.verification.clone()),
    };
    let addons = resolve_addons(plane, &key.namespace, &app.spec);
    let deploy = match build_deploy(&identity, &app.spec, &addons) {
        Ok(deploy) => deploy,
        Err(error) => return Ok(Target::Invalid(error.to_string())),
    };
    let revision = deploy.revision.clone();
    tracing::Span::current().record("revision", revision.as_str());
    let recorded = old.recorded_generation == Some(generation)
        && old.revision.as_deref() == Some(revision.as_str())
        && old.deployment_id.is_some();
    let adopt = restored_rollback(app, plane, &placement, &revision, old).await?;
    let redeploy = app
        .annotations()
        .get(annotations::REDEPLOY)
        .filter(|token| old.handled_redeploy.as_deref() != Some(token.as_str()))
        .cloned();
    Ok(Target::Built(Box::new(Built {
        differs: plane
            .intents
            .differs(&key.uid, &revision, &deploy.checksum()),
        placement,
        deploy,
        revision,
        recorded,
        adopt,
        redeploy,
    })))
}

/// The AddonDefinitions the spec names, from the App's namespace or else the system namespace;
/// a missing one is left out, for the build to refuse with its field.
fn resolve_addons(
    plane: &Plane,
    namespace: &str,
    spec: &AppSpec,
) -> BTreeMap<String, ResolvedAddon> {
    let mut resolved = BTreeMap::new();
    for addon in spec.components.iter().filter_map(|c| c.addon.as_ref()) {
        if resolved.contains_key(&addon.definition) {
            continue;
        }
        if let Some(definition) = plane.addon_definition(namespace, &addon.definition) {
            resolved.insert(addon.definition.clone(), resolved_addon(&definition));
        }
    }
    resolved
}

/// The pending rollback deployment the `restored-from` annotation names, when the App's spec is
/// now that rollback's snapshot and the status does not point at it yet. (A rollback to the
/// spec the App already has makes no new generation, so a recorded generation can adopt too.)
async fn restored_rollback(
    app: &App,
    plane: &Plane,
    placement: &Placement,
    revision: &str,
    old: &AppStatus,
) -> Result<Option<Deployment>, Error> {
    let Some(id) = app
        .annotations()
        .get(annotations::RESTORED_FROM)
        .and_then(|id| Uuid::parse_str(id).ok())
    else {
        return Ok(None);
    };
    if old.deployment_id.as_deref() == Some(id.to_string().as_str()) {
        return Ok(None);
    }
    match plane.history.deployment(&placement.org_id, id).await {
        Ok(found)
            if found.deployment.revision == revision
                && found.deployment.status == DeploymentStatus::Pending
                && Some(found.deployment.app_id.as_str()) == app.uid().as_deref() =>
        {
            Ok(Some(found.deployment))
        }
        Ok(_) | Err(StoreError::NotFound) => Ok(None),
        Err(other) => Err(other.into()),
    }
}
