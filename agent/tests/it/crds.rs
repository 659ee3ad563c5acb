//! The committed CRD YAML of the agent's own kinds is what the code generates.

use std::path::PathBuf;

#[test]
fn committed_crds_match_the_code() {
    let dir = std::env::var_os("CARGO_MANIFEST_DIR")
        .map(PathBuf::from)
        .unwrap()
        .join("crds");
    for (name, generated) in kubenest_agent::crd::yaml_files().unwrap() {
        let committed = std::fs::read_to_string(dir.join(&name)).unwrap_or_default();
        assert!(
            committed == generated,
            "agent/crds/{name} is out of date: run `cargo run -p kubenest-agent --bin agent-crdgen`"
        );
    }
}

/// Every property under `schema` without a description.
fn undescribed(schema: &serde_json::Value, path: String, missing: &mut Vec<String>) {
    if let Some(properties) = schema["properties"].as_object() {
        for (name, property) in properties {
            let here = format!("{path}.{name}");
            if property.get("description").is_none() {
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
fn the_agents_kinds_read_as_fluxs_do() {
    for crd in kubenest_agent::crd::all() {
        let kind = crd.spec.names.kind.clone();
        let version = serde_json::to_value(&crd.spec.versions[0]).unwrap();
        let columns: Vec<&str> = version["additionalPrinterColumns"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c["name"].as_str().unwrap())
            .collect();
        assert_eq!(
            columns[columns.len() - 3..],
            ["Ready", "Status", "Age"],
            "{kind}"
        );
        let schema = &version["schema"]["openAPIV3Schema"];
        let description = schema["description"].as_str().unwrap();
        assert!(
            description.contains(&format!("{kind}:")),
            "{kind}: {description}"
        );
        let status = &schema["properties"]["status"]["properties"];
        assert_eq!(status["observedGeneration"]["format"], "int64", "{kind}");
        let conditions = &status["conditions"];
        assert_eq!(conditions["x-kubernetes-list-type"], "map", "{kind}");
        assert_eq!(
            conditions["x-kubernetes-list-map-keys"],
            serde_json::json!(["type"]),
            "{kind}"
        );
        let mut missing = Vec::new();
        undescribed(
            &schema["properties"]["status"],
            ".status".into(),
            &mut missing,
        );
        assert!(missing.is_empty(), "{kind}: no description for {missing:?}");
    }
}
