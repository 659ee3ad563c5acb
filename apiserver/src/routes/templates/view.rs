//! A template as the API shows it, and the caller's role on it.

pub use kubenest_api::templates::TemplateResponse;

use kube::ResourceExt;
use kubenest_crds::StackTemplate;
use kubenest_crds::template::{Scope, StackTemplateSpec};
use kubenest_domain::template;
use serde_json::Value;

use super::super::OrgView;
use crate::authz::{self, Caller};
use crate::k8s;
use crate::model::component_from_crd;

pub(super) fn response(template: &StackTemplate) -> TemplateResponse {
    let namespace = template.namespace().unwrap_or_default();
    let (valid, message) = match template::check(&template.spec) {
        Ok(()) => (true, String::new()),
        Err(e) => (false, e.to_string()),
    };
    TemplateResponse {
        id: k8s::uid(template),
        name: template.name_any(),
        org: k8s::org_name_of(&namespace).map(str::to_owned),
        scope: template.spec.scope,
        project: template.spec.project.clone(),
        cluster: template.spec.cluster.clone(),
        description: template.spec.description.clone(),
        parameters: template.spec.parameters.clone(),
        components: template
            .spec
            .components
            .iter()
            .map(|c| component_from_crd(Value::Object(c.clone())))
            .collect(),
        valid,
        message,
        created_at: k8s::created(template),
    }
}

/// The caller's role on a template (global ones: everyone reads, platform admins write).
pub(super) fn role_on(
    caller: &Caller,
    view: Option<&OrgView>,
    template: &StackTemplateSpec,
) -> Option<kubenest_crds::common::Role> {
    let Some(view) = view else {
        return Some(if caller.platform_admin {
            kubenest_crds::common::Role::Admin
        } else {
            kubenest_crds::common::Role::Viewer
        });
    };
    match template.scope {
        Scope::Project => {
            view.role_in_project(caller, template.project.as_deref().unwrap_or_default())
        }
        Scope::Cluster => match view
            .clusters
            .iter()
            .find(|c| Some(c.name_any()) == template.cluster)
        {
            Some(cluster) => view.cluster_role(caller, cluster),
            None => authz::role_at(caller, &view.org, None, None),
        },
        Scope::Global => authz::role_at(caller, &view.org, None, None),
    }
}
