//! Writes the committed CRD YAML: `cargo run -p kubenest-crds --bin crdgen`.

use std::path::PathBuf;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    // At run time: cargo reuses built tests across clone locations, so a compile-time path can
    // point at a clone that is gone.
    let dir = std::env::var_os("CARGO_MANIFEST_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")))
        .join("yaml");
    std::fs::create_dir_all(&dir)?;
    for entry in std::fs::read_dir(&dir)? {
        let path = entry?.path();
        if path.extension().is_some_and(|e| e == "yaml") {
            std::fs::remove_file(path)?;
        }
    }
    let files = kubenest_crds::yaml_files()?;
    for (name, text) in &files {
        std::fs::write(dir.join(name), text)?;
    }
    println!("wrote {} CRDs to {}", files.len(), dir.display());
    Ok(())
}
