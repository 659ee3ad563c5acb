//! Reads served from the API server's [`crate::mirror`] (its watches), with what a reader does
//! when the mirror has not got what it asks for: the App list, the project of a create, the
//! fence check and the rules webhook read here; everything else reads the API server.

use std::sync::Arc;

use kube::ResourceExt;
use kube::api::{Api, ListParams};
use kubenest_crds::App;
use kubenest_crds::project::Project;

use super::{OrgView, Scoped};
use crate::authz::{self, Caller};
use crate::error::ApiResult;
use crate::k8s;
use crate::state::AppState;

/// The project `id` with the caller's role on it, as the [`crate::mirror`] holds them; `None`
/// when the mirror has not got it (or its organization).
pub fn project(state: &AppState, caller: &Caller, id: &str) -> Option<Scoped<Project>> {
    let project = state.mirror().project(id)?;
    let org_name = k8s::org_name_of(&project.namespace()?)?.to_owned();
    let objects = state.mirror().org(&org_name)?;
    crate::audit::note_org(&org_name);
    let cluster = objects
        .clusters
        .iter()
        .find(|c| c.name_any() == project.spec.cluster)
        .map(|c| (**c).clone());
    let org = (*objects.org).clone();
    let role = authz::role_at(caller, &org, cluster.as_ref(), Some(&project));
    Some(Scoped {
        object: (*project).clone(),
        org,
        cluster,
        project: Some((*project).clone()),
        role,
    })
}

/// Organization `name` as the [`crate::mirror`] holds it, if the caller sees it there; `None`
/// when the mirror has not got it or the caller sees it not (the caller then asks
/// [`super::org_view`], which reads the API server and answers 404 for good).
pub fn org_view(state: &AppState, caller: &Caller, name: &str) -> Option<OrgView> {
    let (org, clusters, projects) = state.mirror().org(name)?.owned();
    let view = OrgView {
        org,
        namespace: k8s::namespace_of(name).ok()?,
        clusters,
        projects,
    };
    authz::sees_org(caller, &view.org, &view.clusters, &view.projects).then(|| {
        crate::audit::note_org(name);
        view
    })
}

/// The Apps of `namespace`: the mirror's, or a list from the API server until the mirror has
/// its first one.
pub async fn apps_in(state: &AppState, namespace: &str) -> ApiResult<Vec<Arc<App>>> {
    if let Some(apps) = state.mirror().apps_in(namespace) {
        return Ok(apps);
    }
    let api: Api<App> = Api::namespaced(state.client().clone(), namespace);
    let listed = api.list(&ListParams::default()).await?;
    Ok(listed.items.into_iter().map(Arc::new).collect())
}
