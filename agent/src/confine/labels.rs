//! Labels kubenest's own pods are told apart by, which a chart may not put on its objects
//! (pure).

use serde_json::Value;

/// Labels a chart's objects and pods may not carry: a build pod's, which the project's
/// network fence lets reach outside it (to the Git server and the registry).
const RESERVED_LABELS: [&str; 1] = [kubenest_crds::names::labels::BUILD_ID];

/// The first reserved label anywhere in `value`'s `labels` maps (its own, its pod template's).
pub(super) fn reserved_label(value: &Value) -> Option<&'static str> {
    match value {
        Value::Array(items) => items.iter().find_map(reserved_label),
        Value::Object(fields) => fields.iter().find_map(|(key, field)| {
            if key == "labels"
                && let Some(labels) = field.as_object()
                && let Some(found) = RESERVED_LABELS.iter().find(|l| labels.contains_key(**l))
            {
                return Some(*found);
            }
            reserved_label(field)
        }),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::super::{Refused, Scope, admit};
    use serde_json::json;

    fn cluster(_: &str, _: &str) -> Scope {
        Scope::Namespaced
    }

    #[test]
    fn a_pod_dressed_as_a_build_refuses_the_render_so_it_cannot_leave_the_network_fence() {
        let mut web =
            json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web"}});
        web["spec"] = json!({"template": {"metadata": {"labels": {
            "app": "web", kubenest_crds::names::labels::BUILD_ID: "b1",
        }}}});
        assert_eq!(
            admit(&[web], "shop", cluster),
            Err(Refused::ReservedLabel {
                object: "Deployment/web".into(),
                label: kubenest_crds::names::labels::BUILD_ID,
            })
        );
    }
}
