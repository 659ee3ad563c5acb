//! The admission policies of `charts/kubenest/templates/kubenest-policies.yaml`, applied by the
//! controllers at start (with `--install-crds`) as the chart installs them: the same rules for
//! kubectl, GitOps and the REST API.

use k8s_openapi::api::admissionregistration::v1::{
    ValidatingAdmissionPolicy, ValidatingAdmissionPolicyBinding,
};
use kube::ResourceExt;
use kube::api::{Api, Patch, PatchParams};
use kubenest_crds::names::field_managers;

const POLICIES: &str = include_str!("../../charts/kubenest/templates/kubenest-policies.yaml");

/// The policies and their bindings (pure: parsed from the chart's file).
pub fn policies() -> Result<
    (
        Vec<ValidatingAdmissionPolicy>,
        Vec<ValidatingAdmissionPolicyBinding>,
    ),
    serde_yaml::Error,
> {
    let mut policies = Vec::new();
    let mut bindings = Vec::new();
    for document in serde_yaml::Deserializer::from_str(POLICIES) {
        let value = <serde_yaml::Value as serde::Deserialize>::deserialize(document)?;
        match value.get("kind").and_then(serde_yaml::Value::as_str) {
            Some("ValidatingAdmissionPolicy") => policies.push(serde_yaml::from_value(value)?),
            Some("ValidatingAdmissionPolicyBinding") => {
                bindings.push(serde_yaml::from_value(value)?);
            }
            _ => {}
        }
    }
    Ok((policies, bindings))
}

/// Applies every policy, then every binding. (The file is checked to parse by a unit test; a
/// broken one would be a serialization error here.)
pub async fn ensure_policies(client: &kube::Client) -> Result<(), kube::Error> {
    let (policies, bindings) =
        policies().map_err(|e| kube::Error::SerdeError(serde::de::Error::custom(e)))?;
    let params = PatchParams::apply(field_managers::CONTROLLERS).force();
    let api: Api<ValidatingAdmissionPolicy> = Api::all(client.clone());
    for policy in &policies {
        api.patch(&policy.name_any(), &params, &Patch::Apply(policy))
            .await?;
    }
    let api: Api<ValidatingAdmissionPolicyBinding> = Api::all(client.clone());
    for binding in &bindings {
        api.patch(&binding.name_any(), &params, &Patch::Apply(binding))
            .await?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_chart_file_holds_two_policies_each_bound() {
        let (policies, bindings) = super::policies().unwrap();
        assert_eq!(policies.len(), 2);
        assert_eq!(bindings.len(), 2);
    }
}
