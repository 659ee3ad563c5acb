//! The CRDs read as Flux's do: Ready and Status columns from the `Ready` condition, a top-level
//! `observedGeneration`, conditions and named lists as map lists (in a shape the API server
//! takes), and a description on every kind and field for `kubectl explain`.

use serde_json::Value;

const READY: &str = r#".status.conditions[?(@.type=="Ready")].status"#;
const MESSAGE: &str = r#".status.conditions[?(@.type=="Ready")].message"#;

/// Every kind with its served version as JSON.
fn versions() -> Vec<(String, Value)> {
    kubenest_crds::all()
        .into_iter()
        .map(|crd| {
            let kind = crd.spec.names.kind.clone();
            (kind, serde_json::to_value(&crd.spec.versions[0]).unwrap())
        })
        .collect()
}

fn schema(version: &Value) -> &Value {
    &version["schema"]["openAPIV3Schema"]
}

#[test]
fn every_kind_shows_ready_and_status_before_age() {
    for (kind, version) in versions() {
        let columns: Vec<(&str, &str)> = version["additionalPrinterColumns"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| (c["name"].as_str().unwrap(), c["jsonPath"].as_str().unwrap()))
            .collect();
        let tail = &columns[columns.len() - 3..];
        assert_eq!(
            tail,
            [
                ("Ready", READY),
                ("Status", MESSAGE),
                ("Age", ".metadata.creationTimestamp")
            ],
            "{kind}"
        );
    }
}

#[test]
fn every_status_has_a_top_level_observed_generation() {
    for (kind, version) in versions() {
        let field = &schema(&version)["properties"]["status"]["properties"]["observedGeneration"];
        assert_eq!(
            (field["type"].as_str(), field["format"].as_str()),
            (Some("integer"), Some("int64")),
            "{kind}"
        );
    }
}

/// The path of every map list under `schema`, checked against what kube-apiserver requires of
/// one: object items whose keys are scalar properties, required or defaulted.
fn map_lists(schema: &Value, path: String, found: &mut Vec<(String, String)>) {
    if schema["x-kubernetes-list-type"] == "map" {
        let keys = schema["x-kubernetes-list-map-keys"].as_array().unwrap();
        let items = &schema["items"];
        assert_eq!(items["type"], "object", "{path}: items must be objects");
        for key in keys {
            let key = key.as_str().unwrap();
            let property = &items["properties"][key];
            let scalar = matches!(property["type"].as_str(), Some("string" | "integer"));
            assert!(scalar, "{path}: key {key} must be a scalar property");
            let required = items["required"]
                .as_array()
                .is_some_and(|r| r.iter().any(|k| k == key));
            assert!(
                required || property.get("default").is_some(),
                "{path}: key {key} must be required or defaulted"
            );
            found.push((path.clone(), key.to_owned()));
        }
    }
    if let Some(properties) = schema["properties"].as_object() {
        for (name, property) in properties {
            map_lists(property, format!("{path}.{name}"), found);
        }
    }
    if schema["items"].is_object() {
        map_lists(&schema["items"], format!("{path}[]"), found);
    }
}

#[test]
fn conditions_and_named_lists_are_map_lists_the_api_server_takes() {
    let mut all = Vec::new();
    for (kind, version) in versions() {
        let mut found = Vec::new();
        map_lists(schema(&version), String::new(), &mut found);
        assert!(
            found.contains(&(".status.conditions".into(), "type".into())),
            "{kind}: {found:?}"
        );
        all.extend(
            found
                .into_iter()
                .map(|(path, key)| (kind.clone(), path, key)),
        );
    }
    let named = |kind: &str, path: &str| (kind.to_owned(), path.to_owned(), "name".to_owned());
    for expected in [
        named("App", ".spec.components"),
        named("App", ".spec.components[].workload.env"),
        named("StackTemplate", ".spec.parameters"),
        named("StackTemplate", ".spec.components"),
    ] {
        assert!(all.contains(&expected), "{expected:?} is not a map list");
    }
}

#[test]
fn no_uniqueness_rule_is_left_beside_the_map_lists() {
    let text = serde_json::to_string(&kubenest_crds::all()).unwrap();
    assert!(
        !text.contains("exists_one"),
        "a CEL uniqueness rule is left"
    );
    assert!(
        !text.contains("must be unique"),
        "a CEL uniqueness rule is left"
    );
}

/// The path of every property under `schema` without a description.
fn undescribed(schema: &Value, path: String, missing: &mut Vec<String>) {
    if let Some(properties) = schema["properties"].as_object() {
        for (name, property) in properties {
            let here = format!("{path}.{name}");
            // `apiVersion`, `kind` and `metadata` are described by the API server itself.
            let standard = path.is_empty() && ["apiVersion", "kind", "metadata"].contains(&&**name);
            if property.get("description").is_none() && !standard {
                missing.push(here.clone());
            }
            undescribed(property, here, missing);
        }
    }
    if schema["items"].is_object() {
        undescribed(&schema["items"], format!("{path}[]"), missing);
    }
}

#[test]
fn kubectl_explain_has_a_description_for_every_kind_and_field() {
    for (kind, version) in versions() {
        let top = schema(&version)["description"].as_str().unwrap_or_default();
        assert!(top.contains(&format!("{kind}:")), "{kind}: {top}");
        assert!(!top.contains("Auto-generated"), "{kind}: {top}");
        let mut missing = Vec::new();
        undescribed(schema(&version), String::new(), &mut missing);
        assert!(missing.is_empty(), "{kind}: no description for {missing:?}");
    }
}
