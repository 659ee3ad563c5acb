//! StackTemplates: the shape of an App with parameter slots (pure).
//!
//! A template's components are App components in which any string may hold `${slot}`
//! placeholders. A string that is exactly one placeholder takes the slot's typed value
//! (`"replicas": "${replicas}"` becomes a number); elsewhere the value is spliced in as text.
//! [`instantiate`] fills the slots (defaults, required ones, types) into an [`AppSpec`], with
//! errors naming the slot or the component field; [`from_app`] turns a running App into a
//! template; [`export_json`] and [`import_json`] move templates between installations.

use std::collections::BTreeMap;

use kubenest_crds::app::AppSpec;
use kubenest_crds::template::{Parameter, ParameterType, Scope, StackTemplateSpec};
use serde_json::{Map, Value, json};

/// What is wrong, naming the slot (`parameters.<name>`) or field (`components[i]...`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{field}: {reason}")]
pub struct TemplateError {
    pub field: String,
    pub reason: String,
}

fn error(field: impl Into<String>, reason: impl Into<String>) -> TemplateError {
    TemplateError {
        field: field.into(),
        reason: reason.into(),
    }
}

/// The typed value of `raw` for `parameter`.
fn typed(parameter: &Parameter, raw: &str) -> Result<Value, TemplateError> {
    let field = format!("parameters.{}", parameter.name);
    match parameter.type_ {
        ParameterType::String => Ok(Value::String(raw.to_owned())),
        ParameterType::Integer => raw
            .trim()
            .parse::<i64>()
            .map(Value::from)
            .map_err(|_| error(field, format!("expected an integer, got {raw:?}"))),
        ParameterType::Boolean => match raw.trim() {
            "true" => Ok(Value::Bool(true)),
            "false" => Ok(Value::Bool(false)),
            _ => Err(error(field, format!("expected true or false, got {raw:?}"))),
        },
    }
}

/// Every slot's value: given, else its default; unknown and missing required slots refused.
fn values(
    spec: &StackTemplateSpec,
    given: &BTreeMap<String, String>,
) -> Result<BTreeMap<String, Value>, TemplateError> {
    if let Some(unknown) = given
        .keys()
        .find(|k| !spec.parameters.iter().any(|p| &p.name == *k))
    {
        return Err(error(
            format!("parameters.{unknown}"),
            "the template has no such parameter",
        ));
    }
    let mut values = BTreeMap::new();
    for parameter in &spec.parameters {
        let raw = given.get(&parameter.name).or(parameter.default.as_ref());
        match raw {
            Some(raw) => {
                values.insert(parameter.name.clone(), typed(parameter, raw)?);
            }
            None if parameter.required => {
                return Err(error(
                    format!("parameters.{}", parameter.name),
                    "required and has no default",
                ));
            }
            None => {
                values.insert(parameter.name.clone(), Value::String(String::new()));
            }
        }
    }
    Ok(values)
}

fn as_text(value: &Value) -> String {
    value
        .as_str()
        .map_or_else(|| value.to_string(), str::to_owned)
}

/// Replaces placeholders in `value` (at `path`) with `values`.
fn fill(
    value: &mut Value,
    path: &str,
    values: &BTreeMap<String, Value>,
) -> Result<(), TemplateError> {
    match value {
        Value::String(text) => {
            if let Some(name) = text.strip_prefix("${").and_then(|t| t.strip_suffix('}'))
                && !name.contains("${")
            {
                let found = values.get(name).ok_or_else(|| {
                    error(
                        path,
                        format!("refers to ${{{name}}}, which is not a parameter"),
                    )
                })?;
                *value = found.clone();
                return Ok(());
            }
            let mut out = String::new();
            let mut rest = text.as_str();
            while let Some(start) = rest.find("${") {
                out.push_str(&rest[..start]);
                let after = &rest[start + 2..];
                let end = after
                    .find('}')
                    .ok_or_else(|| error(path, "an unclosed ${ placeholder"))?;
                let name = &after[..end];
                let found = values.get(name).ok_or_else(|| {
                    error(
                        path,
                        format!("refers to ${{{name}}}, which is not a parameter"),
                    )
                })?;
                out.push_str(&as_text(found));
                rest = &after[end + 1..];
            }
            out.push_str(rest);
            *text = out;
            Ok(())
        }
        Value::Array(items) => items
            .iter_mut()
            .enumerate()
            .try_for_each(|(i, item)| fill(item, &format!("{path}[{i}]"), values)),
        Value::Object(map) => map
            .iter_mut()
            .try_for_each(|(key, item)| fill(item, &format!("{path}.{key}"), values)),
        _ => Ok(()),
    }
}

/// Fills the template's slots into an App spec for `project`.
pub fn instantiate(
    spec: &StackTemplateSpec,
    project: &str,
    given: &BTreeMap<String, String>,
) -> Result<AppSpec, TemplateError> {
    let values = values(spec, given)?;
    let mut components = Value::Array(spec.components.iter().cloned().map(Value::Object).collect());
    fill(&mut components, "components", &values)?;
    let app = json!({ "project": project, "components": components });
    serde_json::from_value(app).map_err(|e| error("components", e.to_string()))
}

/// Checks a template: its defaults have their slots' types and an instance with sample values
/// is a valid App.
pub fn check(spec: &StackTemplateSpec) -> Result<(), TemplateError> {
    let samples: BTreeMap<String, String> = spec
        .parameters
        .iter()
        .filter(|p| p.default.is_none())
        .map(|p| {
            let sample = match p.type_ {
                ParameterType::String => "sample",
                ParameterType::Integer => "1",
                ParameterType::Boolean => "true",
            };
            (p.name.clone(), sample.to_owned())
        })
        .collect();
    instantiate(spec, "sample", &samples).map(|_| ())
}

/// A template with the components of a running App and no slots (add them by editing).
pub fn from_app(
    app: &AppSpec,
    scope: Scope,
    description: &str,
) -> Result<StackTemplateSpec, TemplateError> {
    let components =
        serde_json::to_value(&app.components).map_err(|e| error("components", e.to_string()))?;
    let components: Vec<Map<String, Value>> =
        serde_json::from_value(components).map_err(|e| error("components", e.to_string()))?;
    Ok(StackTemplateSpec {
        description: description.to_owned(),
        scope,
        project: None,
        cluster: None,
        parameters: Vec::new(),
        components,
    })
}

/// The template as portable JSON (`{"apiVersion", "kind", "spec"}`).
pub fn export_json(spec: &StackTemplateSpec) -> String {
    serde_json::to_string_pretty(&json!({
        "apiVersion": "kubenest.io/v1alpha1",
        "kind": "StackTemplate",
        "spec": spec,
    }))
    .unwrap_or_default()
}

/// Reads exported JSON, refusing anything that is not a valid template.
pub fn import_json(text: &str) -> Result<StackTemplateSpec, TemplateError> {
    let value: Value =
        serde_json::from_str(text).map_err(|e| error("", format!("not JSON: {e}")))?;
    if value.get("kind").and_then(Value::as_str) != Some("StackTemplate") {
        return Err(error("kind", "expected StackTemplate"));
    }
    let spec: StackTemplateSpec =
        serde_json::from_value(value.get("spec").cloned().unwrap_or(Value::Null))
            .map_err(|e| error("spec", e.to_string()))?;
    check(&spec)?;
    Ok(spec)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn template() -> StackTemplateSpec {
        serde_json::from_value(json!({
            "scope": "global",
            "parameters": [
                {"name": "image", "type": "string", "required": true},
                {"name": "replicas", "type": "integer", "default": "2"},
                {"name": "host", "type": "string", "default": "shop.example.test"}
            ],
            "components": [{"name": "web", "workload": {
                "image": "${image}", "replicas": "${replicas}",
                "ingress": {"host": "www.${host}"}
            }}]
        }))
        .unwrap()
    }

    fn given(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    }

    #[test]
    fn slots_fill_with_types_defaults_and_text() {
        let app = instantiate(&template(), "shop", &given(&[("image", "nginx:1.27")])).unwrap();
        let web = app.components[0].workload.as_ref().unwrap();
        assert_eq!(web.image.as_deref(), Some("nginx:1.27"));
        assert_eq!(web.replicas, 2);
        assert_eq!(web.ingress.as_ref().unwrap().host, "www.shop.example.test");
        assert_eq!(app.project, "shop");
    }

    #[test]
    fn errors_name_the_slot() {
        let t = template();
        assert_eq!(
            instantiate(&t, "p", &given(&[])).unwrap_err().field,
            "parameters.image"
        );
        let e = instantiate(&t, "p", &given(&[("image", "x"), ("replicas", "many")])).unwrap_err();
        assert_eq!(e.field, "parameters.replicas");
        assert!(e.reason.contains("integer"));
        assert_eq!(
            instantiate(&t, "p", &given(&[("image", "x"), ("nope", "1")]))
                .unwrap_err()
                .field,
            "parameters.nope"
        );
        let mut broken = t.clone();
        broken.components[0].insert("workload".into(), json!({"image": "${missing}"}));
        let e = check(&broken).unwrap_err();
        assert_eq!(e.field, "components[0].workload.image");
    }

    #[test]
    fn a_running_app_becomes_a_template_that_survives_export_and_import() {
        let app = instantiate(&template(), "shop", &given(&[("image", "nginx:1.27")])).unwrap();
        let made = from_app(&app, Scope::Project, "from shop").unwrap();
        let again = import_json(&export_json(&made)).unwrap();
        assert_eq!(again, made);
        assert_eq!(instantiate(&again, "shop", &BTreeMap::new()).unwrap(), app);
        assert_eq!(
            import_json("{\"kind\": \"App\"}").unwrap_err().field,
            "kind"
        );
    }
}
