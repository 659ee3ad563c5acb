//! What the tables and name lookups read of every listed object: its name, id and creation
//! time, which `-o wide` adds and `NAME` arguments are looked up by.

use kubenest_api::addons::{DefinitionResponse, InstanceResponse, RevisionView};
use kubenest_api::alerts::AlertResponse;
use kubenest_api::apps::{AppResponse, DeploymentView};
use kubenest_api::audit::AuditEntryView;
use kubenest_api::clusters::ClusterResponse;
use kubenest_api::fences::ProjectUsageRow;
use kubenest_api::members::MemberView;
use kubenest_api::orgs::OrgResponse;
use kubenest_api::projects::ProjectResponse;
use kubenest_api::templates::TemplateResponse;
use kubenest_api::users::UserView;

/// An object of a list answer.
pub trait Listed {
    /// The name a `NAME` argument matches (the id of an object without one).
    fn name(&self) -> &str;
    /// Its id, when it has one apart from its name.
    fn id(&self) -> Option<String> {
        None
    }
    /// When it was made, when the API says.
    fn created_at(&self) -> Option<&str> {
        None
    }
}

/// `Listed` for a type: the field that names it, and whether its id and creation time are a
/// `String` (`id`, `created`) or an `Option<String>` (`id?`, `created?`).
macro_rules! listed {
    ($($ty:ty { $name:ident $(, id $id:tt)? $(, created $created:tt)? })*) => {$(
        impl Listed for $ty {
            fn name(&self) -> &str {
                &self.$name
            }
            $(fn id(&self) -> Option<String> {
                listed!(@field self, id, $id).map(ToString::to_string)
            })?
            $(fn created_at(&self) -> Option<&str> {
                listed!(@field self, created_at, $created)
            })?
        }
    )*};
    (@field $self:ident, $field:ident, !) => { Some(&$self.$field) };
    (@field $self:ident, $field:ident, ?) => { $self.$field.as_deref() };
}

listed! {
    OrgResponse { name, created ? }
    ClusterResponse { name, id !, created ? }
    ProjectResponse { name, id !, created ? }
    AppResponse { name, id !, created ? }
    InstanceResponse { name, id !, created ? }
    TemplateResponse { name, id !, created ? }
    UserView { username, id !, created ! }
    DefinitionResponse { name }
    MemberView { user }
    ProjectUsageRow { project }
    DeploymentView { id, id !, created ! }
    AlertResponse { id, id ! }
}

impl Listed for RevisionView {
    fn name(&self) -> &str {
        &self.operation
    }
    fn created_at(&self) -> Option<&str> {
        Some(&self.created_at)
    }
}

impl Listed for AuditEntryView {
    fn name(&self) -> &str {
        &self.resource_name
    }
    fn id(&self) -> Option<String> {
        Some(self.id.to_string())
    }
}
