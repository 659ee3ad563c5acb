//! The role matrix both doors are held to: the REST test (`api.rs`) and the kubectl test
//! (`doors/matrix.rs`) read this one table, so no role reaches through one door what the other
//! refuses. Every role is bound in organization A (on the organization, on its cluster, or on
//! its first project); each row is tried against objects in that project, in another project
//! of the same cluster, and in another organization.
//!
//! The objects are named so that kinds collide across projects: the other project's
//! AddonInstance has the name of the own project's App, so a Role naming objects without their
//! kind would open it.

use super::{Level, Needs, reaches};

/// Which door a row is tried through.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Door {
    Rest,
    Kubectl,
}

/// The kind of object a row acts on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Organization,
    Cluster,
    Project,
    App,
    AddonInstance,
}

/// Where the object sits, seen from the roles bound in organization A.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Place {
    /// The project the project roles are bound on.
    OwnProject,
    /// Another project of organization A, on the same cluster.
    OtherProject,
    /// A project of organization B, where no role is bound.
    OtherOrg,
}

impl Place {
    pub const ALL: [Place; 3] = [Place::OwnProject, Place::OtherProject, Place::OtherOrg];
}

/// One request of the matrix.
#[derive(Debug, Clone, Copy)]
pub struct Row {
    /// The name each door's test maps to a request.
    pub what: &'static str,
    pub kind: Kind,
    /// Where the object sits (an organization, a cluster, a project).
    pub at: Level,
    pub needs: Needs,
    /// Only an organization-wide binding allows it (lists: Kubernetes cannot filter a list by
    /// project).
    pub org_wide: bool,
    pub doors: &'static [Door],
}

const BOTH: &[Door] = &[Door::Rest, Door::Kubectl];
const REST: &[Door] = &[Door::Rest];
const KUBECTL: &[Door] = &[Door::Kubectl];

const fn row(
    what: &'static str,
    kind: Kind,
    at: Level,
    needs: Needs,
    doors: &'static [Door],
) -> Row {
    Row {
        what,
        kind,
        at,
        needs,
        org_wide: false,
        doors,
    }
}

/// The matrix.
pub const ROWS: &[Row] = &[
    row(
        "get org",
        Kind::Organization,
        Level::Org,
        Needs::Viewer,
        REST,
    ),
    row(
        "get cluster",
        Kind::Cluster,
        Level::Cluster,
        Needs::Viewer,
        BOTH,
    ),
    row(
        "rotate token",
        Kind::Cluster,
        Level::Cluster,
        Needs::Admin,
        REST,
    ),
    row("scale", Kind::Cluster, Level::Cluster, Needs::Admin, REST),
    row(
        "change cluster",
        Kind::Cluster,
        Level::Cluster,
        Needs::Admin,
        KUBECTL,
    ),
    row(
        "make self cluster admin",
        Kind::Cluster,
        Level::Cluster,
        Needs::Admin,
        KUBECTL,
    ),
    row(
        "get project",
        Kind::Project,
        Level::Project,
        Needs::Viewer,
        BOTH,
    ),
    row(
        "project member",
        Kind::Project,
        Level::Project,
        Needs::Admin,
        REST,
    ),
    row(
        "make self project admin",
        Kind::Project,
        Level::Project,
        Needs::Admin,
        KUBECTL,
    ),
    row(
        "delete project",
        Kind::Project,
        Level::Project,
        Needs::Admin,
        BOTH,
    ),
    row("get app", Kind::App, Level::Project, Needs::Viewer, BOTH),
    Row {
        org_wide: true,
        ..row("list apps", Kind::App, Level::Org, Needs::Viewer, KUBECTL)
    },
    row(
        "app history",
        Kind::App,
        Level::Project,
        Needs::Viewer,
        REST,
    ),
    row(
        "app objects",
        Kind::App,
        Level::Project,
        Needs::Viewer,
        REST,
    ),
    row("change app", Kind::App, Level::Project, Needs::Member, BOTH),
    row("verify app", Kind::App, Level::Project, Needs::Member, REST),
    row(
        "redeploy app",
        Kind::App,
        Level::Project,
        Needs::Member,
        REST,
    ),
    row(
        "annotate app",
        Kind::App,
        Level::Project,
        Needs::Member,
        KUBECTL,
    ),
    row(
        "delete app",
        Kind::App,
        Level::Project,
        Needs::Member,
        KUBECTL,
    ),
    row("create app", Kind::App, Level::Project, Needs::Member, BOTH),
    row(
        "get addon",
        Kind::AddonInstance,
        Level::Project,
        Needs::Viewer,
        BOTH,
    ),
    row(
        "change addon",
        Kind::AddonInstance,
        Level::Project,
        Needs::Member,
        BOTH,
    ),
    row(
        "annotate addon",
        Kind::AddonInstance,
        Level::Project,
        Needs::Member,
        KUBECTL,
    ),
    row(
        "delete addon",
        Kind::AddonInstance,
        Level::Project,
        Needs::Member,
        KUBECTL,
    ),
    row(
        "create addon",
        Kind::AddonInstance,
        Level::Project,
        Needs::Member,
        BOTH,
    ),
];

/// The rows tried through `door`.
pub fn rows(door: Door) -> impl Iterator<Item = &'static Row> {
    ROWS.iter().filter(move |r| r.doors.contains(&door))
}

impl Row {
    /// Whether a role bound at `bound` reaches this row's object at `place`.
    pub fn reaches(&self, bound: Level, place: Place) -> bool {
        match place {
            Place::OtherOrg => false,
            _ if self.org_wide => bound == Level::Org,
            Place::OwnProject => reaches(bound, self.at),
            // The same organization and cluster: only a project binding stops short of
            // another project's objects.
            Place::OtherProject if self.at == Level::Project => bound != Level::Project,
            Place::OtherProject => reaches(bound, self.at),
        }
    }

    /// Whether `holds` bound at `bound` may do this at `place`.
    pub fn allowed(&self, holds: Needs, bound: Level, place: Place) -> bool {
        self.reaches(bound, place) && holds >= self.needs
    }
}
