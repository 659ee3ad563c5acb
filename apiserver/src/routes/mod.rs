//! The routes, and what they share: loading an object with the caller's role on it, writing
//! as the API's field manager with the actor recorded, and membership changes.

pub use kubenest_api::common::{IdPath, OrgPath};
pub use kubenest_api::members::{MemberBody, MemberPath, MemberView};

pub mod addons;
pub mod alerts;
pub mod apps;
pub mod audit;
pub mod clusters;
pub mod fences;
pub mod ingress_ca;
pub mod mirrored;
pub mod orgs;
pub mod projects;
pub mod registry;
pub mod removal;
pub mod secret_place;
pub mod session;
pub mod stream;
pub mod templates;
pub mod users;
pub mod ways_out;

pub use crate::model::api_field;

use std::collections::BTreeMap;

use kube::api::{Api, PostParams};
use kube::{Resource, ResourceExt};
use kubenest_crds::cluster::Cluster;
use kubenest_crds::common::{Member, Role};
use kubenest_crds::names::{annotations, field_managers};
use kubenest_crds::organization::Organization;
use kubenest_crds::project::Project;
use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::authz::{self, Caller, Need};
use crate::error::{ApiError, ApiResult};
use crate::k8s;
use crate::state::AppState;

/// A membership as the API answers it.
pub fn member_view(member: &Member) -> MemberView {
    MemberView {
        user: member.user.clone(),
        user_id: member.user_id.clone(),
        role: member.role,
    }
}

/// The membership of the user named `name` with `role`, or a 422 on `field` if there is no
/// such user (or it is disabled).
pub async fn new_member(
    state: &AppState,
    field: &str,
    name: &str,
    role: Role,
) -> ApiResult<Member> {
    let user = if session::is_username(name) {
        state.accounts().user(name).await?
    } else {
        None
    };
    match user {
        Some(user) if user.disabled_at.is_none() => Ok(Member {
            user: user.username,
            user_id: Some(user.id.to_string()),
            role,
        }),
        Some(_) => Err(ApiError::invalid(
            field,
            format!("user {name:?} is disabled"),
        )),
        None => Err(ApiError::missing(field, format!("no user named {name:?}"))),
    }
}

/// An object with where it sits and the caller's role on it.
#[derive(Debug)]
pub struct Scoped<K> {
    pub object: K,
    pub org: Organization,
    pub cluster: Option<Cluster>,
    pub project: Option<Project>,
    pub role: Option<Role>,
}

impl<K> Scoped<K> {
    /// Checks the caller's role for `need`; no role at all is a 404 for `what`.
    pub fn require(&self, need: Need, what: &str) -> ApiResult<Role> {
        authz::require(self.role, need, what)
    }

    pub fn namespace(&self) -> String {
        k8s::namespace_of(&self.org.name_any()).unwrap_or_default()
    }
}

/// The organization of a namespaced object.
async fn org_of<K: ResourceExt>(state: &AppState, object: &K) -> ApiResult<Organization> {
    let namespace = object.namespace().unwrap_or_default();
    let name = k8s::org_name_of(&namespace).ok_or_else(|| ApiError::not_found("organization"))?;
    crate::audit::note_org(name);
    k8s::organization(state.client(), name)
        .await?
        .ok_or_else(|| ApiError::not_found("organization"))
}

async fn get_in<K>(state: &AppState, namespace: &str, name: &str) -> ApiResult<Option<K>>
where
    K: Resource<DynamicType = (), Scope = kube::core::NamespaceResourceScope>
        + Clone
        + DeserializeOwned
        + std::fmt::Debug,
{
    let api: Api<K> = Api::namespaced(state.client().clone(), namespace);
    Ok(api.get_opt(name).await?)
}

/// A cluster by id with the caller's role on it.
pub async fn cluster(state: &AppState, caller: &Caller, id: &str) -> ApiResult<Scoped<Cluster>> {
    let cluster: Cluster = k8s::by_id(state.client(), state.index(), k8s::Kind::Cluster, id)
        .await?
        .ok_or_else(|| ApiError::not_found("cluster"))?;
    let org = org_of(state, &cluster).await?;
    let role = authz::role_at(caller, &org, Some(&cluster), None);
    Ok(Scoped {
        object: cluster,
        org,
        cluster: None,
        project: None,
        role,
    })
}

/// A project's cluster and the caller's role on the project.
async fn scope_project<K>(
    state: &AppState,
    caller: &Caller,
    object: K,
    org: Organization,
    project: Project,
) -> ApiResult<Scoped<K>> {
    let namespace = project.namespace().unwrap_or_default();
    let cluster: Option<Cluster> = get_in(state, &namespace, &project.spec.cluster).await?;
    let role = authz::role_at(caller, &org, cluster.as_ref(), Some(&project));
    Ok(Scoped {
        object,
        org,
        cluster,
        project: Some(project),
        role,
    })
}

/// A project by id with the caller's role on it.
pub async fn project(state: &AppState, caller: &Caller, id: &str) -> ApiResult<Scoped<Project>> {
    let project: Project = k8s::by_id(state.client(), state.index(), k8s::Kind::Project, id)
        .await?
        .ok_or_else(|| ApiError::not_found("project"))?;
    let org = org_of(state, &project).await?;
    scope_project(state, caller, project.clone(), org, project).await
}

/// The project `id` (a body's `project_id`) if the caller may create in it: an unknown or
/// invisible project is a 404 on `project_id`, a role too weak a 403.
pub async fn writable_project(
    state: &AppState,
    caller: &Caller,
    id: &str,
) -> ApiResult<Scoped<Project>> {
    let no_such = || ApiError::missing("project_id", "no such project");
    // The mirror's project when it lets the caller write there: a create then makes no reads
    // of the management cluster before its write. Anything else asks the API server.
    if let Some(project) = mirrored::project(state, caller, id)
        && project.require(Need::Write, "project").is_ok()
    {
        return Ok(project);
    }
    let project = match project(state, caller, id).await {
        Ok(p) if p.role.is_some() => p,
        Ok(_) => return Err(no_such()),
        Err(e) if e.status == 404 => return Err(no_such()),
        Err(e) => return Err(e),
    };
    project.require(Need::Write, "project")?;
    Ok(project)
}

/// An object that belongs to a project (`spec.project`) by id, with the caller's role on it.
pub async fn in_project<K>(
    state: &AppState,
    caller: &Caller,
    kind: k8s::Kind,
    id: &str,
    project_of: impl Fn(&K) -> &str,
) -> ApiResult<Scoped<K>>
where
    K: Resource<DynamicType = (), Scope = kube::core::NamespaceResourceScope>
        + Clone
        + DeserializeOwned
        + std::fmt::Debug,
{
    let object: K = k8s::by_id(state.client(), state.index(), kind, id)
        .await?
        .ok_or_else(|| ApiError::not_found(kind.noun()))?;
    let org = org_of(state, &object).await?;
    let namespace = object.meta().namespace.clone().unwrap_or_default();
    let Some(project) = get_in::<Project>(state, &namespace, project_of(&object)).await? else {
        // A project deleted under its objects: only organization-wide roles still reach them.
        let role = authz::role_at(caller, &org, None, None);
        return Ok(Scoped {
            object,
            org,
            cluster: None,
            project: None,
            role,
        });
    };
    scope_project(state, caller, object, org, project).await
}

/// An organization the caller sees at any scope, with everything needed to say what they see.
#[derive(Debug)]
pub struct OrgView {
    pub org: Organization,
    pub namespace: String,
    pub clusters: Vec<Cluster>,
    pub projects: Vec<Project>,
}

impl OrgView {
    /// The caller's role on a cluster of this organization.
    pub fn cluster_role(&self, caller: &Caller, cluster: &Cluster) -> Option<Role> {
        authz::role_at(caller, &self.org, Some(cluster), None)
    }

    /// The caller's role on a project of this organization.
    pub fn project_role(&self, caller: &Caller, project: &Project) -> Option<Role> {
        let cluster = self
            .clusters
            .iter()
            .find(|c| c.name_any() == project.spec.cluster);
        authz::role_at(caller, &self.org, cluster, Some(project))
    }

    /// The caller's role on the project named `name`.
    pub fn role_in_project(&self, caller: &Caller, name: &str) -> Option<Role> {
        match self.projects.iter().find(|p| p.name_any() == name) {
            Some(project) => self.project_role(caller, project),
            None => authz::role_at(caller, &self.org, None, None),
        }
    }
}

/// Loads an organization the caller sees (404 otherwise).
pub async fn org_view(state: &AppState, caller: &Caller, name: &str) -> ApiResult<OrgView> {
    crate::audit::note_org(name);
    let org = k8s::organization(state.client(), name)
        .await?
        .ok_or_else(|| ApiError::not_found("organization"))?;
    let namespace = k8s::namespace_of(name)?;
    let clusters: Vec<Cluster> = k8s::list_in(state.client(), &namespace).await?;
    let projects: Vec<Project> = k8s::list_in(state.client(), &namespace).await?;
    if !authz::sees_org(caller, &org, &clusters, &projects) {
        return Err(ApiError::not_found("organization"));
    }
    Ok(OrgView {
        org,
        namespace,
        clusters,
        projects,
    })
}

/// Every organization the caller sees.
pub async fn visible_orgs(state: &AppState, caller: &Caller) -> ApiResult<Vec<OrgView>> {
    let orgs: Api<Organization> = Api::all(state.client().clone());
    let mut views = Vec::new();
    for org in orgs.list(&Default::default()).await?.items {
        match org_view(state, caller, &org.name_any()).await {
            Ok(view) => views.push(view),
            Err(e) if e.status == 404 => {}
            Err(e) => return Err(e),
        }
    }
    Ok(views)
}

/// Create parameters of the API's writes (a dry run of the management API server when the
/// request is one: [`crate::dry_run`]).
pub fn post_params() -> PostParams {
    PostParams {
        field_manager: Some(field_managers::API.to_owned()),
        dry_run: crate::dry_run::active(),
    }
}

/// Patch parameters of the API's writes.
pub fn patch_params() -> kube::api::PatchParams {
    kube::api::PatchParams {
        field_manager: Some(field_managers::API.to_owned()),
        dry_run: crate::dry_run::active(),
        ..Default::default()
    }
}

/// Delete parameters of the API's writes.
pub fn delete_params() -> kube::api::DeleteParams {
    kube::api::DeleteParams {
        dry_run: crate::dry_run::active(),
        ..Default::default()
    }
}

/// Annotations recording who asked for a change.
/// With traces on, also the request's trace context, which the controllers' reconciles
/// continue ([`kubenest_runtime::traces`]).
pub fn actor_annotations(caller: &Caller) -> BTreeMap<String, String> {
    let mut stamp: BTreeMap<String, String> = [
        (annotations::ACTOR.to_owned(), caller.user.clone()),
        (annotations::ACTOR_PATH.to_owned(), "rest".to_owned()),
    ]
    .into();
    if let Some(traceparent) = kubenest_runtime::traces::current_traceparent() {
        stamp.insert(kubenest_runtime::traces::ANNOTATION.to_owned(), traceparent);
    }
    stamp
}

/// Refuses a REST change of an object kept in Git ([`kubenest_domain::gitops::owner`]): a 409
/// `gitops_owned` that names the owner and says how to make the change there (`in_git`). The
/// change would otherwise be undone, silently, at the engine's next reconcile.
pub fn not_in_git<K: kube::Resource>(object: &K, what: &str, in_git: &str) -> ApiResult<()> {
    match kubenest_domain::gitops::owner(object.meta()) {
        Some(owner) => Err(ApiError::conflict(
            "gitops_owned",
            format!(
                "{what} {} is kept in Git by {owner}: a change made here would be undone at its \
                 next reconcile. {in_git}",
                object.meta().name.as_deref().unwrap_or_default()
            ),
        )),
        None => Ok(()),
    }
}

/// A DNS label, or a 422 naming `field`.
pub fn check_dns_label(field: &str, value: &str) -> ApiResult<()> {
    if k8s::is_name(value) {
        Ok(())
    } else {
        Err(ApiError::invalid(
            field,
            kubenest_domain::names::DNS_LABEL_RULE,
        ))
    }
}

/// Sets (or with `role: None` removes) a member on an object's `members`, retrying on a
/// concurrent change so no other membership change is lost.
///
/// `user` is a user name (or, to remove, a member's user id). Giving a role replaces the user's
/// earlier one at this scope; removing takes every entry of that name or id.
pub async fn set_member<K>(
    state: &AppState,
    api: &Api<K>,
    name: &str,
    user: &str,
    role: Option<Role>,
    members: impl Fn(&mut K) -> &mut Vec<Member>,
) -> ApiResult<Vec<MemberView>>
where
    K: Resource + Clone + DeserializeOwned + Serialize + std::fmt::Debug,
{
    let new = match role {
        Some(role) => Some(new_member(state, "user", user, role).await?),
        None => None,
    };
    for _ in 0..5 {
        let mut object = api.get(name).await?;
        let list = members(&mut object);
        let before = list.len();
        match &new {
            Some(new) => {
                list.retain(|m| m.user_id != new.user_id && m.user != new.user);
                list.push(new.clone());
            }
            None => {
                list.retain(|m| m.user != user && m.user_id.as_deref() != Some(user));
                if list.len() == before {
                    return Err(ApiError::not_found("member"));
                }
            }
        }
        list.sort_by(|a, b| a.user.cmp(&b.user));
        let result: Vec<MemberView> = list.iter().map(member_view).collect();
        match api.replace(name, &post_params(), &object).await {
            Ok(_) => return Ok(result),
            Err(kube::Error::Api(status)) if status.code == 409 => continue,
            Err(other) => return Err(other.into()),
        }
    }
    Err(ApiError::conflict(
        "conflict",
        "the members changed concurrently too often; retry",
    ))
}

/// [`set_member`] on a cluster or project the caller administers (`what` names it in errors).
pub async fn change_member<K>(
    state: &AppState,
    scoped: &Scoped<K>,
    what: &str,
    user: &str,
    role: Option<Role>,
    members: impl Fn(&mut K) -> &mut Vec<Member>,
) -> ApiResult<Vec<MemberView>>
where
    K: Resource<DynamicType = (), Scope = kube::core::NamespaceResourceScope>
        + Clone
        + DeserializeOwned
        + Serialize
        + std::fmt::Debug,
{
    scoped.require(Need::Admin, what)?;
    let api: Api<K> = Api::namespaced(state.client().clone(), &scoped.namespace());
    set_member(state, &api, &k8s::name(&scoped.object), user, role, members).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_dns_labels() {
        assert!(check_dns_label("name", "shop-1").is_ok());
        for bad in ["", "-shop", "Shop", "shop_1", &"a".repeat(64)] {
            assert_eq!(check_dns_label("name", bad).unwrap_err().status, 422);
        }
    }
}
