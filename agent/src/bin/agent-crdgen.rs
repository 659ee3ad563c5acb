//! Writes the agent's committed CRD YAML: `cargo run -p kubenest-agent --bin agent-crdgen`.

use std::path::PathBuf;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    // At run time: cargo reuses built binaries across clone locations.
    let dir = std::env::var_os("CARGO_MANIFEST_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")))
        .join("crds");
    std::fs::create_dir_all(&dir)?;
    let files = kubenest_agent::crd::yaml_files()?;
    for (name, text) in &files {
        std::fs::write(dir.join(name), text)?;
    }
    println!("wrote {} CRDs to {}", files.len(), dir.display());
    Ok(())
}
