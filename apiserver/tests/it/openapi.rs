//! The committed OpenAPI document is the one the code generates: regenerate it with
//! `cargo run -p kubenest-apiserver --bin apiserver-openapi`.

#[test]
fn the_committed_openapi_document_matches_the_code() {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("openapi.json");
    let committed: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    let generated = serde_json::to_value(kubenest_apiserver::openapi()).unwrap();
    assert!(
        committed == generated,
        "apiserver/openapi.json is stale: run `cargo run -p kubenest-apiserver --bin apiserver-openapi`"
    );
}

#[test]
fn every_route_is_documented_with_its_error_shape_and_bearer_security() {
    let document = serde_json::to_value(kubenest_apiserver::openapi()).unwrap();
    let paths = document["paths"].as_object().unwrap();
    assert!(paths.len() >= 30, "{} paths", paths.len());
    for (path, item) in paths {
        for (method, operation) in item.as_object().unwrap() {
            let public =
                ["/api/v1/login", "/api/v1/refresh", "/api/v1/logout"].contains(&path.as_str());
            let secured = operation
                .get("security")
                .is_some_and(|s| !s.as_array().unwrap().is_empty());
            assert_eq!(secured, !public, "{method} {path} security");
        }
    }
    assert!(document["components"]["securitySchemes"]["bearer"].is_object());
}
