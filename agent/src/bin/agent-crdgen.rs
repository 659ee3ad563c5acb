//! Writes the agent's committed CRD YAML, in `agent/crds/` and in the agent chart's `crds/`:
//! `cargo run -p kubenest-agent --bin agent-crdgen`.

use std::path::PathBuf;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    // At run time: cargo reuses built binaries across clone locations.
    let manifest = std::env::var_os("CARGO_MANIFEST_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")));
    let files = kubenest_agent::crd::yaml_files()?;
    for dir in [
        manifest.join("crds"),
        manifest.join("../charts/kubenest-agent/crds"),
    ] {
        std::fs::create_dir_all(&dir)?;
        for (name, text) in &files {
            std::fs::write(dir.join(name), text)?;
        }
        println!("wrote {} CRDs to {}", files.len(), dir.display());
    }
    Ok(())
}
