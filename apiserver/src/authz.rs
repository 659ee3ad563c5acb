//! Who may do what: roles `admin` > `member` > `viewer`, bound at organization, cluster or
//! project scope (the `members` of those objects, which the controllers also turn into
//! Kubernetes RoleBindings, so kubectl and REST agree). A role at a scope holds for everything
//! inside it: an organization role for all its clusters and projects, a cluster role for the
//! projects on that cluster. Platform administrators hold every role everywhere.
//!
//! Memberships name a user by their immutable id (`Member::user_id`), never by name: a user
//! deleted and created again under the same name holds nothing, and a member written without
//! an id (by hand, with kubectl) binds nobody.
//!
//! An object on which the caller holds no role does not exist for them (404); a role too weak
//! for the operation is a 403.

use kubenest_crds::cluster::Cluster;
use kubenest_crds::common::{Member, Role};
use kubenest_crds::organization::Organization;
use kubenest_crds::project::Project;

use crate::error::ApiError;

/// The authenticated caller.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Caller {
    /// The user name (for people: history, audit, messages).
    pub user: String,
    /// The immutable user id, which memberships name.
    pub id: String,
    pub platform_admin: bool,
}

/// What an operation needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Need {
    /// Read (viewer and up).
    Read,
    /// Create and change (member and up).
    Write,
    /// Destructive: delete a project or cluster, scale, rotate a token, manage members.
    Admin,
}

fn rank(role: Role) -> u8 {
    match role {
        Role::Viewer => 1,
        Role::Member => 2,
        Role::Admin => 3,
    }
}

fn strongest(roles: impl IntoIterator<Item = Option<Role>>) -> Option<Role> {
    roles.into_iter().flatten().max_by_key(|r| rank(*r))
}

/// The strongest role of the user of id `user_id` in a members list.
pub fn member_role(members: &[Member], user_id: &str) -> Option<Role> {
    strongest(
        members
            .iter()
            .filter(|m| m.user_id.as_deref() == Some(user_id))
            .map(|m| Some(m.role)),
    )
}

/// Whether `role` is enough for `need`.
pub fn allows(role: Role, need: Need) -> bool {
    let needed = match need {
        Need::Read => Role::Viewer,
        Need::Write => Role::Member,
        Need::Admin => Role::Admin,
    };
    rank(role) >= rank(needed)
}

/// The caller's role at a scope: the organization, optionally narrowed to a cluster and a
/// project on it (pass the project's cluster along with the project).
pub fn role_at(
    caller: &Caller,
    org: &Organization,
    cluster: Option<&Cluster>,
    project: Option<&Project>,
) -> Option<Role> {
    if caller.platform_admin {
        return Some(Role::Admin);
    }
    strongest([
        member_role(&org.spec.members, &caller.id),
        cluster.and_then(|c| member_role(&c.spec.members, &caller.id)),
        project.and_then(|p| member_role(&p.spec.members, &caller.id)),
    ])
}

/// Whether the caller holds any role in the organization, at any scope inside it.
pub fn sees_org(
    caller: &Caller,
    org: &Organization,
    clusters: &[Cluster],
    projects: &[Project],
) -> bool {
    caller.platform_admin
        || member_role(&org.spec.members, &caller.id).is_some()
        || clusters
            .iter()
            .any(|c| member_role(&c.spec.members, &caller.id).is_some())
        || projects
            .iter()
            .any(|p| member_role(&p.spec.members, &caller.id).is_some())
}

/// Checks `need` against a role the caller may not hold: no role is a 404 for `what`.
pub fn require(role: Option<Role>, need: Need, what: &str) -> Result<Role, ApiError> {
    let Some(role) = role else {
        return Err(ApiError::not_found(what));
    };
    if allows(role, need) {
        Ok(role)
    } else {
        let needed = match need {
            Need::Read => "viewer",
            Need::Write => "member",
            Need::Admin => "admin",
        };
        Err(ApiError::forbidden(format!(
            "this needs the {needed} role on the {what}; you are {}",
            match role {
                Role::Admin => "admin",
                Role::Member => "member",
                Role::Viewer => "viewer",
            }
        )))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kubenest_crds::cluster::ClusterSpec;
    use kubenest_crds::organization::OrganizationSpec;
    use kubenest_crds::project::ProjectSpec;

    fn member(user: &str, role: Role) -> Member {
        Member {
            user: user.into(),
            user_id: Some(format!("id-{user}")),
            role,
        }
    }

    #[test]
    fn the_strongest_role_across_scopes_wins_and_admin_outranks_all() {
        let org = Organization::new(
            "acme",
            OrganizationSpec {
                display_name: "Acme".into(),
                members: vec![member("vic", Role::Viewer)],
                budget: None,
                verification: None,
            },
        );
        let cluster = Cluster::new(
            "east",
            ClusterSpec {
                display_name: None,
                provider: Default::default(),
                token_version: 1,
                desired_node_count: None,
                members: vec![member("vic", Role::Member)],
                budget: None,
            },
        );
        let project = Project::new(
            "shop",
            ProjectSpec {
                cluster: "east".into(),
                namespace: "shop".into(),
                registry_secret: None,
                ingress_ca: false,
                members: vec![member("vic", Role::Admin), member("pam", Role::Viewer)],
                progress_deadline_seconds: 600,
                pod_security: None,
                quota: None,
                defaults: None,
                network: None,
            },
        );
        let vic = Caller {
            user: "vic".into(),
            id: "id-vic".into(),
            platform_admin: false,
        };
        assert_eq!(role_at(&vic, &org, None, None), Some(Role::Viewer));
        assert_eq!(
            role_at(&vic, &org, Some(&cluster), None),
            Some(Role::Member)
        );
        assert_eq!(
            role_at(&vic, &org, Some(&cluster), Some(&project)),
            Some(Role::Admin)
        );
        let pam = Caller {
            user: "pam".into(),
            id: "id-pam".into(),
            platform_admin: false,
        };
        assert_eq!(role_at(&pam, &org, Some(&cluster), None), None);
        assert!(sees_org(&pam, &org, &[], std::slice::from_ref(&project)));
        assert!(!sees_org(&pam, &org, std::slice::from_ref(&cluster), &[]));
        // The name alone binds nothing: another user of the same name is another id.
        let new_vic = Caller {
            id: "id-vic-again".into(),
            ..vic.clone()
        };
        assert_eq!(role_at(&new_vic, &org, Some(&cluster), None), None);
        assert!(allows(Role::Admin, Need::Admin) && allows(Role::Member, Need::Write));
        assert!(!allows(Role::Member, Need::Admin) && !allows(Role::Viewer, Need::Write));
        assert_eq!(require(None, Need::Read, "app").unwrap_err().status, 404);
        assert_eq!(
            require(Some(Role::Viewer), Need::Write, "app")
                .unwrap_err()
                .status,
            403
        );
    }
}
