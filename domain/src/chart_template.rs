//! A StackTemplate from any Helm chart (pure): one Helm workload of the chart, whose values
//! are the chart's own with a `${slot}` in place of each scalar, the chart's value its default.
//! Slots are named by the value's path in snake case (`image.tag` → `image_tag`,
//! `replicaCount` → `replica_count`), taken in key order, depth first; lists, and the values
//! past the 64th slot, stay literal.

use kubenest_crds::template::{Parameter, ParameterType, Scope, StackTemplateSpec};
use serde_json::{Map, Value, json};

/// At most this many slots (the StackTemplate's limit).
pub const MAX_SLOTS: usize = 64;

/// The chart a template installs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChartSource {
    pub repository: String,
    pub name: String,
    pub version: String,
}

/// `camelCase` and `kebab-case` path parts as one `snake_case` slot name.
fn slot_name(path: &[&str]) -> String {
    let mut out = String::new();
    for part in path {
        if !out.is_empty() {
            out.push('_');
        }
        let mut previous_lower = false;
        for c in part.chars() {
            if c.is_ascii_uppercase() {
                if previous_lower {
                    out.push('_');
                }
                out.push(c.to_ascii_lowercase());
                previous_lower = false;
            } else if c.is_ascii_alphanumeric() {
                out.push(c);
                previous_lower = c.is_ascii_lowercase() || c.is_ascii_digit();
            } else {
                out.push('_');
                previous_lower = false;
            }
        }
    }
    let trimmed = out.trim_matches('_');
    let mut name = String::with_capacity(trimmed.len() + 2);
    if !trimmed.starts_with(|c: char| c.is_ascii_lowercase()) {
        name.push_str("v_");
    }
    for c in trimmed.chars() {
        // One underscore between words.
        if !(c == '_' && name.ends_with('_')) {
            name.push(c);
        }
    }
    name.truncate(63);
    name.trim_end_matches('_').to_owned()
}

/// Replaces the scalars of `values` (in key order, depth first) with slots, collecting them.
fn slot_values(
    values: &Map<String, Value>,
    path: &mut Vec<String>,
    slots: &mut Vec<Parameter>,
) -> Map<String, Value> {
    let mut out = Map::new();
    for (key, value) in values {
        path.push(key.clone());
        let replaced = match value {
            Value::Object(inner) => Value::Object(slot_values(inner, path, slots)),
            scalar @ (Value::String(_) | Value::Number(_) | Value::Bool(_))
                if slots.len() < MAX_SLOTS =>
            {
                let parts: Vec<&str> = path.iter().map(String::as_str).collect();
                let mut name = slot_name(&parts);
                if slots.iter().any(|s| s.name == name) {
                    name = format!("{}_{}", &name[..name.len().min(58)], slots.len());
                }
                let (type_, default) = match scalar {
                    Value::Bool(b) => (ParameterType::Boolean, b.to_string()),
                    Value::Number(n) if n.is_i64() || n.is_u64() => {
                        (ParameterType::Integer, n.to_string())
                    }
                    Value::Number(n) => (ParameterType::String, n.to_string()),
                    Value::String(s) => (ParameterType::String, s.clone()),
                    _ => (ParameterType::String, String::new()),
                };
                slots.push(Parameter {
                    name: name.clone(),
                    type_,
                    default: Some(default),
                    required: false,
                    description: format!("The chart's `{}`.", path.join(".")),
                });
                Value::String(format!("${{{name}}}"))
            }
            other => other.clone(),
        };
        out.insert(key.clone(), replaced);
        path.pop();
    }
    out
}

/// The template of `chart` whose default values are `values` (its `values.yaml`), at `scope`.
pub fn from_chart(
    chart: &ChartSource,
    values: &Value,
    scope: Scope,
    description: &str,
) -> StackTemplateSpec {
    let mut slots = Vec::new();
    let templated = match values {
        Value::Object(map) => slot_values(map, &mut Vec::new(), &mut slots),
        _ => Map::new(),
    };
    let component = slot_name(&[chart.name.as_str()]).replace('_', "-");
    let component: Map<String, Value> = serde_json::from_value(json!({
        "name": component,
        "workload": {"helm": {
            "chart": {"repository": chart.repository, "name": chart.name, "version": chart.version},
            "values": templated,
        }},
    }))
    .unwrap_or_default();
    StackTemplateSpec {
        description: if description.is_empty() {
            format!("The Helm chart {} {}.", chart.name, chart.version)
        } else {
            description.to_owned()
        },
        scope,
        project: None,
        cluster: None,
        parameters: slots,
        components: vec![component],
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::template::check;

    #[test]
    fn every_scalar_of_the_chart_values_is_a_slot_with_its_default() {
        let chart = ChartSource {
            repository: "https://charts.example.test".into(),
            name: "webApp".into(),
            version: "0.3.0".into(),
        };
        let values = json!({"replicaCount": 1, "image": {"repository": "nginx", "tag": "1.27"},
                            "service": {"enabled": true, "port": 80}, "ratio": 0.5,
                            "extraArgs": ["--a"], "podAnnotations": {}});
        let spec = from_chart(&chart, &values, Scope::Global, "");
        let names: Vec<&str> = spec.parameters.iter().map(|p| p.name.as_str()).collect();
        assert_eq!(
            names,
            [
                "image_repository",
                "image_tag",
                "ratio",
                "replica_count",
                "service_enabled",
                "service_port"
            ]
        );
        let types: Vec<ParameterType> = spec.parameters.iter().map(|p| p.type_).collect();
        assert_eq!(types[3], ParameterType::Integer);
        assert_eq!(types[4], ParameterType::Boolean);
        assert_eq!(types[2], ParameterType::String);
        assert_eq!(spec.parameters[1].default.as_deref(), Some("1.27"));
        let helm = &spec.components[0]["workload"]["helm"];
        assert_eq!(spec.components[0]["name"], "web-app");
        assert_eq!(helm["values"]["image"]["tag"], "${image_tag}");
        assert_eq!(helm["values"]["extraArgs"], json!(["--a"]));
        assert_eq!(helm["chart"]["version"], "0.3.0");
        check(&spec).unwrap();
    }

    #[test]
    fn slot_names_are_snake_case_and_unique_and_stop_at_the_limit() {
        assert_eq!(slot_name(&["image", "pullPolicy"]), "image_pull_policy");
        assert_eq!(slot_name(&["9lives"]), "v_9lives");
        assert_eq!(slot_name(&["a-b", "c.d"]), "a_b_c_d");
        let values = json!({"a_b": 1, "aB": 2});
        let spec = from_chart(
            &ChartSource {
                repository: "oci://registry.example.test/charts".into(),
                name: "x".into(),
                version: "1.0.0".into(),
            },
            &values,
            Scope::Global,
            "",
        );
        assert_eq!(spec.parameters[0].name, "a_b");
        assert_ne!(spec.parameters[1].name, "a_b");
        let many: Map<String, Value> = (0..100).map(|i| (format!("k{i}"), json!(i))).collect();
        let spec = from_chart(
            &ChartSource {
                repository: "oci://registry.example.test/charts".into(),
                name: "x".into(),
                version: "1.0.0".into(),
            },
            &Value::Object(many),
            Scope::Global,
            "",
        );
        assert_eq!(spec.parameters.len(), MAX_SLOTS);
        assert_eq!(spec.components[0]["workload"]["helm"]["values"]["k99"], 99);
    }
}
