//! The API's JSON shapes of an App (their types are `kubenest_api::apps`: snake_case, unknown
//! fields refused) and their mapping to and from the custom resources (camelCase). Components
//! are written as in the spec:
//! `{"name", "type": "workload", "workload_spec": {...}}` or `{"type": "addon", "addon_spec"}`.
//!
//! The mapping goes through JSON on purpose: the CRD types stay the single definition of what a
//! valid App is, and free-form Helm `values` pass through untouched.

pub use kubenest_api::apps::{
    AddonBody, ChartBody, ComponentBody, ComponentKind, EnvBody, ExportRefBody, GitBody,
    HealthCheckBody, HelmBody, IngressBody, ResourcesBody, WorkloadBody,
};

pub mod verdict;
pub mod verification;

use serde_json::Value;

use crate::error::ApiError;

pub use kubenest_api::{DNS_LABEL_PATTERN, USERNAME_PATTERN};

/// snake_case API keys and their camelCase CRD names (both directions use this table).
const RENAMES: &[(&str, &str)] = &[
    ("health_check", "healthCheck"),
    ("export_ref", "exportRef"),
    ("cpu_request", "cpuRequest"),
    ("cpu_limit", "cpuLimit"),
    ("memory_request", "memoryRequest"),
    ("memory_limit", "memoryLimit"),
    ("initial_delay_seconds", "initialDelaySeconds"),
    ("period_seconds", "periodSeconds"),
    ("context_dir", "contextDir"),
    ("tls_secret", "tlsSecret"),
];

fn rename_keys(value: &mut Value, to_crd: bool) {
    match value {
        Value::Object(map) => {
            let keys: Vec<String> = map.keys().cloned().collect();
            for key in keys {
                let renamed = RENAMES.iter().find_map(|(api, crd)| {
                    let (from, to) = if to_crd { (api, crd) } else { (crd, api) };
                    (*from == key).then_some(*to)
                });
                let Some(mut item) = map.remove(&key) else {
                    continue;
                };
                // Helm values are the user's own keys.
                if key != "values" {
                    rename_keys(&mut item, to_crd);
                }
                map.insert(renamed.map_or(key, str::to_owned), item);
            }
        }
        Value::Array(items) => items.iter_mut().for_each(|i| rename_keys(i, to_crd)),
        _ => {}
    }
}

/// An API component (typed or a template's, with `${slots}`) as the CRD's JSON.
pub fn component_to_crd(mut api: Value, at: &str) -> Result<Value, ApiError> {
    let Value::Object(map) = &mut api else {
        return Err(ApiError::invalid(at, "a component is an object"));
    };
    let kind = map.remove("type");
    let workload = map.remove("workload_spec");
    let addon = map.remove("addon_spec");
    match (kind.as_ref().and_then(Value::as_str), workload, addon) {
        (Some("workload"), Some(spec), None) => {
            map.insert("workload".into(), spec);
        }
        (Some("addon"), None, Some(spec)) => {
            map.insert("addon".into(), spec);
        }
        (Some("workload"), _, _) => {
            return Err(ApiError::invalid(
                format!("{at}.workload_spec"),
                "a workload component sets workload_spec and no addon_spec",
            ));
        }
        (Some("addon"), _, _) => {
            return Err(ApiError::invalid(
                format!("{at}.addon_spec"),
                "an addon component sets addon_spec and no workload_spec",
            ));
        }
        _ => {
            return Err(ApiError::invalid(
                format!("{at}.type"),
                "type is workload or addon",
            ));
        }
    }
    rename_keys(&mut api, true);
    Ok(api)
}

/// A CRD component's JSON in the API's shape.
pub fn component_from_crd(mut crd: Value) -> Value {
    if let Value::Object(map) = &mut crd {
        if let Some(spec) = map.remove("workload") {
            map.insert("type".into(), "workload".into());
            map.insert("workload_spec".into(), spec);
        } else if let Some(spec) = map.remove("addon") {
            map.insert("type".into(), "addon".into());
            map.insert("addon_spec".into(), spec);
        }
    }
    rename_keys(&mut crd, false);
    crd
}

/// Typed API components as CRD components, checked by the CRD types.
pub fn components_to_crd(
    components: &[ComponentBody],
) -> Result<Vec<kubenest_crds::app::Component>, ApiError> {
    components
        .iter()
        .enumerate()
        .map(|(i, c)| {
            let at = format!("components[{i}]");
            let value = serde_json::to_value(c).map_err(ApiError::internal)?;
            let crd = component_to_crd(value, &at)?;
            serde_json::from_value(crd).map_err(|e| ApiError::invalid(at, e.to_string()))
        })
        .collect()
}

/// CRD components in the API's shape.
pub fn components_from_crd(components: &[kubenest_crds::app::Component]) -> Vec<Value> {
    components
        .iter()
        .filter_map(|c| serde_json::to_value(c).ok())
        .map(component_from_crd)
        .collect()
}

/// Maps a field path of the App CRD (`spec.components[0].workload.healthCheck`) to the API's
/// (`components[0].workload_spec.health_check`).
pub fn api_field(crd_path: &str) -> String {
    let path = crd_path.strip_prefix("spec.").unwrap_or(crd_path);
    let mut out = Vec::new();
    for part in path.split('.') {
        let (head, index) = part
            .find('[')
            .map_or((part, ""), |at| (&part[..at], &part[at..]));
        let head = match head {
            "workload" => "workload_spec".to_owned(),
            "addon" => "addon_spec".to_owned(),
            "progressDeadlineSeconds" => "progress_deadline_seconds".to_owned(),
            other => {
                let mut snake = String::new();
                for c in other.chars() {
                    if c.is_ascii_uppercase() {
                        snake.push('_');
                        snake.push(c.to_ascii_lowercase());
                    } else {
                        snake.push(c);
                    }
                }
                snake
            }
        };
        out.push(format!("{head}{index}"));
    }
    out.join(".")
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use super::*;

    #[test]
    fn crd_field_paths_read_as_api_paths() {
        assert_eq!(
            api_field("spec.components[1].workload.healthCheck.periodSeconds"),
            "components[1].workload_spec.health_check.period_seconds"
        );
        assert_eq!(
            api_field("spec.components[0].addon.definition"),
            "components[0].addon_spec.definition"
        );
    }

    use serde_json::json;

    /// Every field path of a schema (`health_check.port`), following `$ref`s and nullable
    /// unions; free-form `values` are a leaf.
    fn field_paths(schema: &Value, defs: &Value, at: &str, out: &mut BTreeSet<String>) {
        if let Some(name) = schema["$ref"]
            .as_str()
            .and_then(|r| r.strip_prefix("#/$defs/"))
        {
            return field_paths(&defs[name], defs, at, out);
        }
        for union in ["anyOf", "oneOf", "allOf"] {
            for variant in schema[union].as_array().into_iter().flatten() {
                field_paths(variant, defs, at, out);
            }
        }
        if let Some(items) = schema.get("items") {
            field_paths(items, defs, at, out);
        }
        for (key, property) in schema["properties"].as_object().into_iter().flatten() {
            let path = if at.is_empty() {
                key.clone()
            } else {
                format!("{at}.{key}")
            };
            out.insert(path.clone());
            if key != "values" {
                field_paths(property, defs, &path, out);
            }
        }
    }

    fn paths_of(schema: schemars::Schema, rename: bool) -> BTreeSet<String> {
        let schema = schema.to_value();
        let mut paths = BTreeSet::new();
        field_paths(&schema, &schema["$defs"], "", &mut paths);
        if !rename {
            return paths;
        }
        let camel = |segment: &str| {
            RENAMES
                .iter()
                .find(|(api, _)| *api == segment)
                .map_or(segment.to_owned(), |(_, crd)| (*crd).to_owned())
        };
        paths
            .into_iter()
            .map(|p| p.split('.').map(camel).collect::<Vec<_>>().join("."))
            .collect()
    }

    /// The API's bodies and the CRD types are two spellings of one shape (the REST contract is
    /// snake_case, strict and versioned with the API; the CRD is camelCase with defaults and
    /// CEL rules, versioned with the CRD): a field added to one and not the other fails here,
    /// and so does a camelCase name missing from `RENAMES`.
    #[test]
    fn the_api_bodies_and_the_crd_types_have_the_same_fields() {
        use kubenest_crds::app::{AddonComponent, Workload};
        let workload = paths_of(schemars::schema_for!(Workload), false);
        assert!(
            workload.contains("healthCheck.periodSeconds"),
            "{workload:?}"
        );
        assert!(workload.contains("git.ref") && workload.contains("helm.values"));
        assert_eq!(
            paths_of(schemars::schema_for!(WorkloadBody), true),
            workload
        );
        assert_eq!(
            paths_of(schemars::schema_for!(AddonBody), true),
            paths_of(schemars::schema_for!(AddonComponent), false),
        );
        let verification: BTreeSet<String> = paths_of(
            schemars::schema_for!(kubenest_crds::verification::VerificationSpec),
            false,
        )
        .iter()
        .map(|p| api_field(p))
        .collect();
        assert!(verification.contains("metrics.path"), "{verification:?}");
        assert_eq!(
            paths_of(schemars::schema_for!(verification::VerificationBody), false),
            verification
        );
    }

    #[test]
    fn components_map_to_the_crd_shape_and_back_leaving_helm_values_alone() {
        let api = json!({
            "name": "web", "type": "workload",
            "workload_spec": {
                "image": "shop:1", "health_check": {"path": "/", "period_seconds": 5},
                "env": [{"name": "DATABASE_URL", "export_ref": {"component": "db", "export": "dsn"}}],
                "helm": {"chart": {"repository": "r", "name": "n", "version": "1.0.0"},
                         "values": {"keep_me": {"health_check": 1}}}
            }
        });
        let crd = component_to_crd(api.clone(), "components[0]").unwrap();
        assert_eq!(crd["workload"]["healthCheck"]["periodSeconds"], 5);
        assert_eq!(crd["workload"]["env"][0]["exportRef"]["component"], "db");
        assert_eq!(
            crd["workload"]["helm"]["values"]["keep_me"]["health_check"],
            1
        );
        assert_eq!(component_from_crd(crd), api);
    }

    #[test]
    fn a_component_with_the_wrong_spec_names_the_field() {
        let error = component_to_crd(
            json!({"name": "db", "type": "addon", "workload_spec": {}}),
            "components[1]",
        )
        .unwrap_err();
        assert_eq!(error.field.as_deref(), Some("components[1].addon_spec"));
        let error = component_to_crd(json!({"name": "db"}), "components[0]").unwrap_err();
        assert_eq!(error.field.as_deref(), Some("components[0].type"));
    }
}
