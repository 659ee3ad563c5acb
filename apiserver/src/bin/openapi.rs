//! Writes the OpenAPI document to `apiserver/openapi.json` (a test fails when it drifts).

fn main() -> anyhow::Result<()> {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("openapi.json");
    let text = serde_json::to_string_pretty(&kubenest_apiserver::openapi())?;
    std::fs::write(&path, format!("{text}\n"))?;
    println!("wrote {}", path.display());
    Ok(())
}
